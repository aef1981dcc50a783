//! What the webhook knows about the cluster, the `World`: namespace labels,
//! NsightOperatorProfileConfigs, where each NsightCloudStorageConfig keeps its
//! `storage-config.yaml`, and the OTLPProxyConfigs of mirroring Pods, as an immutable [`Snapshot`] that each admission reads for one
//! namespace ([`View`]) without copying any config.
//!
//! ```text
//! API server ─watch─> reflector Store<NsightOperatorProfileConfig>  (managedFields, status dropped)
//!            ─watch─> reflector Store<PartialObjectMeta<Namespace>> (labels only)
//!            ─watch─> reflector Store<NsightCloudStorageConfig>  (-> the Secret agents mount)
//!            ─watch─> reflector Store<OTLPProxyConfig>  (-> the OTLP sidecar of mirroring Pods)
//!                        │ on InitDone / Apply / Delete: rebuild that part of the index
//!                        v
//!                 RwLock<Arc<Snapshot>> ── view(ns) ──> decide (pure)
//! ```
//!
//! Two worlds: [`KubeWorld`] (the stores above: a config created, changed or deleted applies to
//! the next admission, no restart) and [`StaticWorld`] (fixed, from JSON: tests and the
//! benchmark). Both answer through the same [`Snapshot`] index.
//!
//! Cluster-wide rules are the NsightOperatorProfileConfigs of one namespace (the operator's,
//! `--cluster-config-namespace`): they apply to Pods of every namespace, after the Pod's own
//! namespace's configs.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, RwLock,
    },
};

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    core::PartialObjectMeta,
    runtime::{
        reflector::{self, Store},
        watcher, WatchStreamExt,
    },
    Api, Client, ResourceExt,
};
use nsight_api::{
    NsightCloudStorageConfig, NsightOperatorProfileConfig, OTLPProxyConfig, SecretRef,
};
use serde::Deserialize;

use crate::render::storage::{backend, config_secret, Backend};

type Config = NsightOperatorProfileConfig;
type Labels = BTreeMap<String, String>;
/// A namespace's storage configs by name: what an injected Pod gets from each.
pub type StorageSecrets = BTreeMap<String, PodStorage>;

/// What an injected Pod gets from one NsightCloudStorageConfig.
#[derive(Clone, Debug, PartialEq)]
pub enum PodStorage {
    /// The Secret (and key) of its `storage-config.yaml`.
    Secret(SecretRef),
    /// `storage_type: local`: reports stay in the Pod.
    Local,
    /// `enabled: false`, or an external bucket without its Secret.
    None,
}

impl PodStorage {
    pub fn of(cr: &NsightCloudStorageConfig) -> Self {
        match (backend(cr), config_secret(cr)) {
            (Backend::Local, _) => Self::Local,
            (_, Some(secret)) => Self::Secret(secret),
            (_, None) => Self::None,
        }
    }
}

/// One OTLPProxyConfig, as the webhook injects its sidecar.
#[derive(Clone, Debug, PartialEq)]
pub struct OtlpProxy {
    /// The config's name (= its ConfigMap's).
    pub name: String,
    /// It names a collector, so its ConfigMap has the sidecar's Envoy bootstrap.
    pub forwarding: bool,
    pub resources: Option<k8s_openapi::api::core::v1::ResourceRequirements>,
}

impl OtlpProxy {
    pub fn of(cr: &OTLPProxyConfig) -> Self {
        Self {
            name: cr.metadata.name.clone().unwrap_or_default(),
            forwarding: cr.spec.collector_ref.is_some(),
            resources: cr.spec.resources.clone(),
        }
    }
}

