//! Envoy bootstrap: the only static configuration a gateway Envoy gets. It names the node,
//! opens the admin interface and points ADS (SotW or delta, over gRPC/HTTP2) at our server;
//! listeners, routes, clusters and secrets all arrive over that stream.
//!
//! The admin interface serves the whole configuration (`/config_dump`, API keys included) and
//! `/quitquitquit` to whoever reaches it: in a Pod it is a loopback port only the Pod's
//! containers share; on a shared machine (local mode) it is a Unix socket with mode 0600
//! ([`AdminAddress::Pipe`]), reachable only by the user running Envoy.
//!
//! Pure: produces the JSON document (valid YAML too, which `envoy -c` accepts).

use std::{
    fmt,
    net::{IpAddr, SocketAddr},
    path::PathBuf,
};

use serde_json::json;

/// Which ADS variant Envoy speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AdsFlavor {
    /// State of the world (`GRPC`).
    #[default]
    Sotw,
    /// Incremental (`DELTA_GRPC`).
    Delta,
}

/// Where Envoy's admin interface listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminAddress {
    /// A TCP address: anyone who can connect to it is an Envoy administrator.
    Tcp(SocketAddr),
    /// A Unix socket Envoy creates with mode 0600 (replacing a stale one at the path). Linux
    /// limits the path to 107 bytes.
    Pipe(PathBuf),
    /// No admin interface: a sidecar shares its Pod's network with the workload, so it takes
    /// no port the workload may want and offers nothing to reach.
    Off,
}

/// The mode of an admin socket: read and write for Envoy's user only.
pub const ADMIN_PIPE_MODE: u32 = 0o600;

impl From<SocketAddr> for AdminAddress {
    fn from(addr: SocketAddr) -> Self {
        Self::Tcp(addr)
    }
}

impl<I: Into<IpAddr>> From<(I, u16)> for AdminAddress {
    fn from(addr: (I, u16)) -> Self {
        Self::Tcp(addr.into())
    }
}

impl fmt::Display for AdminAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tcp(addr) => addr.fmt(f),
            Self::Pipe(path) => write!(f, "unix:{}", path.display()),
            Self::Off => f.write_str("off"),
        }
    }
}

impl AdminAddress {
    /// The bootstrap's `admin.address`; `None`: no `admin` section.
    fn to_json(&self) -> Option<serde_json::Value> {
        match self {
            Self::Tcp(addr) => Some(json!({ "socket_address": {
                "address": addr.ip().to_string(),
                "port_value": addr.port()
            }})),
            Self::Pipe(path) => Some(json!({ "pipe": {
                "path": path.display().to_string(),
                "mode": ADMIN_PIPE_MODE
            }})),
            Self::Off => None,
        }
    }
}

/// What a bootstrap needs. `xds_host` may be a DNS name (in a cluster) or an IP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bootstrap {
    pub node_id: String,
    /// Envoy's `--service-cluster`, shown in its stats and logs.
    pub node_cluster: String,
    pub xds_host: String,
    pub xds_port: u16,
    pub admin: AdminAddress,
    pub flavor: AdsFlavor,
}

/// The static cluster name of the control plane inside Envoy.
pub const XDS_CLUSTER: &str = "nsight_xds";

impl Bootstrap {
    /// A bootstrap for `node_id` fed by the server at `xds`, admin on `admin`.
    pub fn new(node_id: &str, xds: SocketAddr, admin: impl Into<AdminAddress>) -> Self {
        Self {
            node_id: node_id.into(),
            node_cluster: "nsight-gateway".into(),
            xds_host: xds.ip().to_string(),
            xds_port: xds.port(),
            admin: admin.into(),
            flavor: AdsFlavor::Sotw,
        }
    }

    pub fn with_flavor(mut self, flavor: AdsFlavor) -> Self {
        self.flavor = flavor;
        self
    }

