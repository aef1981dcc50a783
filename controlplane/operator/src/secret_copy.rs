//! Single-tenant installs keep the control plane in the release namespace while profiled Pods
//! run everywhere, and a Pod can mount only Secrets of its own namespace. So before admitting
//! the first profiled Pod of a namespace, the webhook copies there, under the same names:
//!
//! - the client half of the coordinator's `<service>-agent-tls` (`ca.crt`, `agent.crt`,
//!   `agent.key`; never the server key), when the coordinator URL names another namespace
//!   ([`crate::agent_tls::copy_source`]);
//! - the storage config Secret of the release namespace's NsightCloudStorageConfig, when the
//!   Pod's namespace has none of its own (`patch::report_storage`).
//!
//! [`copies_for`] decides (pure); [`SecretCopier`] copies, on the admission path, at most once
//! per (Secret, namespace) and [`RECHECK`], bounded by [`BOUND`]: a copy that fails or is late is
//! logged and the Pod admitted anyway (its agent then runs the program unprofiled and says
//! why). A copy whose source changed (renewed certificates) is replaced by the source's keys,
//! at an admission or by [`SecretCopier::keep_fresh`] every [`RECHECK`]; a Secret of that name
//! that is not a copy is left alone. Copies carry the label [`COPY_LABEL`]
//! (value: the source namespace); having no owner across namespaces, they outlive an uninstall
//! (`kubectl delete secret -A -l nvidia.com/nsight-copied-from`).

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Secret;
use kube::{
    api::{ObjectMeta, PostParams},
    Api, Client,
};

use crate::{agent_tls::copy_source, certs::AGENT_KEYS, patch::ReportStorage, settings::Settings};

/// The longest an admission waits for its copies.
pub const BOUND: Duration = Duration::from_secs(2);
/// A copy found up to date is checked again (source renewed?) by an admission after this long.
pub const RECHECK: Duration = Duration::from_secs(600);
/// Label of a copy; its value is the namespace copied from.
pub const COPY_LABEL: &str = "nvidia.com/nsight-copied-from";
/// The key of a storage config Secret when its reference names none.
const STORAGE_CONFIG_KEY: &str = "storage-config.yaml";

/// One Secret to copy into the Pod's namespace.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SecretCopy {
    pub from_namespace: String,
    pub name: String,
    /// Only these keys.
    pub keys: Vec<String>,
}

/// What a Pod of `namespace`, injected with `storage`, needs copied.
pub fn copies_for(
    namespace: &str,
    settings: &Settings,
    storage: &ReportStorage,
) -> Vec<SecretCopy> {
    let mut copies = Vec::new();
    if let Some((from, name)) = settings
        .coordinator_url
        .as_deref()
        .and_then(|url| copy_source(url, namespace))
    {
        copies.push(SecretCopy {
            from_namespace: from,
            name,
            keys: AGENT_KEYS.iter().map(|k| (*k).to_owned()).collect(),
        });
    }
    if let ReportStorage::Secret {
        secret,
        copied_from: Some(from),
        ..
    } = storage
    {
        copies.push(SecretCopy {
            from_namespace: from.clone(),
            name: secret.name.clone(),
            keys: vec![secret
                .key
                .clone()
                .unwrap_or_else(|| STORAGE_CONFIG_KEY.into())],
        });
    }
    copies
}

/// The shell: copies with the webhook's client.
pub struct SecretCopier {
    client: Client,
    /// When each (copy, namespace) was last found up to date.
    done: Mutex<HashMap<(SecretCopy, String), Instant>>,
}

impl std::fmt::Debug for SecretCopier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretCopier").finish_non_exhaustive()
    }
}