/// What the decision reads about one namespace, at one moment.
#[derive(Clone, Debug, Default)]
pub struct View {
    /// The namespace's labels (empty when unknown).
    pub labels: Arc<Labels>,
    /// The namespace's profile configs, sorted by name.
    pub configs: Arc<[Arc<Config>]>,
    /// The cluster-wide profile configs, sorted by name (empty for the cluster namespace
    /// itself, whose configs are in `configs`).
    pub cluster: Arc<[Arc<Config>]>,
    /// The namespace's NsightCloudStorageConfigs (what injected agents mount).
    pub storage: Arc<StorageSecrets>,
    /// The cluster namespace (single-tenant: the release's) and its storage configs, used when
    /// the Pod's namespace has none (`None` for the cluster namespace itself).
    pub cluster_storage: Option<(String, Arc<StorageSecrets>)>,
    /// The namespace's OTLPProxyConfigs, sorted by name.
    pub otlp_proxies: Arc<[OtlpProxy]>,
}

impl View {
    /// The namespace has profile configs of its own (someone asked for profiling there).
    pub fn namespace_configured(&self) -> bool {
        !self.configs.is_empty()
    }
}

/// What the webhook knows about the cluster.
pub trait World: Send + Sync {
    /// The namespace's labels and the configs that apply to its Pods. Cheap: reference counts.
    fn view(&self, namespace: &str) -> View;
}

/// The index the request path reads: immutable, replaced as a whole by the watchers.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    namespaces: Arc<HashMap<String, Arc<Labels>>>,
    configs: Arc<ConfigIndex>,
    storage: Arc<HashMap<String, Arc<StorageSecrets>>>,
    otlp_proxies: Arc<HashMap<String, Arc<[OtlpProxy]>>>,
}

#[derive(Debug, Default)]
struct ConfigIndex {
    by_namespace: HashMap<String, Arc<[Arc<Config>]>>,
    cluster_namespace: Option<String>,
    cluster: Arc<[Arc<Config>]>,
}

impl ConfigIndex {
    fn build(
        configs: impl IntoIterator<Item = Arc<Config>>,
        cluster_namespace: Option<&str>,
    ) -> Self {
        let mut by_namespace: HashMap<String, Vec<Arc<Config>>> = HashMap::new();
        for config in configs {
            let namespace = config.metadata.namespace.clone().unwrap_or_default();
            by_namespace.entry(namespace).or_default().push(config);
        }
        let by_namespace: HashMap<String, Arc<[Arc<Config>]>> = by_namespace
            .into_iter()
            .map(|(ns, mut list)| {
                list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
                (ns, list.into())
            })
            .collect();
        let cluster = cluster_namespace
            .and_then(|ns| by_namespace.get(ns).cloned())
            .unwrap_or_else(|| Arc::from(Vec::new()));
        Self {
            by_namespace,
            cluster_namespace: cluster_namespace.map(str::to_owned),
            cluster,
        }
    }
}

impl Snapshot {
    /// An index of `namespaces` (name -> labels) and `configs` (each with its
    /// `metadata.namespace`); the configs of `cluster_namespace` apply everywhere.
    pub fn build(
        namespaces: impl IntoIterator<Item = (String, Labels)>,
        configs: impl IntoIterator<Item = Arc<Config>>,
        cluster_namespace: Option<&str>,
    ) -> Self {
        Self {
            namespaces: Arc::new(index_namespaces(namespaces)),
            configs: Arc::new(ConfigIndex::build(configs, cluster_namespace)),
            storage: Arc::new(HashMap::new()),
            otlp_proxies: Arc::new(HashMap::new()),
        }
    }

    /// The same snapshot with `proxies` (each with its `metadata.namespace`) indexed.
    pub fn with_otlp_proxies(
        mut self,
        proxies: impl IntoIterator<Item = impl AsRef<OTLPProxyConfig>>,
    ) -> Self {
        self.otlp_proxies = Arc::new(index_otlp_proxies(proxies));
        self
    }

    /// The same snapshot with `storage` (each config with its `metadata.namespace`) indexed.
    pub fn with_storage(
        mut self,
        storage: impl IntoIterator<Item = impl AsRef<NsightCloudStorageConfig>>,
    ) -> Self {
        self.storage = Arc::new(index_storage(storage));
        self
    }

