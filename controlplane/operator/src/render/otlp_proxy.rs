//! OTLPProxyConfig -> ConfigMap `<name>`: what the injected OTLP proxy sidecar (an Envoy) of
//! profiled Pods mounts.
//!
//! ```text
//! workload ──OTLP/HTTP──> 127.0.0.1:<port> ──┐ sidecar Envoy  ┌──> <collectorRef>.<ns>.svc:4318
//! agent ────OTLP/gRPC──> 127.0.0.1:4317 ─────┘ (envoy.json)   └──> <collectorRef>.<ns>.svc:4317 (HTTP/2)
//! ```
//!
//! Keys: `envoy.json` (a static Envoy bootstrap), `collector-endpoint` (the collector's OTLP/HTTP
//! URL), `port` and `grpc-port`. Pure.

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
pub const GRPC_PORT_KEY: &str = "grpc-port";
/// The sidecar's OTLP/gRPC port (the agent's NVTX mirroring sends there).
pub const GRPC_PORT: u16 = 4317;

/// Where the sidecar forwards: the collector's host and its OTLP ports.
#[derive(Debug, Clone, Copy)]
pub struct Upstream<'a> {
    pub host: &'a str,
    pub http_port: u16,
    pub grpc_port: u16,
}

impl<'a> Upstream<'a> {
    /// An NsightOtelCollector's Service (its standard OTLP ports).
    pub fn collector(host: &'a str) -> Self {
        Self {
            host,
            http_port: otel_collector::OTLP_HTTP.port,
            grpc_port: otel_collector::OTLP_GRPC.port,
        }
    }
}

/// The Envoy bootstrap of the sidecar: two loopback listeners, OTLP/HTTP on `http_port` to the
/// collector's OTLP/HTTP port, and OTLP/gRPC on `grpc_port` to its gRPC port over HTTP/2.
pub fn envoy_bootstrap(http_port: u16, grpc_port: u16, upstream: &Upstream<'_>) -> Value {
    json!({
        "node": {"id": "otlp-proxy", "cluster": "otlp-proxy"},
        "static_resources": {
            "listeners": [
                listener("otlp", http_port, "collector"),
                listener("otlp_grpc", grpc_port, "collector_grpc"),
            ],
            "clusters": [
                cluster("collector", upstream.host, upstream.http_port, false),
                cluster("collector_grpc", upstream.host, upstream.grpc_port, true),
            ],
        },
    })
}

fn listener(name: &str, port: u16, cluster: &str) -> Value {
    let hcm = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
    json!({
        "name": name,
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
        "filter_chains": [{"filters": [{
            "name": "envoy.filters.network.http_connection_manager",
            "typed_config": {
                "@type": hcm,
                "stat_prefix": name,
                "route_config": {"name": name, "virtual_hosts": [{
                    "name": "collector",
                    "domains": ["*"],
                    "routes": [{"match": {"prefix": "/"},
                                "route": {"cluster": cluster, "timeout": "10s"}}],
                }]},
                "http_filters": [{
                    "name": "envoy.filters.http.router",
                    "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
                }],
            },
        }]}],
    })
}

fn cluster(name: &str, host: &str, port: u16, http2: bool) -> Value {
    // A collector Service created after the Pod: resolved again within seconds, not Envoy's
    // default 5 s refresh only.
    let mut c = json!({
        "name": name,
        "type": "STRICT_DNS",
        "connect_timeout": "2s",
        "dns_refresh_rate": "5s",
        "dns_failure_refresh_rate": {"base_interval": "0.5s", "max_interval": "5s"},
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [{
            "endpoint": {"address": {"socket_address": {"address": host, "port_value": port}}},
        }]}]},
    });
    if http2 {
        c["typed_extension_protocol_options"] = json!({
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}},
            },
        });
    }
    c
}

pub fn render(cr: &OTLPProxyConfig, settings: &RenderSettings) -> Result<Desired, RenderError> {
    let _ = settings;
    let owner = Owner::of(cr, Component::OtlpProxy)?;
    let port = cr.spec.port.unwrap_or(DEFAULT_PORT);
    if port == GRPC_PORT {
        return Err(RenderError::Invalid(format!(
            "spec.port {port} is the sidecar's OTLP/gRPC port; choose another port for OTLP/HTTP \
             (default {DEFAULT_PORT})"
        )));
    }
    let mut data = BTreeMap::from([
        (PORT_KEY.to_owned(), port.to_string()),
        (GRPC_PORT_KEY.to_owned(), GRPC_PORT.to_string()),
    ]);
    if let Some(collector) = &cr.spec.collector_ref {
        let host = format!("{collector}.{}.svc", owner.namespace);
        data.insert(
            ENDPOINT_KEY.into(),
            format!("http://{host}:{}", otel_collector::OTLP_HTTP.port),
        );
        data.insert(
            ENVOY_KEY.into(),
            serde_json::to_string_pretty(&envoy_bootstrap(
                port,
                GRPC_PORT,
                &Upstream::collector(&host),
            ))
            .unwrap_or_default(),
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