impl SecretCopier {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            done: Mutex::new(HashMap::new()),
        }
    }

    /// Makes each copy in `namespace`; never fails the admission.
    pub async fn ensure(&self, namespace: &str, copies: &[SecretCopy]) {
        for copy in copies {
            let key = (copy.clone(), namespace.to_owned());
            let fresh = self
                .done
                .lock()
                .map(|d| d.get(&key).is_some_and(|at| at.elapsed() < RECHECK))
                .unwrap_or(false);
            if fresh {
                continue;
            }
            match tokio::time::timeout(BOUND, self.copy(copy, namespace)).await {
                Ok(Ok(())) => {
                    if let Ok(mut done) = self.done.lock() {
                        done.insert(key, Instant::now());
                    }
                }
                Ok(Err(e)) => tracing::warn!(
                    %namespace, secret = %copy.name, from = %copy.from_namespace, error = %e,
                    "could not copy the Secret the injected Pod mounts; its agents will run \
                     their programs unprofiled"
                ),
                Err(_) => tracing::warn!(
                    %namespace, secret = %copy.name, from = %copy.from_namespace,
                    "copying the Secret took longer than {BOUND:?}; retried on the next Pod"
                ),
            }
        }
    }

    /// Every [`RECHECK`]: each copy this webhook made (found by [`COPY_LABEL`]) follows its
    /// source, so renewed certificates reach namespaces where no Pod is admitted. A failure is
    /// logged and retried at the next round.
    pub async fn keep_fresh(self: std::sync::Arc<Self>) {
        loop {
            tokio::time::sleep(RECHECK).await;
            if let Err(e) = self.refresh_all().await {
                tracing::warn!(error = %e, "copied Secrets not refreshed; retried later");
            }
        }
    }

    async fn refresh_all(&self) -> kube::Result<()> {
        let copies = Api::<Secret>::all(self.client.clone())
            .list_metadata(&kube::api::ListParams::default().labels(COPY_LABEL))
            .await?;
        for meta in copies.items {
            let (Some(name), Some(namespace), Some(from)) = (
                meta.metadata.name,
                meta.metadata.namespace,
                meta.metadata.labels.and_then(|mut l| l.remove(COPY_LABEL)),
            ) else {
                continue;
            };
            let Some(keys) = self.copied_keys(&name, &namespace).await? else {
                continue;
            };
            let copy = SecretCopy {
                from_namespace: from,
                name,
                keys,
            };
            if let Err(e) = self.copy(&copy, &namespace).await {
                tracing::warn!(%namespace, secret = %copy.name, from = %copy.from_namespace, error = %e, "copied Secret not refreshed");
            }
        }
        Ok(())
    }

    /// The keys a copy holds (what it was made of).
    async fn copied_keys(&self, name: &str, namespace: &str) -> kube::Result<Option<Vec<String>>> {
        Ok(Api::<Secret>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await?
            .map(|s| s.data.unwrap_or_default().into_keys().collect()))
    }

    async fn copy(&self, copy: &SecretCopy, namespace: &str) -> kube::Result<()> {
        let target: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let existing = target.get_opt(&copy.name).await?;
        if existing.as_ref().is_some_and(|e| !is_copy_of(e, copy)) {
            // A Secret of the namespace's own: never touched.
            return Ok(());
        }
        let original: Secret = Api::namespaced(self.client.clone(), &copy.from_namespace)
            .get(&copy.name)
            .await?;
        let data = original
            .data
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| copy.keys.contains(k))
            .collect::<BTreeMap<_, _>>();
        if let Some(mut existing) = existing {
            if existing.data.as_ref() == Some(&data) {
                return Ok(());
            }
            // The source was renewed (certificates) or changed: the copy follows.
            existing.data = Some(data);
            return match target
                .replace(&copy.name, &PostParams::default(), &existing)
                .await
            {
                Ok(_) => {
                    tracing::info!(%namespace, secret = %copy.name, from = %copy.from_namespace, "copied Secret refreshed");
                    Ok(())
                }
                // Another replica refreshed it first.
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                Err(e) => Err(e),
            };
        }
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(copy.name.clone()),
                namespace: Some(namespace.to_owned()),
                labels: Some(BTreeMap::from([(
                    COPY_LABEL.to_owned(),
                    copy.from_namespace.clone(),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(data),
            type_: Some("Opaque".into()),
            ..Secret::default()
        };
        match target.create(&PostParams::default(), &secret).await {
            Ok(_) => {
                tracing::info!(%namespace, secret = %copy.name, from = %copy.from_namespace, "Secret copied");
                Ok(())
            }
            // Another replica was first.
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Whether `secret` is a copy this webhook made of `copy`'s source (its label names the source
/// namespace).
fn is_copy_of(secret: &Secret, copy: &SecretCopy) -> bool {
    secret
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(COPY_LABEL))
        == Some(&copy.from_namespace)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use nsight_api::SecretRef;

    use super::*;

    #[test]
    fn a_pod_away_from_the_control_plane_gets_its_certificates_and_storage_copied() {
        let settings = Settings {
            coordinator_url: Some("https://nsight-operator-coordinator.nsight.svc:8081".into()),
            ..Settings::default()
        };
        let storage = ReportStorage::Secret {
            config: "nsight/nsight-operator-storage".into(),
            secret: SecretRef {
                name: "nsight-operator-storage-credentials".into(),
                key: None,
            },
            copied_from: Some("nsight".into()),
        };
        let copies = copies_for("team", &settings, &storage);
        assert_eq!(copies.len(), 2);
        assert_eq!(copies[0].name, "nsight-operator-coordinator-agent-tls");
        assert_eq!(copies[0].keys, ["ca.crt", "agent.crt", "agent.key"]);
        assert_eq!(copies[1].from_namespace, "nsight");
        assert_eq!(copies[1].keys, ["storage-config.yaml"]);
        // In the control plane's own namespace (or multi-tenant): nothing to copy.
        let own = ReportStorage::Secret {
            config: "s".into(),
            secret: SecretRef {
                name: "s".into(),
                key: None,
            },
            copied_from: None,
        };
        assert!(copies_for("nsight", &settings, &own).is_empty());
    }

    #[test]
    fn only_copies_of_the_same_source_are_refreshed() {
        let copy = SecretCopy {
            from_namespace: "nsight".into(),
            name: "c-agent-tls".into(),
            keys: vec!["ca.crt".into()],
        };
        let labelled = |value: Option<&str>| Secret {
            metadata: ObjectMeta {
                labels: value.map(|v| BTreeMap::from([(COPY_LABEL.to_owned(), v.to_owned())])),
                ..ObjectMeta::default()
            },
            ..Secret::default()
        };
        assert!(is_copy_of(&labelled(Some("nsight")), &copy));
        assert!(!is_copy_of(&labelled(Some("other")), &copy));
        assert!(!is_copy_of(&labelled(None), &copy));
    }
}
