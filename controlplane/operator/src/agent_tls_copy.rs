//! Single-tenant mode, where agents of every namespace use the coordinator of the release
//! namespace: a Pod can mount only Secrets of its own namespace, so before the first Pod of a
//! namespace is admitted the webhook copies the client half of the coordinator's
//! `<service>-agent-tls` (`ca.crt`, `agent.crt`, `agent.key`; never the server key) into that
//! namespace under the same name ([`crate::agent_tls::copy_source`] says when).
//!
//! On the admission path, once per namespace and process, bounded by [`BOUND`]: a copy that
//! fails or is late is logged and the Pod is admitted anyway (its agent then runs the program
//! unprofiled and says why). An existing Secret of that name is left alone. Copies carry the
//! label [`COPY_LABEL`] (value: the source namespace); having no owner across namespaces, they
//! outlive an uninstall (`kubectl delete secret -A -l nvidia.com/nsight-agent-tls-copy-of`).

use std::{
    collections::{BTreeMap, HashSet},
    sync::Mutex,
    time::Duration,
};

use k8s_openapi::api::core::v1::Secret;
use kube::{
    api::{ObjectMeta, PostParams},
    Api, Client,
};

use crate::{agent_tls::copy_source, certs::AGENT_KEYS};

/// The longest an admission waits for a copy.
pub const BOUND: Duration = Duration::from_secs(2);
/// Label of a copy; its value is the namespace copied from.
pub const COPY_LABEL: &str = "nvidia.com/nsight-agent-tls-copy-of";

/// The copier (holds an API client; `Debug` names only the URL).
pub struct AgentCertCopier {
    client: Client,
    /// The coordinator URL given to agents (`{namespace}` not yet replaced).
    url: String,
    done: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for AgentCertCopier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentCertCopier")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl AgentCertCopier {
    pub fn new(client: Client, url: String) -> Self {
        Self {
            client,
            url,
            done: Mutex::new(HashSet::new()),
        }
    }

    /// Makes sure Pods of `namespace` find the client half; never fails the admission.
    pub async fn ensure(&self, namespace: &str) {
        let Some((source, name)) = copy_source(&self.url, namespace) else {
            return;
        };
        if self.is_done(namespace) {
            return;
        }
        match tokio::time::timeout(BOUND, self.copy(&source, &name, namespace)).await {
            Ok(Ok(())) => {
                if let Ok(mut done) = self.done.lock() {
                    done.insert(namespace.to_owned());
                }
            }
            Ok(Err(e)) => tracing::warn!(
                %namespace, secret = %name, from = %source, error = %e,
                "could not copy the agent certificates; agents of this namespace will run \
                 their programs unprofiled"
            ),
            Err(_) => tracing::warn!(
                %namespace, secret = %name, from = %source,
                "copying the agent certificates took longer than {BOUND:?}; retried on the next Pod"
            ),
        }
    }

    fn is_done(&self, namespace: &str) -> bool {
        self.done
            .lock()
            .map(|d| d.contains(namespace))
            .unwrap_or(false)
    }

    async fn copy(&self, source: &str, name: &str, namespace: &str) -> kube::Result<()> {
        let target: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        if target.get_opt(name).await?.is_some() {
            return Ok(());
        }
        let original: Secret = Api::namespaced(self.client.clone(), source)
            .get(name)
            .await?;
        let data = original
            .data
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| AGENT_KEYS.contains(&k.as_str()))
            .collect::<BTreeMap<_, _>>();
        let copy = Secret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                labels: Some(BTreeMap::from([(COPY_LABEL.to_owned(), source.to_owned())])),
                ..ObjectMeta::default()
            },
            data: Some(data),
            type_: Some("Opaque".into()),
            ..Secret::default()
        };
        match target.create(&PostParams::default(), &copy).await {
            Ok(_) => {
                tracing::info!(%namespace, secret = %name, from = %source, "agent certificates copied");
                Ok(())
            }
            // Another replica was first.
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }
}
