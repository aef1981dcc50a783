//! Forgetting the snapshots of custom resources that are gone: every [`SWEEP_EVERY`], a snapshot
//! key under a kind's prefix whose resource is not in the controller's store is removed from
//! the ADS server (its streams end; Envoy keeps its last configuration).
//!
//! A key has a snapshot only after its resource was reconciled, i.e. was in the store, and a
//! re-list swaps the store's contents at once, so a snapshot whose resource is not in the store
//! is a deleted resource's (no need to wait for the first list). A key without a snapshot that
//! some Envoy is still served (a gateway not reconciled yet, a sidecar of a config that does not
//! exist) is left alone: it holds nothing, and ending its streams would only make them
//! reconnect.

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use kube::{runtime::reflector::Store, Resource, ResourceExt};

use super::controller::XdsContext;

/// How often published snapshots are checked against the resources that exist.
pub const SWEEP_EVERY: Duration = Duration::from_secs(2);

/// The keys among `nodes` under `prefix` that are not in `live`. Pure.
pub fn stale<'a>(nodes: &'a [String], live: &BTreeSet<String>, prefix: &str) -> Vec<&'a str> {
    nodes
        .iter()
        .filter(|n| n.starts_with(prefix) && !live.contains(*n))
        .map(String::as_str)
        .collect()
}

/// One kind's snapshots: how a resource names its key, and the prefix of the kind's keys in
/// the watched namespace (or all).
#[derive(Debug)]
pub struct Swept {
    pub key_of: fn(namespace: &str, name: &str) -> String,
    pub prefix: String,
    /// For the log line ("NsightGateway").
    pub kind: &'static str,
}

/// Runs until the task is aborted.
pub async fn run<K>(ctx: Arc<XdsContext>, store: Store<K>, swept: Swept)
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let mut tick = tokio::time::interval(SWEEP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let live: BTreeSet<String> = store
            .state()
            .iter()
            .map(|r| (swept.key_of)(&r.namespace().unwrap_or_default(), &r.name_any()))
            .collect();
        let nodes = ctx.xds.nodes();
        for key in stale(&nodes, &live, &swept.prefix) {
            let has_snapshot = ctx.xds.snapshot(key).is_some();
            let served = !ctx.xds.nodes_serving(key).is_empty();
            if (has_snapshot || !served) && ctx.xds.remove_node(key) {
                tracing::info!(%key, kind = swept.kind, "deleted: its xDS snapshot is removed");
            }
        }
    }
}
