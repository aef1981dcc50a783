//! The shell that feeds OTLP proxy sidecars: a kube-runtime `Controller` over OTLPProxyConfig
//! publishing, per config, the sidecar IR every mirroring Pod injected with it is served.
//!
//! ```text
//! OTLPProxyConfig ─> ports + collector (render::otlp_proxy, pure) ─> otlp_sidecar::ir
//!   ─> XdsHandle::set_ir(nsight-otlp-proxy/<ns>/<name>)   (the sidecars' snapshot key)
//!   ─> status XdsConfigured: published, sidecars connected and up to date, or a sidecar's NACK
//! deleted ─> the sweep (`super::sweep`) removes the snapshot; running sidecars keep their last
//!            configuration
//! ```
//! Each sidecar is its own node (`nsight-otlp-sidecar/<ns>/<pod>`), so what one Pod's Envoy
//! rejected is named on the config's status with the Pod.

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use futures::StreamExt;
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{
    api::{Patch, PatchParams},
    runtime::{controller::Action, watcher, Controller},
    Api, Resource, ResourceExt,
};
use nsight_api::{NsightStatus, OTLPProxyConfig};
use nsight_gateway::{cache::node_id, otlp_sidecar, status::NodeStatus};
use serde_json::json;

use super::{
    controller::{XdsContext, CONDITION_XDS, STATUS_MANAGER},
    sweep,
};
use crate::{
    conditions::{self, Cond},
    render::otlp_proxy,
};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot update the status of OTLPProxyConfig {0}")]
    Status(String, #[source] kube::Error),
}

/// What the connected sidecars of one config say (pure input of [`condition`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sidecars {
    pub connected: usize,
    /// Of those, how many accepted the current snapshot.
    pub up_to_date: usize,
    /// The first sidecar still rejecting something: (node, type, Envoy's message).
    pub rejecting: Option<(String, String, String)>,
}

impl Sidecars {
    /// From the server's view of the nodes served `key`, and whether each is in sync.
    pub fn of(
        nodes: &std::collections::BTreeMap<String, NodeStatus>,
        in_sync: impl Fn(&str) -> bool,
    ) -> Self {
        let rejecting = nodes.iter().find_map(|(node, status)| {
            status
                .nacks
                .iter()
                .find(|(_, n)| !n.resolved)
                .map(|(kind, n)| (node.clone(), (*kind).to_owned(), n.message.clone()))
        });
        Self {
            connected: nodes.len(),
            up_to_date: nodes.keys().filter(|n| in_sync(n)).count(),
            rejecting,
        }
    }
}

/// `XdsConfigured` of an OTLPProxyConfig (pure).
pub fn condition(published: Result<u64, String>, had_snapshot: bool, sidecars: &Sidecars) -> Cond {
    match (published, &sidecars.rejecting) {
        (Ok(_), Some((node, kind, message))) => Cond {
            type_: CONDITION_XDS,
            status: false,
            reason: "Rejected",
            message: format!(
                "the sidecar {node} rejected the {kind} configuration and keeps forwarding as \
                 before: {message}"
            ),
        },
        (Ok(version), None) => Cond {
            type_: CONDITION_XDS,
            status: true,
            reason: "Published",
            message: format!(
                "snapshot {version} published; {} sidecar(s) connected, {} up to date",
                sidecars.connected, sidecars.up_to_date
            ),
        },
        (Err(why), _) if had_snapshot => Cond {
            type_: CONDITION_XDS,
            status: false,
            reason: "LastGoodConfigKept",
            message: format!(
                "not reconfigured ({why}); running sidecars keep the last configuration"
            ),
        },
        (Err(why), _) => Cond {
            type_: CONDITION_XDS,
            status: false,
            reason: "NotConfigured",
            message: format!(
                "nothing published ({why}); mirroring Pods get no sidecar until this is fixed"
            ),
        },
    }
}

