//! IR -> Envoy v3 resources: plain functions over plain data, one file per Envoy feature.
//!
//! ```text
//! GatewayIr ─┬─ listener.rs  Listener (+ HCM, TLS transport socket via SDS, auth filter)
//!            ├─ route.rs     RouteConfiguration (prefix routes, timeouts, retries)
//!            ├─ cluster.rs   Cluster (endpoints, connect timeout, health check, upstream TLS)
//!            ├─ secret.rs    Secret (TLS certificate for SDS)
//!            └─ wasm.rs      the proxy-wasm HTTP filter (Envoy messages xds-api lacks)
//! ```
//! Owns no state and does no I/O; what to send when is `cache` and `protocol`'s job.

mod cluster;
mod listener;
mod route;
mod secret;
pub mod tls;
pub mod wasm;

use crate::{
    ir::{GatewayIr, IrError},
    resources::{Resource, ResourceType, Resources},
};

/// Translates a validated IR into the resources one Envoy node needs.
pub fn translate(ir: &GatewayIr) -> Result<Resources, IrError> {
    ir.validate()?;
    let mut out = Resources::new();
    let mut put = |kind: ResourceType, r: Resource| {
        out.entry(kind).or_default().insert(r.name.clone(), r);
    };
    for u in &ir.upstreams {
        put(ResourceType::Cluster, cluster::cluster(u));
    }
    for s in &ir.secrets {
        put(ResourceType::Secret, secret::secret(s));
    }
    for l in &ir.listeners {
        put(ResourceType::Listener, listener::listener(l, &ir.upstreams));
        put(
            ResourceType::Route,
            route::route_configuration(l, &ir.upstreams),
        );
    }
    // Every type is present (possibly empty) so that removing the last resource of a type is
    // a change the protocol sends.
    for kind in ResourceType::ALL {
        out.entry(kind).or_default();
    }
    Ok(out)
}

/// Names of the route configuration and stats of a listener.
pub fn route_config_name(listener: &str) -> String {
    format!("{listener}-routes")
}

fn duration(d: std::time::Duration) -> xds_api::pb::google::protobuf::Duration {
    xds_api::pb::google::protobuf::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// The config source meaning "over the same ADS stream".
fn ads_source() -> xds_api::pb::envoy::config::core::v3::ConfigSource {
    use xds_api::pb::envoy::config::core::v3::{
        config_source::ConfigSourceSpecifier, AggregatedConfigSource, ApiVersion, ConfigSource,
    };
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(ConfigSourceSpecifier::Ads(AggregatedConfigSource {})),
        ..Default::default()
    }
}
