//! The xDS protocol as state machines free of network I/O (after junction-labs ezbake's
//! sans-IO `AdsConnection`): one value per ADS stream, fed requests and snapshots, answering
//! with the responses to send and the ACK/NACK events to record.
//!
//! ```text
//!   DiscoveryRequest ──on_request──┐            ┌──> responses to send (in push order)
//!                                  ├─ SotwStream ┤
//!   new Snapshot ─────on_snapshot──┘ DeltaStream └──> events: Ack / Nack (Envoy's message)
//! ```
//! At most one response per type is in flight: a new snapshot is sent to a type once Envoy has
//! answered (ACK or NACK) the previous one, which keeps a slow Envoy from being flooded and
//! makes "what did Envoy accept" exact.

pub mod delta;
pub mod sotw;

use crate::resources::ResourceType;

/// Something the shell records (see `status::StatusBoard`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Envoy applied `version` of `kind`.
    Ack { kind: ResourceType, version: String },
    /// Envoy rejected `version` of `kind` and keeps the previous one.
    Nack {
        kind: ResourceType,
        version: String,
        code: i32,
        message: String,
    },
}

/// Errors that end a stream; the message goes back to Envoy as the gRPC status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("the first request of a stream must carry the node id (Envoy's `node.id`)")]
    NoNodeId,
    #[error("type `{0}` is not served by this control plane (it serves clusters, listeners, routes and secrets)")]
    UnknownType(String),
}

/// What one call returns.
#[derive(Debug, Default)]
pub struct Step<R> {
    pub responses: Vec<R>,
    pub events: Vec<Event>,
}

/// Takes the node id from the first request; later requests may omit it.
fn node_of(
    current: &mut Option<String>,
    node: Option<&xds_api::pb::envoy::config::core::v3::Node>,
) -> Result<(), ProtocolError> {
    if current.is_none() {
        match node.map(|n| n.id.as_str()).filter(|id| !id.is_empty()) {
            Some(id) => *current = Some(id.to_string()),
            None => return Err(ProtocolError::NoNodeId),
        }
    }
    Ok(())
}

fn kind_of(type_url: &str) -> Result<ResourceType, ProtocolError> {
    ResourceType::from_type_url(type_url).ok_or_else(|| ProtocolError::UnknownType(type_url.into()))
}
