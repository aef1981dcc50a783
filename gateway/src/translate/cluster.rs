//! Upstream -> Envoy `Cluster`: endpoints inline (static IPs or DNS names), connect timeout,
//! active HTTP health check, TLS to the upstream (`tls::upstream_tls`), HTTP/2 for gRPC
//! upstreams. No EDS: endpoints change with the IR, like everything else.
//!
//! A DNS name that does not resolve yet (a Service created after the Envoy) is asked again
//! within half a second, backing off to 5 s, instead of waiting for the next 5 s refresh.
//!
//! xds-api lacks `envoy.extensions.upstreams.http.v3.HttpProtocolOptions`, so the two messages
//! that choose HTTP/2 are declared here with `prost` (field numbers from
//! `envoy/extensions/upstreams/http/v3/http_protocol_options.proto`).

use std::net::IpAddr;

use xds_api::pb::{
    envoy::config::{
        cluster::v3::{
            cluster::{ClusterDiscoveryType, DiscoveryType, DnsLookupFamily, RefreshRate},
            Cluster,
        },
        core::v3::{
            address, health_check, socket_address::PortSpecifier, Address, HealthCheck,
            Http2ProtocolOptions, SocketAddress,
        },
        endpoint::v3::{
            lb_endpoint::HostIdentifier, ClusterLoadAssignment, Endpoint, LbEndpoint,
            LocalityLbEndpoints,
        },
    },
    google::protobuf::UInt32Value,
};

use super::duration;
use crate::{
    ir::Upstream,
    resources::{any, Resource},
};

/// The key of `typed_extension_protocol_options` Envoy reads the upstream HTTP options from.
const HTTP_OPTIONS_KEY: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

/// `envoy.extensions.upstreams.http.v3.HttpProtocolOptions` (the field we set).
#[derive(Clone, PartialEq, prost::Message)]
pub struct HttpProtocolOptions {
    /// `explicit_http_config`, in the `upstream_protocol_options` oneof.
    #[prost(message, optional, tag = "3")]
    pub explicit_http_config: Option<ExplicitHttpConfig>,
}

impl prost::Name for HttpProtocolOptions {
    const NAME: &'static str = "HttpProtocolOptions";
    const PACKAGE: &'static str = "envoy.extensions.upstreams.http.v3";
}

/// `HttpProtocolOptions.ExplicitHttpConfig` (the field we set).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExplicitHttpConfig {
    /// `http2_protocol_options`, in the `protocol_config` oneof.
    #[prost(message, optional, tag = "2")]
    pub http2_protocol_options: Option<Http2ProtocolOptions>,
}

impl prost::Name for ExplicitHttpConfig {
    const NAME: &'static str = "HttpProtocolOptions.ExplicitHttpConfig";
    const PACKAGE: &'static str = "envoy.extensions.upstreams.http.v3";
}

pub(super) fn cluster(u: &Upstream) -> Resource {
    let all_ips = u.endpoints.iter().all(|e| e.host.parse::<IpAddr>().is_ok());
    let kind = if all_ips {
        DiscoveryType::Static
    } else {
        DiscoveryType::StrictDns
    };
    let endpoints = u
        .endpoints
        .iter()
        .map(|e| LbEndpoint {
            host_identifier: Some(HostIdentifier::Endpoint(Endpoint {
                address: Some(socket_address(&e.host, e.port)),
                ..Default::default()
            })),
            ..Default::default()
        })
        .collect();
    let health_checks = u
        .health_check
        .iter()
        .map(|h| HealthCheck {
            timeout: Some(duration(h.timeout)),
            interval: Some(duration(h.interval)),
            unhealthy_threshold: Some(UInt32Value {
                value: h.unhealthy_threshold,
            }),
            healthy_threshold: Some(UInt32Value {
                value: h.healthy_threshold,
            }),
            health_checker: Some(health_check::HealthChecker::HttpHealthCheck(
                health_check::HttpHealthCheck {
                    path: h.path.clone(),
                    ..Default::default()
                },
            )),
            ..Default::default()
        })
        .collect();
    let cluster = Cluster {
        name: u.name.clone(),
        connect_timeout: Some(duration(u.connect_timeout)),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(kind as i32)),
        dns_lookup_family: DnsLookupFamily::V4Preferred as i32,
        load_assignment: Some(ClusterLoadAssignment {
            cluster_name: u.name.clone(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints: endpoints,
                ..Default::default()
            }],
            ..Default::default()
        }),
        health_checks,
        transport_socket: u.tls.as_ref().map(super::tls::upstream_tls),
        dns_failure_refresh_rate: (kind == DiscoveryType::StrictDns).then(|| RefreshRate {
            base_interval: Some(duration(std::time::Duration::from_millis(500))),
            max_interval: Some(duration(std::time::Duration::from_secs(5))),
        }),
        typed_extension_protocol_options: if u.http2 {
            [(
                HTTP_OPTIONS_KEY.to_owned(),
                any(&HttpProtocolOptions {
                    explicit_http_config: Some(ExplicitHttpConfig {
                        http2_protocol_options: Some(Http2ProtocolOptions::default()),
                    }),
                }),
            )]
            .into()
        } else {
            Default::default()
        },
        ..Default::default()
    };
    Resource::new(&u.name, &cluster, Vec::new())
}

pub(super) fn socket_address(host: &str, port: u16) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: host.into(),
            port_specifier: Some(PortSpecifier::PortValue(u32::from(port))),
            ..Default::default()
        })),
    }
}
