//! The OTLP proxy sidecar of a mirroring Pod, as gateway IR: what the operator publishes over
//! ADS for one OTLPProxyConfig, and every sidecar of that config is served (pure).
//!
//! ```text
//! workload ──OTLP/HTTP──> 127.0.0.1:<http port> ──┐ sidecar Envoy  ┌──> collector:4318 (HTTP/1.1)
//! agent ────OTLP/gRPC──> 127.0.0.1:4317 ──────────┘ (over our ADS) └──> collector:4317 (HTTP/2)
//! ```
//! The sidecar's bootstrap ([`bootstrap`]) holds only the ADS server: each Pod names itself
//! `nsight-otlp-sidecar/<namespace>/<pod>` and its OTLPProxyConfig as its node cluster, so a
//! changed config (another collector, another port) reaches running Pods, and each Pod's ACKs
//! and NACKs are its own (`cache::node_id::snapshot_key`).

use std::time::Duration;

use crate::{
    bootstrap::{AdminAddress, Bootstrap},
    ir::{GatewayIr, Listener, Retry, Route, Upstream},
};

/// The sidecar's OTLP/gRPC port (the agent's NVTX mirroring sends there).
pub const GRPC_PORT: u16 = 4317;
/// The sidecar's OTLP/HTTP port unless the OTLPProxyConfig's `spec.port` says otherwise.
pub const DEFAULT_HTTP_PORT: u16 = 4318;
/// The node cluster of sidecars whose config is unknown (never served anything).
pub const NO_CONFIG: &str = "";

/// Where a sidecar forwards: the collector's host and its OTLP ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collector {
    pub host: String,
    pub http_port: u16,
    pub grpc_port: u16,
}

/// The sidecar's listeners on `ports` (OTLP/HTTP, OTLP/gRPC; loopback only: the Pod's own
/// processes) and the collector's two upstreams. Spans are small and batched: a 10 s total per
/// export, retried only when the collector could not be reached (it never saw the request).
pub fn ir((http_port, grpc_port): (u16, u16), collector: &Collector) -> GatewayIr {
    let route = |upstream: &str| Route {
        timeout: Some(Duration::from_secs(10)),
        retry: Retry::ConnectFailures { attempts: 2 },
        ..Route::streaming("/", upstream)
    };
    let listener = |name: &str, port: u16, upstream: &str| Listener {
        routes: vec![route(upstream)],
        stream_idle_timeout: Duration::from_secs(30),
        ..Listener::http(name, "127.0.0.1", port)
    };
    GatewayIr {
        listeners: vec![
            listener("otlp", http_port, "collector"),
            listener("otlp_grpc", grpc_port, "collector_grpc"),
        ],
        upstreams: vec![
            Upstream::new("collector", &collector.host, collector.http_port),
            Upstream::new("collector_grpc", &collector.host, collector.grpc_port).with_http2(),
        ],
        secrets: Vec::new(),
    }
}

/// The sidecar's whole static configuration: the ADS server at `xds_host:xds_port`, no admin
/// interface. The node id and cluster are set on Envoy's command line (`--service-node`,
/// `--service-cluster`), where the Pod's name is known.
pub fn bootstrap(xds_host: &str, xds_port: u16) -> Bootstrap {
    Bootstrap {
        node_id: String::new(),
        node_cluster: NO_CONFIG.into(),
        xds_host: xds_host.into(),
        xds_port,
        admin: AdminAddress::Off,
        flavor: crate::bootstrap::AdsFlavor::Sotw,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use crate::{resources::ResourceType, translate::translate};

    fn collector() -> Collector {
        Collector {
            host: "otel.team-a.svc".into(),
            http_port: 4318,
            grpc_port: 4317,
        }
    }

    #[test]
    fn two_loopback_listeners_forward_to_the_collector_grpc_over_http2() {
        let ir = ir((14318, GRPC_PORT), &collector());
        ir.validate().unwrap();
        let ports: Vec<(&str, u16)> = ir
            .listeners
            .iter()
            .map(|l| (l.address.as_str(), l.port))
            .collect();
        assert_eq!(ports, [("127.0.0.1", 14318), ("127.0.0.1", GRPC_PORT)]);
        let http2: Vec<(&str, bool)> = ir
            .upstreams
            .iter()
            .map(|u| (u.name.as_str(), u.http2))
            .collect();
        assert_eq!(http2, [("collector", false), ("collector_grpc", true)]);
        assert!(ir.listeners.iter().all(|l| l.auth.is_none()));
        let resources = translate(&ir).unwrap();
        assert_eq!(resources[&ResourceType::Listener].len(), 2);
        assert_eq!(resources[&ResourceType::Cluster].len(), 2);
    }

    #[test]
    fn the_bootstrap_names_only_the_ads_server() {
        let j = bootstrap("nsight-operator-xds.nsight.svc", 18000).to_json();
        assert!(j.get("admin").is_none());
        assert!(j.get("static_resources").is_some());
        let c = &j["static_resources"]["clusters"][0];
        assert_eq!(c["type"], "STRICT_DNS");
        assert_eq!(
            c["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
                ["socket_address"]["address"],
            "nsight-operator-xds.nsight.svc"
        );
    }
}
