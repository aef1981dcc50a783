//! A listener's routes -> Envoy `RouteConfiguration`: one virtual host, prefix matches in IR
//! order, per-route timeout (none for streaming routes), prefix rewrite and safe retries; on a
//! tenant-routed listener, first the `cluster_header` routes the routing filter feeds. Routes to
//! an upstream with a gateway token carry it in `x-nsight-gateway-token`. Where an OAuth2
//! filter signs browsers in and a public route (the UI at `/`) would swallow its paths, a route
//! for `/oauth2/` to the same upstream, behind the filter, comes first.

use nsight_contracts::{
    gateway_only::{self, GatewayToken},
    routes,
};
use xds_api::pb::{
    envoy::config::core::v3::{
        header_value_option::HeaderAppendAction, HeaderValue, HeaderValueOption,
    },
    envoy::config::route::v3::{
        header_matcher::HeaderMatchSpecifier, route::Action, route_action::ClusterSpecifier,
        route_match::PathSpecifier, FilterConfig, HeaderMatcher, RetryPolicy, Route as XdsRoute,
        RouteAction, RouteConfiguration, RouteMatch, VirtualHost,
    },
    google::protobuf::UInt32Value,
};

use super::{duration, route_config_name, wasm};
use crate::{
    ir::{AuthFilter, Listener, Retry, Route, TenantRouting, Upstream},
    resources::{any, Resource, ResourceType},
};

pub(super) fn route_configuration(l: &Listener, upstreams: &[Upstream]) -> Resource {
    let name = route_config_name(&l.name);
    let config = RouteConfiguration {
        name: name.clone(),
        virtual_hosts: vec![VirtualHost {
            name: l.name.clone(),
            domains: vec!["*".into()],
            routes: l
                .routing
                .iter()
                .flat_map(tenant_routes)
                .chain(with_sign_in_paths(l).iter().map(|r| {
                    let mut route = route(r, l.auth.is_some());
                    if let Some(token) = upstreams
                        .iter()
                        .find(|u| u.name == r.upstream)
                        .and_then(|u| u.gateway_token.as_ref())
                    {
                        route.request_headers_to_add = vec![gateway_token_header(token)];
                    }
                    if l.routing.is_some() {
                        // The routing filter only acts on the tenant routes.
                        route
                            .typed_per_filter_config
                            .insert(wasm::ROUTING_FILTER_NAME.to_string(), disabled());
                    }
                    route
                }))
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let refs = l
        .routes
        .iter()
        .map(|r| r.upstream.clone())
        .chain(l.routing.iter().flat_map(|t| t.upstreams.iter().cloned()))
        .map(|u| (ResourceType::Cluster, u))
        .collect();
    Resource::new(&name, &config, refs)
}

/// The listener's routes, plus `/oauth2/` (not public) before the public route that covers it
/// when the filter signs browsers in: the filter must see its callback and sign-in paths.
fn with_sign_in_paths(l: &Listener) -> Vec<Route> {
    let mut routes = l.routes.clone();
    let signs_in = l.auth.as_ref().is_some_and(AuthFilter::signs_in);
    let covers = |r: &Route| routes::OAUTH2.starts_with(&r.prefix);
    if signs_in && !routes.iter().any(|r| r.prefix == routes::OAUTH2) {
        if let Some(i) = routes.iter().position(covers).filter(|&i| routes[i].public) {
            let mut own = routes[i].clone();
            own.prefix = routes::OAUTH2.into();
            own.public = false;
            routes.insert(i, own);
        }
    }
    routes
}

fn route(r: &Route, has_auth: bool) -> XdsRoute {
    let retry_policy = match r.retry {
        Retry::Never => None,
        Retry::ConnectFailures { attempts } => Some(RetryPolicy {
            retry_on: "connect-failure,refused-stream".into(),
            num_retries: Some(UInt32Value { value: attempts }),
            ..Default::default()
        }),
    };
    XdsRoute {
        name: r.prefix.clone(),
        r#match: Some(RouteMatch {
            path_specifier: Some(PathSpecifier::Prefix(r.prefix.clone())),
            ..Default::default()
        }),
        typed_per_filter_config: if r.public && has_auth {
            // Disables the auth filter (by its HTTP filter name) on this route only.
            [(wasm::FILTER_NAME.to_string(), disabled())].into()
        } else {
            Default::default()
        },
        action: Some(Action::Route(RouteAction {
            cluster_specifier: Some(ClusterSpecifier::Cluster(r.upstream.clone())),
            prefix_rewrite: r.rewrite_prefix.clone().unwrap_or_default(),
            // Zero disables Envoy's default 15 s: a streaming route has no total limit.
            timeout: Some(r.timeout.map(duration).unwrap_or_default()),
            retry_policy,
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// `x-nsight-gateway-token: <token>`, replacing whatever a client sent under that name.
fn gateway_token_header(token: &GatewayToken) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue {
            key: gateway_only::HEADER.into(),
            value: token.expose().into(),
            ..Default::default()
        }),
        append_action: HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
        ..Default::default()
    }
}

/// The per-route configuration that turns an HTTP filter off.
fn disabled() -> xds_api::pb::google::protobuf::Any {
    any(&FilterConfig {
        disabled: true,
        ..Default::default()
    })
}

/// The two routes of a tenant-routed listener, placed before the others: requests the routing
/// filter has routed (cluster header present, prefix already stripped) go to the cluster the
/// header names; requests under the tenant prefix match the second route, so the filter runs
/// on them (and always answers or sets the header). Envoy re-matches after the filter changes
/// the headers.
fn tenant_routes(t: &TenantRouting) -> [XdsRoute; 2] {
    let action = || {
        Some(Action::Route(RouteAction {
            cluster_specifier: Some(ClusterSpecifier::ClusterHeader(t.cluster_header.clone())),
            timeout: Some(duration(t.timeout)),
            retry_policy: Some(RetryPolicy {
                retry_on: "connect-failure,refused-stream".into(),
                num_retries: Some(UInt32Value { value: 2 }),
                ..Default::default()
            }),
            ..Default::default()
        }))
    };
    let routed = XdsRoute {
        name: "tenant-routed".into(),
        r#match: Some(RouteMatch {
            path_specifier: Some(PathSpecifier::Prefix("/".into())),
            headers: vec![HeaderMatcher {
                name: t.cluster_header.clone(),
                header_match_specifier: Some(HeaderMatchSpecifier::PresentMatch(true)),
                ..Default::default()
            }],
            ..Default::default()
        }),
        action: action(),
        ..Default::default()
    };
    let by_prefix = XdsRoute {
        name: t.path_prefix.clone(),
        r#match: Some(RouteMatch {
            path_specifier: Some(PathSpecifier::Prefix(t.path_prefix.clone())),
            ..Default::default()
        }),
        action: action(),
        ..Default::default()
    };
    [routed, by_prefix]
}
