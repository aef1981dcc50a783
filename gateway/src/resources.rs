//! Envoy resources as the cache and the protocol see them: a type, a name, an encoded
//! `Any`, a content version and the names of the other resources it refers to.
//!
//! Owns the resource types this control plane serves and their type URLs. Knows nothing of
//! the IR (that is `translate`) nor of streams (that is `protocol`).

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use xds_api::pb::google::protobuf::Any;

/// The xDS resource types served, in the order a change is pushed (make before break:
/// clusters and secrets before the listeners and routes that use them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum ResourceType {
    Cluster,
    Secret,
    Listener,
    Route,
}

impl ResourceType {
    pub const ALL: [ResourceType; 4] = [Self::Cluster, Self::Secret, Self::Listener, Self::Route];

    pub fn type_url(self) -> &'static str {
        match self {
            Self::Cluster => "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            Self::Secret => "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
            Self::Listener => "type.googleapis.com/envoy.config.listener.v3.Listener",
            Self::Route => "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
        }
    }

    pub fn from_type_url(url: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.type_url() == url)
    }

    /// Listeners and clusters may be requested as a wildcard (all of them); routes and
    /// secrets are always requested by name.
    pub fn wildcard_by_default(self) -> bool {
        matches!(self, Self::Cluster | Self::Listener)
    }

    /// A fixed label for metrics and JSON.
    pub fn label(self) -> &'static str {
        match self {
            Self::Cluster => "cluster",
            Self::Secret => "secret",
            Self::Listener => "listener",
            Self::Route => "route",
        }
    }
}

/// One encoded resource. Invariant: `version` is a digest of `body`, so equal versions mean
/// equal content (used to send only what changed).
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub name: String,
    pub body: Any,
    pub version: String,
    /// Resources this one cannot work without, checked by `Snapshot::new`.
    pub refs: Vec<(ResourceType, String)>,
}

impl Resource {
    pub fn new<M: prost::Name>(name: &str, message: &M, refs: Vec<(ResourceType, String)>) -> Self {
        let body = any(message);
        let version = hex::encode(&Sha256::digest(&body.value)[..8]);
        Self {
            name: name.into(),
            body,
            version,
            refs,
        }
    }
}

/// Encodes a message into an `Any` (encoding into a `Vec` cannot fail). The type URL is built
/// from the full name: xds-api's well-known types and our own messages leave the `prost::Name`
/// domain empty, and Envoy wants `type.googleapis.com/`.
pub fn any<M: prost::Name>(message: &M) -> Any {
    Any {
        type_url: format!("type.googleapis.com/{}", M::full_name()),
        value: prost::Message::encode_to_vec(message),
    }
}

/// All resources of one gateway, by type then name.
pub type Resources = BTreeMap<ResourceType, BTreeMap<String, Resource>>;
