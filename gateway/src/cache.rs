//! The snapshot cache: per Envoy node, the latest whole, versioned, internally consistent set of
//! resources, and a watch that wakes every stream of that node when it changes.
//!
//! Invariants (as go-control-plane's `Snapshot.Consistent()`): a [`Snapshot`] is built only
//! from resources whose references all resolve (a listener's routes and TLS secret, a route's
//! clusters), so Envoy never receives a listener pointing at something it will not get. A node's
//! snapshot version only grows. Owns no network I/O; the ADS server reads from it.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
};

use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::resources::{Resource, ResourceType, Resources};

/// Node IDs: how an Envoy names itself in its bootstrap, and the key of its snapshot.
pub mod node_id {
    /// The gateway Envoy of NsightGateway `name` in `namespace` (or of the local platform).
    pub fn gateway(namespace: &str, name: &str) -> String {
        format!("nsight-gateway/{namespace}/{name}")
    }

    /// The OTLP-proxy Envoy sidecar injected into `pod` in `namespace`. Each sidecar has its
    /// own node id (its ACKs and NACKs are its own); all the sidecars of one OTLPProxyConfig
    /// share that config's snapshot ([`otlp_proxy`]), named by the sidecar's node cluster.
    pub fn otlp_sidecar(namespace: &str, pod: &str) -> String {
        format!("{OTLP_SIDECAR_PREFIX}{namespace}/{pod}")
    }

    /// Every OTLP sidecar's node id starts so.
    pub const OTLP_SIDECAR_PREFIX: &str = "nsight-otlp-sidecar/";
    /// Every OTLPProxyConfig's snapshot key starts so.
    pub const OTLP_PROXY_PREFIX: &str = "nsight-otlp-proxy/";

    /// The snapshot the sidecars of OTLPProxyConfig `config` in `namespace` are served.
    pub fn otlp_proxy(namespace: &str, config: &str) -> String {
        format!("{OTLP_PROXY_PREFIX}{namespace}/{config}")
    }

    /// The snapshot an Envoy naming itself `id` in node cluster `cluster` is served: an OTLP
    /// sidecar's is its OTLPProxyConfig's (the cluster names the config, the id the namespace);
    /// every other node's is its own. Pure.
    pub fn snapshot_key(id: &str, cluster: &str) -> String {
        let namespace = id
            .strip_prefix(OTLP_SIDECAR_PREFIX)
            .and_then(|rest| rest.split_once('/'))
            .map(|(namespace, _pod)| namespace);
        match namespace {
            Some(namespace) if !namespace.is_empty() && !cluster.is_empty() => {
                otlp_proxy(namespace, cluster)
            }
            _ => id.to_owned(),
        }
    }
}

/// A whole configuration for one node. Invariant: consistent (see the module doc); the version
/// of each type is a digest of that type's resources, so an unchanged type keeps its version.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    version: u64,
    resources: Resources,
    type_versions: BTreeMap<ResourceType, String>,
}

/// Why a set of resources cannot become a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    #[error("{kind} `{name}` refers to {ref_kind} `{missing}`, which is not in the snapshot")]
    DanglingReference {
        kind: &'static str,
        name: String,
        ref_kind: &'static str,
        missing: String,
    },
}

impl Snapshot {
    /// Checks consistency and computes the per-type versions.
    pub fn new(version: u64, mut resources: Resources) -> Result<Self, SnapshotError> {
        for kind in ResourceType::ALL {
            resources.entry(kind).or_default();
        }
        for (kind, by_name) in &resources {
            for r in by_name.values() {
                for (ref_kind, ref_name) in &r.refs {
                    let found = resources
                        .get(ref_kind)
                        .is_some_and(|m| m.contains_key(ref_name));
                    if !found {
                        return Err(SnapshotError::DanglingReference {
                            kind: kind.label(),
                            name: r.name.clone(),
                            ref_kind: ref_kind.label(),
                            missing: ref_name.clone(),
                        });
                    }
                }
            }
        }
        let type_versions = resources
            .iter()
            .map(|(kind, by_name)| {
                let mut h = Sha256::new();
                for r in by_name.values() {
                    h.update(r.name.as_bytes());
                    h.update([0]);
                    h.update(r.version.as_bytes());
                    h.update([0]);
                }
                (*kind, hex::encode(&h.finalize()[..8]))
            })
            .collect();
        Ok(Self {
            version,
            resources,
            type_versions,
        })
    }

    /// The snapshot's sequence number for its node (grows with every change).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The version of one type's resources (a content digest).
    pub fn type_version(&self, kind: ResourceType) -> &str {
        self.type_versions.get(&kind).map_or("", String::as_str)
    }

