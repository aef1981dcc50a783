//! OTLPProxyConfig -> ConfigMap `<name>`: where a profiled Pod's OTLP proxy sidecar listens and
//! forwards, for workloads that configure their own OpenTelemetry SDK; and the sidecar's
//! collector ([`collector`]), which `xds::otlp_proxies` publishes over ADS.
//!
//! ```text
//! workload ──OTLP/HTTP──> 127.0.0.1:<port> ──┐ sidecar Envoy  ┌──> <collectorRef>.<ns>.svc:4318
//! agent ────OTLP/gRPC──> 127.0.0.1:4317 ─────┘ (over ADS)     └──> <collectorRef>.<ns>.svc:4317 (HTTP/2)
//! ```
//!
//! Keys: `collector-endpoint` (the collector's OTLP/HTTP URL), `port` and `grpc-port`. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use nsight_api::OTLPProxyConfig;
use nsight_gateway::otlp_sidecar::{self, Collector};

use super::{otel_collector, Component, Desired, Object, Owner, RenderError, RenderSettings};

/// The `app.kubernetes.io/name` of what this kind renders.
pub const NAME: &str = "otlp-proxy";
/// The sidecar's listening port unless `spec.port` says otherwise.
pub const DEFAULT_PORT: u16 = otlp_sidecar::DEFAULT_HTTP_PORT;
pub const ENDPOINT_KEY: &str = "collector-endpoint";
pub const PORT_KEY: &str = "port";
pub const GRPC_PORT_KEY: &str = "grpc-port";
/// The sidecar's OTLP/gRPC port (the agent's NVTX mirroring sends there).
pub const GRPC_PORT: u16 = otlp_sidecar::GRPC_PORT;

/// The sidecar's ports: OTLP/HTTP (`spec.port`, default 4318) and OTLP/gRPC (4317), or why
/// they cannot be.
pub fn ports(cr: &OTLPProxyConfig) -> Result<(u16, u16), RenderError> {
    let port = cr.spec.port.unwrap_or(DEFAULT_PORT);
    if port == GRPC_PORT {
        return Err(RenderError::Invalid(format!(
            "spec.port {port} is the sidecar's OTLP/gRPC port; choose another port for OTLP/HTTP \
             (default {DEFAULT_PORT})"
        )));
    }
    Ok((port, GRPC_PORT))
}

/// Where the sidecars of `cr` forward: its NsightOtelCollector's Service (the collector's
/// standard OTLP ports); `None` without `spec.collectorRef`.
pub fn collector(cr: &OTLPProxyConfig) -> Option<Collector> {
    let name = cr.spec.collector_ref.as_ref()?;
    let namespace = cr.metadata.namespace.as_deref().unwrap_or("default");
    Some(Collector {
        host: format!("{name}.{namespace}.svc"),
        http_port: otel_collector::OTLP_HTTP.port,
        grpc_port: otel_collector::OTLP_GRPC.port,
    })
}

pub fn render(cr: &OTLPProxyConfig, settings: &RenderSettings) -> Result<Desired, RenderError> {
    let _ = settings;
    let owner = Owner::of(cr, Component::OtlpProxy)?;
    let (port, grpc_port) = ports(cr)?;
    let mut data = BTreeMap::from([
        (PORT_KEY.to_owned(), port.to_string()),
        (GRPC_PORT_KEY.to_owned(), grpc_port.to_string()),
    ]);
    if let Some(collector) = collector(cr) {
        data.insert(
            ENDPOINT_KEY.into(),
            format!("http://{}:{}", collector.host, collector.http_port),
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
