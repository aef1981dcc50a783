//! OTLPProxyConfig -> ConfigMap `<name>`: what the injected OTLP proxy sidecar (an Envoy) of
//! profiled Pods mounts.
//!
//! ```text
//! workload ──OTLP/HTTP──> 127.0.0.1:<port> sidecar Envoy (envoy.json) ──> <collectorRef>.<ns>.svc:4318
//! ```
//!
//! Keys: `envoy.json` (a static Envoy bootstrap), `collector-endpoint` (the collector's OTLP/HTTP
//! URL) and `port`. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use nsight_api::OTLPProxyConfig;
use serde_json::{json, Value};

use super::{otel_collector, Component, Desired, Object, Owner, RenderError, RenderSettings};

/// The `app.kubernetes.io/name` of what this kind renders.
pub const NAME: &str = "otlp-proxy";
/// The sidecar's listening port unless `spec.port` says otherwise.
pub const DEFAULT_PORT: u16 = 4318;
pub const ENVOY_KEY: &str = "envoy.json";
pub const ENDPOINT_KEY: &str = "collector-endpoint";
pub const PORT_KEY: &str = "port";

/// The Envoy bootstrap of the sidecar: one loopback listener routing every request to the
/// collector's OTLP/HTTP port.
pub fn envoy_bootstrap(port: u16, collector_host: &str) -> Value {
    let hcm = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
    json!({
        "node": {"id": "otlp-proxy", "cluster": "otlp-proxy"},
        "static_resources": {
            "listeners": [{
                "name": "otlp",
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.http_connection_manager",
                    "typed_config": {
                        "@type": hcm,
                        "stat_prefix": "otlp",
                        "route_config": {"name": "otlp", "virtual_hosts": [{
                            "name": "collector",
                            "domains": ["*"],
                            "routes": [{"match": {"prefix": "/"},
                                        "route": {"cluster": "collector", "timeout": "10s"}}],
                        }]},
                        "http_filters": [{
                            "name": "envoy.filters.http.router",
                            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
                        }],
                    },
                }]}],
            }],
            "clusters": [{
                "name": "collector",
                "type": "STRICT_DNS",
                "connect_timeout": "2s",
                "load_assignment": {"cluster_name": "collector", "endpoints": [{"lb_endpoints": [{
                    "endpoint": {"address": {"socket_address": {
                        "address": collector_host,
                        "port_value": otel_collector::OTLP_HTTP.port,
                    }}},
                }]}]},
            }],
        },
    })
}

pub fn render(cr: &OTLPProxyConfig, settings: &RenderSettings) -> Result<Desired, RenderError> {
    let _ = settings;
    let owner = Owner::of(cr, Component::OtlpProxy)?;
    let port = cr.spec.port.unwrap_or(DEFAULT_PORT);
    let mut data = BTreeMap::from([(PORT_KEY.to_owned(), port.to_string())]);
    if let Some(collector) = &cr.spec.collector_ref {
        let host = format!("{collector}.{}.svc", owner.namespace);
        data.insert(
            ENDPOINT_KEY.into(),
            format!("http://{host}:{}", otel_collector::OTLP_HTTP.port),
        );
        data.insert(
            ENVOY_KEY.into(),
            serde_json::to_string_pretty(&envoy_bootstrap(port, &host)).unwrap_or_default(),
        );
    }
    Ok(Desired {
        objects: vec![Object::ConfigMap(ConfigMap {
            metadata: owner.meta(owner.name.clone()),
            data: Some(data),
            ..ConfigMap::default()
        })],
    })
}