    pub fn resources(&self, kind: ResourceType) -> impl Iterator<Item = &Resource> {
        self.resources
            .get(&kind)
            .into_iter()
            .flat_map(|m| m.values())
    }

    pub fn get(&self, kind: ResourceType, name: &str) -> Option<&Resource> {
        self.resources.get(&kind).and_then(|m| m.get(name))
    }
}

/// What a stream watches: the node's latest snapshot, `None` until one is set.
pub type SnapshotWatch = watch::Receiver<Option<Arc<Snapshot>>>;

/// Latest snapshot per node. Cheap to share (`Arc` inside the server handle).
#[derive(Debug, Default)]
pub struct SnapshotCache {
    nodes: Mutex<HashMap<String, watch::Sender<Option<Arc<Snapshot>>>>>,
}

impl SnapshotCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces `node`'s resources. Returns the new snapshot version, or the current one when
    /// nothing changed (no stream is woken then).
    pub fn set(&self, node: &str, resources: Resources) -> Result<u64, SnapshotError> {
        let mut nodes = self.lock();
        let sender = nodes
            .entry(node.to_string())
            .or_insert_with(|| watch::channel(None).0);
        let current = sender.borrow().clone();
        let next = current.as_ref().map_or(1, |s| s.version + 1);
        let snapshot = Snapshot::new(next, resources)?;
        if let Some(current) = current {
            if current.type_versions == snapshot.type_versions {
                return Ok(current.version);
            }
        }
        sender.send_replace(Some(Arc::new(snapshot)));
        Ok(next)
    }

    /// The node's current snapshot.
    pub fn get(&self, node: &str) -> Option<Arc<Snapshot>> {
        self.lock().get(node).and_then(|s| s.borrow().clone())
    }

    /// A receiver that sees every later snapshot of `node` (registers the node if new).
    pub fn watch(&self, node: &str) -> SnapshotWatch {
        self.lock()
            .entry(node.to_string())
            .or_insert_with(|| watch::channel(None).0)
            .subscribe()
    }

    /// Forgets `node`: its snapshot is dropped and every stream of it ends (their watch
    /// closes), so nothing stale is served for a node that no longer exists. A node that
    /// connects again later starts empty. Returns whether the node was known.
    pub fn remove(&self, node: &str) -> bool {
        self.lock().remove(node).is_some()
    }

    /// Nodes with a snapshot or a watcher.
    pub fn nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = self.lock().keys().cloned().collect();
        nodes.sort();
        nodes
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<Option<Arc<Snapshot>>>>> {
        // A poisoned lock only means another thread panicked mid-insert; the map is still valid.
        self.nodes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[tokio::test]
    async fn a_removed_node_is_forgotten_and_its_streams_end() {
        let cache = SnapshotCache::new();
        cache.set("gw/a", Resources::default()).unwrap();
        cache.set("gw/b", Resources::default()).unwrap();
        let mut stream = cache.watch("gw/a");
        assert!(stream.borrow().is_some());
        assert!(cache.remove("gw/a"));
        assert!(!cache.remove("gw/a"), "removed twice");
        assert!(cache.get("gw/a").is_none());
        assert_eq!(cache.nodes(), ["gw/b"]);
        // The stream's watch closes: the ADS loop ends that stream.
        assert!(stream.changed().await.is_err());
        // A node that comes back starts empty.
        assert!(cache.watch("gw/a").borrow().is_none());
    }

    #[test]
    fn sidecars_share_their_configs_snapshot_and_other_nodes_keep_their_own() {
        let pod = node_id::otlp_sidecar("team-a", "trainer-7f9c");
        assert_eq!(
            node_id::snapshot_key(&pod, "mirror"),
            node_id::otlp_proxy("team-a", "mirror")
        );
        assert_eq!(
            node_id::snapshot_key(&node_id::otlp_sidecar("team-a", "other"), "mirror"),
            "nsight-otlp-proxy/team-a/mirror"
        );
        // No config named, or no namespace: the node's own id (nothing is served to it).
        assert_eq!(node_id::snapshot_key(&pod, ""), pod);
        assert_eq!(
            node_id::snapshot_key("nsight-otlp-sidecar//p", "mirror"),
            "nsight-otlp-sidecar//p"
        );
        assert_eq!(
            node_id::snapshot_key("nsight-otlp-sidecar/team-a", "mirror"),
            "nsight-otlp-sidecar/team-a"
        );
        let gw = node_id::gateway("team-a", "gw");
        assert_eq!(node_id::snapshot_key(&gw, "nsight-gateway"), gw);
    }
}
