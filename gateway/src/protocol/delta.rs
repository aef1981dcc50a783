//! Incremental (delta) ADS: responses carry only resources whose version the client does not
//! have, and names of resources that went away.
//!
//! Per type: wildcard flag, explicitly subscribed names, what the client has (name -> version,
//! seeded from `initial_resource_versions` on reconnect so an unchanged resource is not sent
//! again) and the nonce of the response in flight. Subscription changes are applied even on a
//! request with a stale nonce (they are deltas and must not be lost). The first request of a
//! type is always answered, even with nothing, so Envoy's initial fetch completes.

use std::collections::{BTreeMap, BTreeSet};

use xds_api::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, Resource as XdsResource,
};

use super::{kind_of, node_of, Event, ProtocolError, Step};
use crate::{cache::Snapshot, resources::ResourceType};

#[derive(Debug, Default)]
struct TypeState {
    wildcard: bool,
    names: BTreeSet<String>,
    /// What the client holds: name -> version (as sent by us or declared on reconnect).
    known: BTreeMap<String, String>,
    /// Nonce and system version of the response in flight.
    in_flight: Option<(String, String)>,
    /// The initial response has not been sent yet.
    initial: bool,
}

impl TypeState {
    fn subscribed(&self, name: &str) -> bool {
        self.wildcard || self.names.contains(name)
    }
}

/// One delta ADS stream.
#[derive(Debug, Default)]
pub struct DeltaStream {
    node: Option<String>,
    types: BTreeMap<ResourceType, TypeState>,
    nonce: u64,
}

impl DeltaStream {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn node(&self) -> Option<&str> {
        self.node.as_deref()
    }

    pub fn on_request(
        &mut self,
        req: &DeltaDiscoveryRequest,
        snapshot: Option<&Snapshot>,
    ) -> Result<Step<DeltaDiscoveryResponse>, ProtocolError> {
        node_of(&mut self.node, req.node.as_ref())?;
        let kind = kind_of(&req.type_url)?;
        let mut step = Step::default();
        let state = self.types.entry(kind).or_insert_with(|| TypeState {
            wildcard: req.resource_names_subscribe.is_empty() && kind.wildcard_by_default(),
            known: req
                .initial_resource_versions
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            initial: true,
            ..Default::default()
        });
        if !req.response_nonce.is_empty() {
            if let Some((nonce, version)) = &state.in_flight {
                if *nonce == req.response_nonce {
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
                    state.in_flight = None;
                }
            }
        }
        for name in &req.resource_names_subscribe {
            if name == "*" {
                state.wildcard = true;
            } else {
                state.names.insert(name.clone());
            }
        }
        for name in &req.resource_names_unsubscribe {
            if name == "*" {
                state.wildcard = false;
            } else {
                state.names.remove(name);
            }
            if !state.subscribed(name) {
                state.known.remove(name);
            }
        }
        if let Some(snapshot) = snapshot {
            step.responses.extend(self.respond(kind, snapshot));
        }
        Ok(step)
    }

    /// A new snapshot: the deltas for every type with no response in flight, in push order.
    pub fn on_snapshot(&mut self, snapshot: &Snapshot) -> Vec<DeltaDiscoveryResponse> {
        let kinds: Vec<ResourceType> = self.types.keys().copied().collect();
        kinds
            .into_iter()
            .filter_map(|k| self.respond(k, snapshot))
            .collect()
    }

    fn respond(
        &mut self,
        kind: ResourceType,
        snapshot: &Snapshot,
    ) -> Option<DeltaDiscoveryResponse> {
        let state = self.types.get_mut(&kind)?;
        if state.in_flight.is_some() {
            return None;
        }
        let mut resources = Vec::new();
        for r in snapshot.resources(kind) {
            if state.subscribed(&r.name) && state.known.get(&r.name) != Some(&r.version) {
                resources.push(XdsResource {
                    name: r.name.clone(),
                    version: r.version.clone(),
                    resource: Some(r.body.clone()),
                    ..Default::default()
                });
            }
        }
        let removed: Vec<String> = state
            .known
            .keys()
            .filter(|name| snapshot.get(kind, name).is_none())
            .cloned()
            .collect();
        if resources.is_empty() && removed.is_empty() && !state.initial {
            return None;
        }
        state.initial = false;
        for r in &resources {
            state.known.insert(r.name.clone(), r.version.clone());
        }
        for name in &removed {
            state.known.remove(name);
        }
        self.nonce += 1;
        let nonce = self.nonce.to_string();
        let version = snapshot.type_version(kind).to_string();
        state.in_flight = Some((nonce.clone(), version.clone()));
        Some(DeltaDiscoveryResponse {
            system_version_info: version,
            resources,
            type_url: kind.type_url().into(),
            removed_resources: removed,
            nonce,
            ..Default::default()
        })
    }
}