    /// The bootstrap document.
    pub fn to_json(&self) -> serde_json::Value {
        let api_type = match self.flavor {
            AdsFlavor::Sotw => "GRPC",
            AdsFlavor::Delta => "DELTA_GRPC",
        };
        let discovery = if self.xds_host.parse::<IpAddr>().is_ok() {
            "STATIC"
        } else {
            "STRICT_DNS"
        };
        let ads = json!({ "ads": {}, "resource_api_version": "V3" });
        let mut bootstrap = json!({
            "node": { "id": self.node_id, "cluster": self.node_cluster },
            "dynamic_resources": {
                "ads_config": {
                    "api_type": api_type,
                    "transport_api_version": "V3",
                    "set_node_on_first_message_only": true,
                    "grpc_services": [{ "envoy_grpc": { "cluster_name": XDS_CLUSTER } }]
                },
                "lds_config": ads,
                "cds_config": ads
            },
            "static_resources": {
                "clusters": [{
                    "name": XDS_CLUSTER,
                    "type": discovery,
                    "connect_timeout": "1s",
                    "typed_extension_protocol_options": {
                        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                            "explicit_http_config": { "http2_protocol_options": {
                                "connection_keepalive": { "interval": "10s", "timeout": "5s" }
                            } }
                        }
                    },
                    "load_assignment": {
                        "cluster_name": XDS_CLUSTER,
                        "endpoints": [{ "lb_endpoints": [{ "endpoint": { "address": {
                            "socket_address": { "address": self.xds_host, "port_value": self.xds_port }
                        }}}]}]
                    }
                }]
            }
        });
        if let Some(address) = self.admin.to_json() {
            bootstrap["admin"] = json!({ "address": address });
        }
        bootstrap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_points_ads_at_the_server_and_names_the_node() {
        let b = Bootstrap::new(
            "nsight-gateway/local/gw",
            ([127, 0, 0, 1], 18000).into(),
            ([127, 0, 0, 1], 19000),
        )
        .with_flavor(AdsFlavor::Delta);
        let j = b.to_json();
        assert_eq!(j["node"]["id"], "nsight-gateway/local/gw");
        assert_eq!(
            j["dynamic_resources"]["ads_config"]["api_type"],
            "DELTA_GRPC"
        );
        assert_eq!(j["admin"]["address"]["socket_address"]["port_value"], 19000);
        let cluster = &j["static_resources"]["clusters"][0];
        assert_eq!(cluster["type"], "STATIC");
        let addr = &cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
            ["address"]["socket_address"];
        assert_eq!(addr["port_value"], 18000);
    }

    #[test]
    fn a_dns_name_for_the_control_plane_is_resolved_by_envoy() {
        let mut b = Bootstrap::new("n", ([127, 0, 0, 1], 1).into(), ([127, 0, 0, 1], 2));
        b.xds_host = "nsight-operator.nsight.svc".into();
        assert_eq!(
            b.to_json()["static_resources"]["clusters"][0]["type"],
            "STRICT_DNS"
        );
    }

    #[test]
    fn a_pipe_admin_is_a_socket_only_envoys_user_can_open() {
        let b = Bootstrap::new(
            "n",
            ([127, 0, 0, 1], 1).into(),
            AdminAddress::Pipe("/state/envoy/admin.sock".into()),
        );
        let j = b.to_json();
        assert_eq!(
            j["admin"]["address"],
            json!({ "pipe": { "path": "/state/envoy/admin.sock", "mode": 0o600 } })
        );
        assert!(j["admin"]["address"]["socket_address"].is_null());
        assert_eq!(b.admin.to_string(), "unix:/state/envoy/admin.sock");
    }

    #[test]
    fn a_sidecar_has_no_admin_interface() {
        let j = Bootstrap::new("n", ([127, 0, 0, 1], 1).into(), AdminAddress::Off).to_json();
        assert!(j.get("admin").is_none(), "{j}");
        assert_eq!(j["node"]["id"], "n");
    }
}
