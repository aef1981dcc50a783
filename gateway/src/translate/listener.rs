//! IR listener -> Envoy `Listener`: one filter chain with the HTTP connection manager (routes
//! over RDS on the same ADS stream), the auth filter then the tenant routing filter before the
//! router (the routing filter also given the gateway tokens of the tenants' upstreams), and TLS from an SDS secret when the listener has one. Bodies stream: no buffering
//! filter is ever added.

use xds_api::pb::envoy::{
    config::listener::v3::{filter, Filter, FilterChain, Listener as XdsListener},
    extensions::filters::{
        http::router::v3::Router,
        network::http_connection_manager::v3::{
            http_connection_manager::{CodecType, RouteSpecifier},
            http_filter, HttpConnectionManager, HttpFilter, Rds,
        },
    },
};

use super::{ads_source, cluster::socket_address, duration, route_config_name, tls, wasm};
use crate::{
    ir::{Listener, Upstream},
    resources::{any, Resource, ResourceType},
};

pub(super) fn listener(l: &Listener, upstreams: &[Upstream]) -> Resource {
    let routes = route_config_name(&l.name);
    let mut http_filters: Vec<HttpFilter> = l.auth.iter().map(wasm::auth_http_filter).collect();
    http_filters.extend(
        l.routing
            .iter()
            .map(|r| wasm::routing_http_filter(r, upstreams)),
    );
    http_filters.push(HttpFilter {
        name: "envoy.filters.http.router".into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(
            any(&Router::default()),
        )),
        ..Default::default()
    });
    let hcm = HttpConnectionManager {
        stat_prefix: l.name.clone(),
        codec_type: CodecType::Auto as i32,
        route_specifier: Some(RouteSpecifier::Rds(Rds {
            config_source: Some(ads_source()),
            route_config_name: routes.clone(),
        })),
        http_filters,
        stream_idle_timeout: Some(duration(l.stream_idle_timeout)),
        ..Default::default()
    };
    let transport_socket = l.tls_secret.as_deref().map(tls::downstream_tls);
    let listener = XdsListener {
        name: l.name.clone(),
        address: Some(socket_address(&l.address, l.port)),
        filter_chains: vec![FilterChain {
            filters: vec![Filter {
                name: "envoy.filters.network.http_connection_manager".into(),
                config_type: Some(filter::ConfigType::TypedConfig(any(&hcm))),
            }],
            transport_socket,
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut refs = vec![(ResourceType::Route, routes)];
    refs.extend(
        l.tls_secret
            .iter()
            .map(|s| (ResourceType::Secret, s.clone())),
    );
    Resource::new(&l.name, &listener, refs)
}