    /// The view of `namespace` (see [`World::view`]).
    pub fn view(&self, namespace: &str) -> View {
        let labels = self.namespaces.get(namespace).cloned().unwrap_or_default();
        let configs = self
            .configs
            .by_namespace
            .get(namespace)
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()));
        let own = self.configs.cluster_namespace.as_deref() == Some(namespace);
        let cluster = if own {
            Arc::from(Vec::new())
        } else {
            self.configs.cluster.clone()
        };
        let cluster_storage = self
            .configs
            .cluster_namespace
            .as_deref()
            .filter(|_| !own)
            .map(|ns| {
                (
                    ns.to_owned(),
                    self.storage.get(ns).cloned().unwrap_or_default(),
                )
            });
        View {
            labels,
            configs,
            cluster,
            storage: self.storage.get(namespace).cloned().unwrap_or_default(),
            cluster_storage,
            otlp_proxies: self
                .otlp_proxies
                .get(namespace)
                .cloned()
                .unwrap_or_else(|| Arc::from(Vec::new())),
        }
    }
}

fn index_storage(
    storage: impl IntoIterator<Item = impl AsRef<NsightCloudStorageConfig>>,
) -> HashMap<String, Arc<StorageSecrets>> {
    let mut by_namespace: HashMap<String, StorageSecrets> = HashMap::new();
    for cr in storage {
        let cr = cr.as_ref();
        let (Some(ns), Some(name)) = (cr.metadata.namespace.clone(), cr.metadata.name.clone())
        else {
            continue;
        };
        by_namespace
            .entry(ns)
            .or_default()
            .insert(name, PodStorage::of(cr));
    }
    by_namespace
        .into_iter()
        .map(|(ns, m)| (ns, Arc::new(m)))
        .collect()
}

fn index_otlp_proxies(
    proxies: impl IntoIterator<Item = impl AsRef<OTLPProxyConfig>>,
) -> HashMap<String, Arc<[OtlpProxy]>> {
    let mut by_namespace: HashMap<String, Vec<OtlpProxy>> = HashMap::new();
    for cr in proxies {
        let cr = cr.as_ref();
        if let (Some(ns), Some(_)) = (&cr.metadata.namespace, &cr.metadata.name) {
            by_namespace
                .entry(ns.clone())
                .or_default()
                .push(OtlpProxy::of(cr));
        }
    }
    by_namespace
        .into_iter()
        .map(|(ns, mut list)| {
            list.sort_by(|a, b| a.name.cmp(&b.name));
            (ns, list.into())
        })
        .collect()
}

fn index_namespaces(
    namespaces: impl IntoIterator<Item = (String, Labels)>,
) -> HashMap<String, Arc<Labels>> {
    namespaces
        .into_iter()
        .map(|(name, labels)| (name, Arc::new(labels)))
        .collect()
}

/// A fixed world, for tests and for running without the API server (`nsight-operator webhook
/// --world FILE` reads one from JSON: `{"namespaces": {"ns": {"label": "value"}}, "configs":
/// [NsightOperatorProfileConfig, ...], "clusterNamespace": "nsight-operator"}`, each config
/// with its `metadata.namespace`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(from = "WorldFile")]
pub struct StaticWorld(pub Snapshot);

/// The JSON form of a [`StaticWorld`].
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct WorldFile {
    pub namespaces: BTreeMap<String, Labels>,
    pub configs: Vec<Config>,
    pub cluster_namespace: Option<String>,
    /// NsightCloudStorageConfigs, each with its `metadata.namespace`.
    pub storage_configs: Vec<NsightCloudStorageConfig>,
    /// OTLPProxyConfigs, each with its `metadata.namespace`.
    pub otlp_proxy_configs: Vec<OTLPProxyConfig>,
}

impl From<WorldFile> for StaticWorld {
    fn from(file: WorldFile) -> Self {
        Self(
            Snapshot::build(
                file.namespaces,
                file.configs.into_iter().map(Arc::new),
                file.cluster_namespace.as_deref(),
            )
            .with_storage(file.storage_configs.into_iter().map(Arc::new))
            .with_otlp_proxies(file.otlp_proxy_configs.into_iter().map(Arc::new)),
        )
    }
}

impl World for StaticWorld {
    fn view(&self, namespace: &str) -> View {
        self.0.view(namespace)
    }
}