/// The sidecar IR of `cr`, or why there is none (pure).
pub fn desired(cr: &OTLPProxyConfig) -> Result<nsight_gateway::ir::GatewayIr, String> {
    let ports = otlp_proxy::ports(cr).map_err(|e| e.to_string())?;
    let collector = otlp_proxy::collector(cr).ok_or_else(|| {
        "spec.collectorRef is not set: the sidecars have no collector to forward to".to_owned()
    })?;
    Ok(otlp_sidecar::ir(ports, &collector))
}

async fn reconcile(cr: Arc<OTLPProxyConfig>, ctx: Arc<XdsContext>) -> Result<Action, Error> {
    let namespace = cr.namespace().unwrap_or_default();
    let name = cr.name_any();
    let key = node_id::otlp_proxy(&namespace, &name);
    let had_snapshot = ctx.xds.snapshot(&key).is_some();
    let published =
        desired(&cr).and_then(|ir| ctx.xds.set_ir(&key, &ir).map_err(|e| e.to_string()));
    if let Err(why) = &published {
        tracing::info!(config = %key, reason = %why, "OTLP sidecars not reconfigured");
    }
    let sidecars = Sidecars::of(&ctx.xds.nodes_serving(&key), |n| ctx.xds.in_sync(n));
    let cond = condition(published, had_snapshot, &sidecars);
    let previous = cr.status.as_ref().map_or(&[][..], |s| &s.conditions[..]);
    let merged = conditions::merge(
        previous,
        &[cond],
        cr.meta().generation,
        &Time(Timestamp::now()),
    );
    if merged != previous {
        let body = json!({
            "apiVersion": OTLPProxyConfig::api_version(&()),
            "kind": OTLPProxyConfig::kind(&()),
            "status": NsightStatus { conditions: merged, observed_generation: None },
        });
        Api::<OTLPProxyConfig>::namespaced(ctx.client.clone(), &namespace)
            .patch_status(
                &name,
                &PatchParams::apply(STATUS_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
            .map_err(|e| Error::Status(key.clone(), e))?;
    }
    // Sidecars come and go with their Pods (nothing triggers a reconcile when one connects):
    // look again every 10 s (an in-memory check; the status is written only when it changes),
    // and soon while one is catching up.
    Ok(Action::requeue(
        if sidecars.up_to_date < sidecars.connected {
            Duration::from_secs(2)
        } else {
            Duration::from_secs(10)
        },
    ))
}

fn error_policy(_cr: Arc<OTLPProxyConfig>, error: &Error, _ctx: Arc<XdsContext>) -> Action {
    tracing::warn!(error = %error, source = ?std::error::Error::source(error), "OTLP sidecar reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// The prefix of the config keys of the watched `namespace`, or of all.
fn key_prefix(namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => node_id::otlp_proxy(ns, ""),
        None => node_id::OTLP_PROXY_PREFIX.to_owned(),
    }
}

/// The snapshot keys among `nodes` (of the watched `namespace`, or all) whose OTLPProxyConfig
/// is not in `live`. Pure.
pub fn stale_keys<'a>(
    nodes: &'a [String],
    live: &BTreeSet<String>,
    namespace: Option<&str>,
) -> Vec<&'a str> {
    sweep::stale(nodes, live, &key_prefix(namespace))
}

/// Runs until the watch ends (never, in practice).
pub async fn run(ctx: Arc<XdsContext>, namespace: Option<String>) {
    let api: Api<OTLPProxyConfig> = match &namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    let controller = Controller::new(api, watcher::Config::default());
    let sweeper = tokio::spawn(sweep::run(
        ctx.clone(),
        controller.store(),
        sweep::Swept {
            key_of: node_id::otlp_proxy,
            prefix: key_prefix(namespace.as_deref()),
            kind: "OTLPProxyConfig",
        },
    ));
    controller
        .run(reconcile, error_policy, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
    sweeper.abort();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use std::collections::BTreeMap;

    use nsight_api::OTLPProxyConfigSpec;
    use nsight_gateway::status::NackRecord;

    use super::*;

    fn config(collector: Option<&str>, port: Option<u16>) -> OTLPProxyConfig {
        let mut cr = OTLPProxyConfig::new(
            "mirror",
            OTLPProxyConfigSpec {
                collector_ref: collector.map(Into::into),
                port,
                resources: None,
            },
        );
        cr.metadata.namespace = Some("team-a".into());
        cr
    }

    #[test]
    fn a_config_with_a_collector_becomes_the_sidecar_ir_and_without_one_says_why() {
        let ir = desired(&config(Some("otel"), Some(4320))).unwrap();
        assert_eq!(ir.listeners[0].port, 4320);
        assert_eq!(ir.upstreams[0].endpoints[0].host, "otel.team-a.svc");
        assert!(ir.upstreams[1].http2);
        assert!(desired(&config(None, None))
            .unwrap_err()
            .contains("spec.collectorRef"));
        assert!(desired(&config(Some("otel"), Some(4317)))
            .unwrap_err()
            .contains("OTLP/gRPC port"));
    }

    fn node(nack: Option<(&str, bool)>) -> NodeStatus {
        let mut n = NodeStatus {
            streams: 1,
            ..NodeStatus::default()
        };
        if let Some((message, resolved)) = nack {
            n.nacks.insert(
                "listener",
                NackRecord {
                    node: "x".into(),
                    kind: "listener",
                    rejected_version: "2".into(),
                    message: message.into(),
                    code: 3,
                    at_unix_ms: 0,
                    resolved,
                },
            );
        }
        n
    }

    #[test]
    fn the_condition_counts_sidecars_and_names_the_pod_that_rejects() {
        let nodes = BTreeMap::from([
            ("nsight-otlp-sidecar/team-a/p1".to_owned(), node(None)),
            (
                "nsight-otlp-sidecar/team-a/p2".to_owned(),
                node(Some(("old", true))),
            ),
        ]);
        let s = Sidecars::of(&nodes, |n| n.ends_with("p1"));
        assert_eq!((s.connected, s.up_to_date, &s.rejecting), (2, 1, &None));
        let c = condition(Ok(3), true, &s);
        assert!(c.status && c.reason == "Published");
        assert!(
            c.message.contains("2 sidecar(s) connected, 1 up to date"),
            "{}",
            c.message
        );

        let nodes = BTreeMap::from([(
            "nsight-otlp-sidecar/team-a/p3".to_owned(),
            node(Some(("address already in use", false))),
        )]);
        let c = condition(Ok(4), true, &Sidecars::of(&nodes, |_| false));
        assert!(!c.status && c.reason == "Rejected");
        assert!(
            c.message.contains("p3") && c.message.contains("address already in use"),
            "{}",
            c.message
        );
        let none = Sidecars::default();
        assert_eq!(
            condition(Err("x".into()), true, &none).reason,
            "LastGoodConfigKept"
        );
        assert_eq!(
            condition(Err("x".into()), false, &none).reason,
            "NotConfigured"
        );
    }

    #[test]
    fn stale_keys_are_the_configs_that_are_gone() {
        let nodes: Vec<String> = [
            node_id::otlp_proxy("team-a", "mirror"),
            node_id::otlp_proxy("team-a", "gone"),
            node_id::otlp_proxy("team-ab", "gone"),
            node_id::gateway("team-a", "gw"),
            node_id::otlp_sidecar("team-a", "pod"),
        ]
        .into();
        let live = BTreeSet::from([node_id::otlp_proxy("team-a", "mirror")]);
        assert_eq!(
            stale_keys(&nodes, &live, None),
            [nodes[1].as_str(), nodes[2].as_str()]
        );
        assert_eq!(
            stale_keys(&nodes, &live, Some("team-a")),
            [nodes[1].as_str()]
        );
    }
}
