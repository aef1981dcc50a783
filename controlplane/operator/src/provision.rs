//! Multi-tenant auto-provisioning: the first Pod injected in a namespace gives that namespace
//! its control plane as custom resources (the manager's controllers then deploy them):
//!
//! ```text
//! NsightCloudStorageConfig nsight-operator-storage        (operator-managed MinIO)
//! NsightCoordinator        nsight-operator-coordinator
//! NsightOtelCollector      nsight-operator-otel-collector (-> storage)
//! OTLPProxyConfig          nsight-operator-otlp-proxy     (-> collector)
//! NsightAnalysis           nsight-operator-analysis       (-> storage)
//! NsightGateway            nsight-operator-gateway        (-> storage; the documented name)
//! ```
//!
//! Create-if-absent, never apply: a kind of which the namespace already has any resource is
//! left alone (the namespace admin's own coordinator is respected), and a create that races
//! with another replica (409) is fine. Off the admission path: the webhook queues the
//! namespace ([`Provisioner::request`], never waits) and one task does the API calls. A
//! namespace is handled once per process; one that failed is retried on its next admission.
//!
//! [`tenant`] (what to create) is pure; [`Provisioner`] is the shell.

use std::{
    collections::{BTreeMap, HashSet},
    fmt::Debug,
    sync::{Arc, Mutex},
};

use k8s_openapi::NamespaceResourceScope;
use kube::{
    api::{ListParams, ObjectMeta, PostParams},
    Api, Client, Resource,
};
use nsight_api::{
    MinioSpec, NsightAnalysis, NsightAnalysisSpec, NsightCloudStorageConfig,
    NsightCloudStorageConfigSpec, NsightCoordinator, NsightCoordinatorSpec, NsightGateway,
    NsightGatewaySpec, NsightOtelCollector, NsightOtelCollectorSpec, OTLPProxyConfig,
    OTLPProxyConfigSpec, StorageType,
};
use serde::{de::DeserializeOwned, Serialize};
use tokio::sync::mpsc;

/// Names of the provisioned resources.
pub const STORAGE: &str = "nsight-operator-storage";
pub const COORDINATOR: &str = "nsight-operator-coordinator";
pub const COLLECTOR: &str = "nsight-operator-otel-collector";
pub const PROXY: &str = "nsight-operator-otlp-proxy";
pub const ANALYSIS: &str = "nsight-operator-analysis";
pub const GATEWAY: &str = "nsight-operator-gateway";
/// Label on every provisioned resource.
pub const PROVISIONED_LABEL: &str = "nvidia.com/nsight-auto-provisioned";
/// Namespaces queued at most; more wait for a later admission.
const QUEUE: usize = 64;

/// One namespace's control plane, in creation order (what others reference comes first).
#[derive(Clone, Debug)]
pub struct Tenant {
    pub storage: NsightCloudStorageConfig,
    pub coordinator: NsightCoordinator,
    pub collector: NsightOtelCollector,
    pub proxy: OTLPProxyConfig,
    pub analysis: NsightAnalysis,
    pub gateway: NsightGateway,
}

/// The resources to create in `namespace`. Pure.
pub fn tenant(namespace: &str) -> Tenant {
    let meta = |name: &str| ObjectMeta {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        labels: Some(BTreeMap::from([
            (PROVISIONED_LABEL.to_owned(), "true".to_owned()),
            (
                "app.kubernetes.io/created-by".to_owned(),
                crate::events::REPORTER.to_owned(),
            ),
        ])),
        ..ObjectMeta::default()
    };
    let storage = Some(STORAGE.to_owned());
    Tenant {
        storage: NsightCloudStorageConfig {
            metadata: meta(STORAGE),
            spec: NsightCloudStorageConfigSpec {
                enabled: Some(true),
                storage_type: Some(StorageType::Minio),
                minio: Some(MinioSpec {
                    enabled: Some(true),
                    ..MinioSpec::default()
                }),
                ..NsightCloudStorageConfigSpec::default()
            },
            status: None,
        },
        coordinator: NsightCoordinator {
            metadata: meta(COORDINATOR),
            spec: NsightCoordinatorSpec::default(),
            status: None,
        },
        collector: NsightOtelCollector {
            metadata: meta(COLLECTOR),
            spec: NsightOtelCollectorSpec {
                cloud_storage_ref: storage.clone(),
                ..NsightOtelCollectorSpec::default()
            },
            status: None,
        },
        proxy: OTLPProxyConfig {
            metadata: meta(PROXY),
            spec: OTLPProxyConfigSpec {
                collector_ref: Some(COLLECTOR.into()),
                ..OTLPProxyConfigSpec::default()
            },
            status: None,
        },
        analysis: NsightAnalysis {
            metadata: meta(ANALYSIS),
            spec: NsightAnalysisSpec {
                cloud_storage_ref: storage.clone(),
                ..NsightAnalysisSpec::default()
            },
            status: None,
        },
        gateway: NsightGateway {
            metadata: meta(GATEWAY),
            spec: NsightGatewaySpec {
                cloud_storage_ref: storage,
                ..NsightGatewaySpec::default()
            },
            status: None,
        },
    }
}

