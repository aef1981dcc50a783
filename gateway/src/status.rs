//! What Envoy told us: per node and type, the last version it accepted (ACK) and the last
//! update it rejected (NACK) with Envoy's own error message, plus connected stream counts.
//!
//! Owns the bookkeeping and its views (a JSON document a REST layer can serve, Prometheus text);
//! the protocol machines report into it, nothing here does I/O. A NACK stays listed (marked
//! `resolved`) until a later version of the same type is accepted, so an operator can see both
//! "currently broken" and "was broken, fixed by version X".

use std::{
    collections::BTreeMap,
    sync::Mutex,
    time::{SystemTime, UNIX_EPOCH},
};

use serde::Serialize;

use crate::resources::ResourceType;

/// One rejected update, with Envoy's explanation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NackRecord {
    pub node: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The version Envoy rejected (it keeps serving the one before).
    pub rejected_version: String,
    /// Envoy's `error_detail.message`.
    pub message: String,
    /// Envoy's `error_detail.code` (a gRPC status code).
    pub code: i32,
    pub at_unix_ms: u64,
    /// A later version of this type was accepted since.
    pub resolved: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// The snapshot this node is served (`cache::node_id::snapshot_key`): its own id, or for
    /// an OTLP sidecar its OTLPProxyConfig's.
    pub serves: String,
    /// Open ADS streams of this node.
    pub streams: u32,
    /// Last accepted version per type.
    pub acked: BTreeMap<&'static str, String>,
    /// Last rejection per type.
    pub nacks: BTreeMap<&'static str, NackRecord>,
}

/// Shared by all streams of a server. Counters are totals since start.
#[derive(Debug, Default)]
pub struct StatusBoard {
    inner: Mutex<Board>,
}

#[derive(Debug, Default)]
struct Board {
    nodes: BTreeMap<String, NodeStatus>,
    acks_total: BTreeMap<&'static str, u64>,
    nacks_total: BTreeMap<&'static str, u64>,
    pushes_total: BTreeMap<&'static str, u64>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

impl StatusBoard {
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut Board) -> T) -> T {
        let mut board = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut board)
    }

    /// A stream of `node`, served the snapshot `serves`, opened.
    pub fn stream_opened(&self, node: &str, serves: &str) {
        self.with(|b| {
            let n = b.nodes.entry(node.into()).or_default();
            n.streams += 1;
            serves.clone_into(&mut n.serves);
        });
    }

    /// A stream of `node` closed. A node served a snapshot that is not its own (an OTLP
    /// sidecar: one per Pod, and Pods come and go) is forgotten with its last stream, so the
    /// board does not grow with every Pod that ever ran.
    pub fn stream_closed(&self, node: &str) {
        self.with(|b| {
            let Some(n) = b.nodes.get_mut(node) else {
                return;
            };
            n.streams = n.streams.saturating_sub(1);
            if n.streams == 0 && n.serves != node {
                b.nodes.remove(node);
            }
        });
    }

    /// The connected nodes served the snapshot `key`, by node id.
    pub fn serving(&self, key: &str) -> BTreeMap<String, NodeStatus> {
        self.with(|b| {
            b.nodes
                .iter()
                .filter(|(_, n)| n.serves == key && n.streams > 0)
                .map(|(id, n)| (id.clone(), n.clone()))
                .collect()
        })
    }

    pub fn pushed(&self, kind: ResourceType) {
        self.with(|b| *b.pushes_total.entry(kind.label()).or_default() += 1);
    }

    pub fn ack(&self, node: &str, kind: ResourceType, version: &str) {
        self.with(|b| {
            *b.acks_total.entry(kind.label()).or_default() += 1;
            let n = b.nodes.entry(node.into()).or_default();
            n.acked.insert(kind.label(), version.into());
            if let Some(nack) = n.nacks.get_mut(kind.label()) {
                if nack.rejected_version != version {
                    nack.resolved = true;
                }
            }
        });
    }

    pub fn nack(&self, node: &str, kind: ResourceType, version: &str, code: i32, message: &str) {
        tracing::warn!(
            node,
            kind = kind.label(),
            version,
            message,
            "Envoy rejected an update"
        );
        self.with(|b| {
            *b.nacks_total.entry(kind.label()).or_default() += 1;
            b.nodes.entry(node.into()).or_default().nacks.insert(
                kind.label(),
                NackRecord {
                    node: node.into(),
                    kind: kind.label(),
                    rejected_version: version.into(),
                    message: message.into(),
                    code,
                    at_unix_ms: now_ms(),
                    resolved: false,
                },
            );
        });
    }

    /// Every recorded NACK (resolved or not), by node then type.
    pub fn nacks(&self) -> Vec<NackRecord> {
        self.with(|b| {
            b.nodes
                .values()
                .flat_map(|n| n.nacks.values().cloned())
                .collect()
        })
    }

    /// Drops what is recorded about `node` (the totals stay). Returns whether it was known.
    pub fn forget(&self, node: &str) -> bool {
        self.with(|b| b.nodes.remove(node).is_some())
    }

    pub fn node(&self, node: &str) -> Option<NodeStatus> {
        self.with(|b| b.nodes.get(node).cloned())
    }

    /// `{"nodes": {"<id>": {streams, acked, nacks}}}`, for a REST endpoint.
    pub fn to_json(&self) -> serde_json::Value {
        self.with(|b| serde_json::json!({ "nodes": b.nodes }))
    }

    /// Prometheus text: ACK, NACK and push counters per type, open streams, unresolved NACKs.
    pub fn metrics_text(&self) -> String {
        self.with(|b| {
            let mut out = String::new();
            for (metric, help, counts) in [
                ("nsight_gateway_xds_acks_total", "Updates Envoy accepted.", &b.acks_total),
                ("nsight_gateway_xds_nacks_total", "Updates Envoy rejected.", &b.nacks_total),
                ("nsight_gateway_xds_pushes_total", "Responses sent.", &b.pushes_total),
            ] {
                out.push_str(&format!("# HELP {metric} {help}\n# TYPE {metric} counter\n"));
                for (kind, n) in counts {
                    out.push_str(&format!("{metric}{{type=\"{kind}\"}} {n}\n"));
                }
            }
            let streams: u32 = b.nodes.values().map(|n| n.streams).sum();
            let open_nacks = b
                .nodes
                .values()
                .flat_map(|n| n.nacks.values())
                .filter(|n| !n.resolved)
                .count();
            out.push_str(&format!(
                "# HELP nsight_gateway_xds_streams Open ADS streams.\n# TYPE nsight_gateway_xds_streams gauge\nnsight_gateway_xds_streams {streams}\n"
            ));
            out.push_str(&format!(
                "# HELP nsight_gateway_xds_unresolved_nacks Rejections not yet followed by an accepted version.\n# TYPE nsight_gateway_xds_unresolved_nacks gauge\nnsight_gateway_xds_unresolved_nacks {open_nacks}\n"
            ));
            out
        })
    }
}
