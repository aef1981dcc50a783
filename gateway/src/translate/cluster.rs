//! Upstream -> Envoy `Cluster`: endpoints inline (static IPs or DNS names), connect timeout,
//! active HTTP health check, TLS to the upstream (`tls::upstream_tls`). No EDS: endpoints change with the IR, like everything else.

use std::net::IpAddr;

use xds_api::pb::{
    envoy::config::{
        cluster::v3::{
            cluster::{ClusterDiscoveryType, DiscoveryType, DnsLookupFamily},
            Cluster,
        },
        core::v3::{
            address, health_check, socket_address::PortSpecifier, Address, HealthCheck,
            SocketAddress,
        },
        endpoint::v3::{
            lb_endpoint::HostIdentifier, ClusterLoadAssignment, Endpoint, LbEndpoint,
            LocalityLbEndpoints,
        },
    },
    google::protobuf::UInt32Value,
};

use super::duration;
use crate::{ir::Upstream, resources::Resource};

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