/// The world kept current from the API server by four reflectors (see the module docs).
#[derive(Clone)]
pub struct KubeWorld {
    shared: Arc<Shared>,
}

struct Shared {
    snapshot: RwLock<Arc<Snapshot>>,
    cluster_namespace: Option<String>,
    configs: Store<Config>,
    namespaces: Store<PartialObjectMeta<Namespace>>,
    storage: Store<NsightCloudStorageConfig>,
    otlp_proxies: Store<OTLPProxyConfig>,
    configs_synced: AtomicBool,
    namespaces_synced: AtomicBool,
    storage_synced: AtomicBool,
    otlp_proxies_synced: AtomicBool,
}

impl std::fmt::Debug for KubeWorld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeWorld")
            .field("cluster_namespace", &self.shared.cluster_namespace)
            .field("synced", &self.synced())
            .finish_non_exhaustive()
    }
}

impl World for KubeWorld {
    fn view(&self, namespace: &str) -> View {
        self.snapshot().view(namespace)
    }
}

impl KubeWorld {
    /// The world and the future that keeps it current (run it on the runtime; it ends only
    /// if both watch streams end, which they do not: errors are retried with backoff).
    pub fn start(
        client: Client,
        cluster_namespace: Option<String>,
    ) -> (Self, impl std::future::Future<Output = ()> + Send + 'static) {
        let (configs, configs_writer) = reflector::store::<Config>();
        let (namespaces, namespaces_writer) = reflector::store::<PartialObjectMeta<Namespace>>();
        let (storage, storage_writer) = reflector::store::<NsightCloudStorageConfig>();
        let (otlp_proxies, otlp_proxies_writer) = reflector::store::<OTLPProxyConfig>();
        let world = Self {
            shared: Arc::new(Shared {
                snapshot: RwLock::new(Arc::new(Snapshot::default())),
                cluster_namespace,
                configs,
                namespaces,
                storage,
                otlp_proxies,
                configs_synced: AtomicBool::new(false),
                namespaces_synced: AtomicBool::new(false),
                storage_synced: AtomicBool::new(false),
                otlp_proxies_synced: AtomicBool::new(false),
            }),
        };
        let config_events = watcher(
            Api::<Config>::all(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .modify(|c: &mut Config| {
            c.managed_fields_mut().clear();
            c.annotations_mut().clear();
            c.status = None;
        })
        .reflect(configs_writer);
        let storage_events = watcher(
            Api::<NsightCloudStorageConfig>::all(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .modify(|c: &mut NsightCloudStorageConfig| {
            c.managed_fields_mut().clear();
            c.annotations_mut().clear();
            c.status = None;
        })
        .reflect(storage_writer);
        let otlp_proxy_events = watcher(
            Api::<OTLPProxyConfig>::all(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .modify(|c: &mut OTLPProxyConfig| {
            c.managed_fields_mut().clear();
            c.annotations_mut().clear();
            c.status = None;
        })
        .reflect(otlp_proxies_writer);
        let namespace_events = watcher(
            Api::<PartialObjectMeta<Namespace>>::all(client),
            watcher::Config::default(),
        )
        .default_backoff()
        .modify(|n: &mut PartialObjectMeta<Namespace>| {
            n.managed_fields_mut().clear();
            n.annotations_mut().clear();
        })
        .reflect(namespaces_writer);
        let (a, b, c, d) = (world.clone(), world.clone(), world.clone(), world.clone());
        let run = async move {
            futures::join!(
                follow(config_events, "NsightOperatorProfileConfig", move || a
                    .rebuild_configs()),
                follow(namespace_events, "Namespace", move || b
                    .rebuild_namespaces()),
                follow(storage_events, "NsightCloudStorageConfig", move || c
                    .rebuild_storage()),
                follow(otlp_proxy_events, "OTLPProxyConfig", move || d
                    .rebuild_otlp_proxies()),
            );
        };
        (world, run)
    }

    /// Every initial list is in.
    pub fn synced(&self) -> bool {
        self.shared.configs_synced.load(Ordering::Acquire)
            && self.shared.namespaces_synced.load(Ordering::Acquire)
            && self.shared.storage_synced.load(Ordering::Acquire)
            && self.shared.otlp_proxies_synced.load(Ordering::Acquire)
    }

    /// The current index.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.shared
            .snapshot
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn replace(&self, f: impl FnOnce(&Snapshot) -> Snapshot) {
        let mut guard = self
            .shared
            .snapshot
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let next = f(&guard);
        *guard = Arc::new(next);
    }

    fn rebuild_configs(&self) {
        let index = Arc::new(ConfigIndex::build(
            self.shared.configs.state(),
            self.shared.cluster_namespace.as_deref(),
        ));
        self.replace(|old| Snapshot {
            configs: index,
            ..old.clone()
        });
        self.shared.configs_synced.store(true, Ordering::Release);
    }

    fn rebuild_namespaces(&self) {
        let namespaces =
            Arc::new(index_namespaces(self.shared.namespaces.state().iter().map(
                |n| (n.name_any(), n.metadata.labels.clone().unwrap_or_default()),
            )));
        self.replace(|old| Snapshot {
            namespaces,
            ..old.clone()
        });
        self.shared.namespaces_synced.store(true, Ordering::Release);
    }

    fn rebuild_storage(&self) {
        let storage = Arc::new(index_storage(self.shared.storage.state()));
        self.replace(|old| Snapshot {
            storage,
            ..old.clone()
        });
        self.shared.storage_synced.store(true, Ordering::Release);
    }

    fn rebuild_otlp_proxies(&self) {
        let otlp_proxies = Arc::new(index_otlp_proxies(self.shared.otlp_proxies.state()));
        self.replace(|old| Snapshot {
            otlp_proxies,
            ..old.clone()
        });
        self.shared
            .otlp_proxies_synced
            .store(true, Ordering::Release);
    }
}

/// Drives one reflected watch stream; after the initial list and after every change, calls
/// `rebuild`. Watch errors are logged (the stream retries with backoff).
async fn follow<K>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    what: &'static str,
    rebuild: impl Fn(),
) {
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
            Ok(watcher::Event::InitDone) => {
                rebuild();
                tracing::info!(kind = what, "webhook cache synced");
            }
            Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => rebuild(),
            Err(e) => tracing::warn!(kind = what, error = %e, "watch failed; retrying"),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use serde_json::json;

    use super::*;

    fn world() -> StaticWorld {
        serde_json::from_value(json!({
            "namespaces": {"team": {"tier": "gpu"}},
            "clusterNamespace": "nsight-operator",
            "configs": [
                {"metadata": {"name": "b", "namespace": "team"}, "spec": {}},
                {"metadata": {"name": "a", "namespace": "team"}, "spec": {}},
                {"metadata": {"name": "global", "namespace": "nsight-operator"}, "spec": {}}
            ]
        }))
        .unwrap()
    }

    fn names(list: &[Arc<Config>]) -> Vec<&str> {
        list.iter()
            .map(|c| c.metadata.name.as_deref().unwrap())
            .collect()
    }

    #[test]
    fn a_view_has_the_namespace_configs_sorted_then_the_cluster_ones() {
        let view = world().view("team");
        assert_eq!(view.labels.get("tier").map(String::as_str), Some("gpu"));
        assert_eq!(names(&view.configs), ["a", "b"]);
        assert_eq!(names(&view.cluster), ["global"]);
        assert!(view.namespace_configured());
    }

    #[test]
    fn the_cluster_namespace_does_not_see_its_configs_twice() {
        let view = world().view("nsight-operator");
        assert_eq!(names(&view.configs), ["global"]);
        assert!(view.cluster.is_empty());
    }

    #[test]
    fn an_unknown_namespace_has_only_the_cluster_rules() {
        let view = world().view("elsewhere");
        assert!(view.labels.is_empty() && !view.namespace_configured());
        assert_eq!(names(&view.cluster), ["global"]);
    }

    #[test]
    fn a_world_file_with_an_unknown_field_is_refused() {
        let err = serde_json::from_value::<StaticWorld>(json!({"config": []})).unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
    }
}
