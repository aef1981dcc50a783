//! A listener's routes -> Envoy `RouteConfiguration`: one virtual host, prefix matches in IR
//! order, per-route timeout (none for streaming routes), prefix rewrite and safe retries.

use xds_api::pb::{
    envoy::config::route::v3::{
        route::Action, route_action::ClusterSpecifier, route_match::PathSpecifier, FilterConfig,
        RetryPolicy, Route as XdsRoute, RouteAction, RouteConfiguration, RouteMatch, VirtualHost,
    },
    google::protobuf::UInt32Value,
};

use super::{duration, route_config_name, wasm};
use crate::{
    ir::{Listener, Retry, Route},
    resources::{any, Resource, ResourceType},
};

pub(super) fn route_configuration(l: &Listener) -> Resource {
    let name = route_config_name(&l.name);
    let config = RouteConfiguration {
        name: name.clone(),
        virtual_hosts: vec![VirtualHost {
            name: l.name.clone(),
            domains: vec!["*".into()],
            routes: l
                .routes
                .iter()
                .map(|r| route(r, l.auth.is_some()))
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let refs = l
        .routes
        .iter()
        .map(|r| (ResourceType::Cluster, r.upstream.clone()))
        .collect();
    Resource::new(&name, &config, refs)
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
            [(
                wasm::FILTER_NAME.to_string(),
                any(&FilterConfig {
                    disabled: true,
                    ..Default::default()
                }),
            )]
            .into()
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