/// What provisioning did with one kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Created,
    /// The namespace already has a resource of this kind (its name).
    Exists(String),
}

/// Provisioning a namespace failed at one kind.
#[derive(Debug, thiserror::Error)]
#[error("cannot provision {kind} in namespace {namespace}")]
pub struct ProvisionError {
    pub kind: &'static str,
    pub namespace: String,
    #[source]
    pub source: kube::Error,
}

/// The request path's handle: queues namespaces, never waits.
#[derive(Clone, Debug)]
pub struct Provisioner {
    tx: mpsc::Sender<String>,
    /// Namespaces done or queued.
    seen: Arc<Mutex<HashSet<String>>>,
}

impl Provisioner {
    /// The handle and the task that provisions what it queues (run it on the runtime).
    pub fn start(client: Client) -> (Self, impl std::future::Future<Output = ()> + Send) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let seen: Arc<Mutex<HashSet<String>>> = Arc::default();
        (
            Self {
                tx,
                seen: seen.clone(),
            },
            work(client, rx, seen),
        )
    }

    /// A Pod was injected in `namespace`: provision it unless done (or queued) already.
    pub fn request(&self, namespace: &str) {
        let mut seen = lock(&self.seen);
        if seen.contains(namespace) {
            return;
        }
        if self.tx.try_send(namespace.to_owned()).is_ok() {
            seen.insert(namespace.to_owned());
        }
    }
}

fn lock(seen: &Mutex<HashSet<String>>) -> std::sync::MutexGuard<'_, HashSet<String>> {
    seen.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn work(client: Client, mut rx: mpsc::Receiver<String>, seen: Arc<Mutex<HashSet<String>>>) {
    while let Some(namespace) = rx.recv().await {
        match provision(&client, &namespace).await {
            Ok(done) => tracing::info!(%namespace, ?done, "namespace provisioned"),
            Err(e) => {
                tracing::warn!(error = %e, cause = %e.source, "provisioning failed; retried on the next admission");
                lock(&seen).remove(&namespace);
            }
        }
    }
}

/// Creates what `namespace` lacks of [`tenant`]; what each kind came to.
pub async fn provision(
    client: &Client,
    namespace: &str,
) -> Result<Vec<(&'static str, Outcome)>, ProvisionError> {
    let t = tenant(namespace);
    Ok(vec![
        ensure(client, namespace, t.storage).await?,
        ensure(client, namespace, t.coordinator).await?,
        ensure(client, namespace, t.collector).await?,
        ensure(client, namespace, t.proxy).await?,
        ensure(client, namespace, t.analysis).await?,
        ensure(client, namespace, t.gateway).await?,
    ])
}

async fn ensure<K>(
    client: &Client,
    namespace: &str,
    object: K,
) -> Result<(&'static str, Outcome), ProvisionError>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let kind: &'static str = match K::kind(&()) {
        std::borrow::Cow::Borrowed(k) => k,
        std::borrow::Cow::Owned(_) => "resource",
    };
    let fail = |source| ProvisionError {
        kind,
        namespace: namespace.into(),
        source,
    };
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let existing = api
        .list_metadata(&ListParams::default().limit(1))
        .await
        .map_err(fail)?;
    if let Some(first) = existing.items.first() {
        let name = first.metadata.name.clone().unwrap_or_default();
        return Ok((kind, Outcome::Exists(name)));
    }
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok((kind, Outcome::Created)),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let name = object.meta().name.clone().unwrap_or_default();
            Ok((kind, Outcome::Exists(name)))
        }
        Err(e) => Err(fail(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tenant_references_its_own_storage_and_collector() {
        let t = tenant("team-a");
        assert_eq!(t.gateway.metadata.name.as_deref(), Some(GATEWAY));
        assert_eq!(t.gateway.spec.cloud_storage_ref.as_deref(), Some(STORAGE));
        assert_eq!(t.analysis.spec.cloud_storage_ref.as_deref(), Some(STORAGE));
        assert_eq!(t.collector.spec.cloud_storage_ref.as_deref(), Some(STORAGE));
        assert_eq!(t.proxy.spec.collector_ref.as_deref(), Some(COLLECTOR));
        assert_eq!(t.storage.spec.storage_type, Some(StorageType::Minio));
        for meta in [
            &t.storage.metadata,
            &t.coordinator.metadata,
            &t.collector.metadata,
            &t.proxy.metadata,
            &t.analysis.metadata,
            &t.gateway.metadata,
        ] {
            assert_eq!(meta.namespace.as_deref(), Some("team-a"));
            assert!(meta
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(PROVISIONED_LABEL)));
        }
    }
}
