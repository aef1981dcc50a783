//! State-of-the-world ADS: every response carries all resources of a type the client
//! subscribed to (all of them for a wildcard), and removal is omission.
//!
//! Per type: the subscription (wildcard or names), the last response sent (version, nonce) and
//! whether Envoy has answered it. A request whose nonce is not the last one sent is stale and
//! ignored (as go-control-plane does). A NACK is recorded and not answered with the same
//! version again; the next snapshot is sent as soon as it exists.

use std::collections::{BTreeMap, BTreeSet};

use xds_api::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};

use super::{kind_of, node_of, Event, ProtocolError, Step};
use crate::{cache::Snapshot, resources::ResourceType};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subscription {
    Wildcard,
    Names(BTreeSet<String>),
}

impl Subscription {
    fn contains(&self, name: &str) -> bool {
        match self {
            Self::Wildcard => true,
            Self::Names(names) => names.contains(name),
        }
    }
}

#[derive(Debug)]
struct TypeState {
    subscription: Subscription,
    /// Version and nonce of the last response sent.
    sent: Option<(String, String)>,
    /// Envoy has answered the last response (or none was sent yet) and waits for a new one.
    waiting: bool,
}

/// One SotW ADS stream.
#[derive(Debug, Default)]
pub struct SotwStream {
    node: Option<String>,
    types: BTreeMap<ResourceType, TypeState>,
    nonce: u64,
}

impl SotwStream {
    pub fn new() -> Self {
        Self::default()
    }

    /// The node id, known after the first request.
    pub fn node(&self) -> Option<&str> {
        self.node.as_deref()
    }

    /// Handles one request against the node's current snapshot (`None`: not set yet).
    pub fn on_request(
        &mut self,
        req: &DiscoveryRequest,
        snapshot: Option<&Snapshot>,
    ) -> Result<Step<DiscoveryResponse>, ProtocolError> {
        node_of(&mut self.node, req.node.as_ref())?;
        let kind = kind_of(&req.type_url)?;
        let mut step = Step::default();
        let names: BTreeSet<String> = req.resource_names.iter().cloned().collect();
        let subscription =
            if names.contains("*") || (names.is_empty() && kind.wildcard_by_default()) {
                Subscription::Wildcard
            } else {
                Subscription::Names(names)
            };
        let state = self.types.entry(kind).or_insert_with(|| TypeState {
            subscription: subscription.clone(),
            sent: None,
            waiting: true,
        });
        if !req.response_nonce.is_empty() {
            let Some((version, nonce)) = &state.sent else {
                return Ok(step); // a nonce we never sent: from a previous stream; ignore
            };
            if *nonce != req.response_nonce {
                return Ok(step); // stale: Envoy answers an older response
            }
            step.events.push(match &req.error_detail {
                Some(status) => Event::Nack {
                    kind,
                    version: version.clone(),
                    code: status.code,
                    message: status.message.clone(),
                },
                None => Event::Ack {
                    kind,
                    version: version.clone(),
                },
            });
            state.waiting = true;
        }
        let changed = state.subscription != subscription;
        state.subscription = subscription;
        if let Some(snapshot) = snapshot {
            let fresh = state
                .sent
                .as_ref()
                .is_none_or(|(v, _)| v != snapshot.type_version(kind));
            if state.waiting && (fresh || changed) {
                let response = self.respond(kind, snapshot);
                step.responses.push(response);
            }
        }
        Ok(step)
    }

    /// A new snapshot: the responses for every type whose client waits and whose version moved,
    /// in push order (clusters and secrets before listeners and routes).
    pub fn on_snapshot(&mut self, snapshot: &Snapshot) -> Vec<DiscoveryResponse> {
        let due: Vec<ResourceType> = self
            .types
            .iter()
            .filter(|(kind, s)| {
                s.waiting
                    && s.sent
                        .as_ref()
                        .is_none_or(|(v, _)| v != snapshot.type_version(**kind))
            })
            .map(|(kind, _)| *kind)
            .collect();
        due.into_iter().map(|k| self.respond(k, snapshot)).collect()
    }

    fn respond(&mut self, kind: ResourceType, snapshot: &Snapshot) -> DiscoveryResponse {
        self.nonce += 1;
        let nonce = self.nonce.to_string();
        let version = snapshot.type_version(kind).to_string();
        let mut resources = Vec::new();
        if let Some(state) = self.types.get_mut(&kind) {
            resources = snapshot
                .resources(kind)
                .filter(|r| state.subscription.contains(&r.name))
                .map(|r| r.body.clone())
                .collect();
            state.sent = Some((version.clone(), nonce.clone()));
            state.waiting = false;
        }
        DiscoveryResponse {
            version_info: version,
            resources,
            type_url: kind.type_url().into(),
            nonce,
            ..Default::default()
        }
    }
}
