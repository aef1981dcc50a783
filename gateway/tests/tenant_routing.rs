//! A listener with the tenant routing filter: the filter after the auth filter, the two
//! `cluster_header` routes first, the filter disabled on the listener's other routes, and an
//! IR naming an undefined tenant upstream refused.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use std::net::SocketAddr;

use nsight_gateway::{
    ir::{GatewayIr, IrError, Tenant, TenantRouting, Upstream},
    render::to_json,
    translate::translate,
};
use serde_json::Value;

fn addr(port: u16) -> SocketAddr {
    ([127, 0, 0, 1], port).into()
}

fn ir(tenant_upstream: &str) -> GatewayIr {
    let mut ir = GatewayIr::local()
        .coordinator(addr(8081))
        .ui(addr(8084))
        .api_key_auth("/x/nsight_auth_filter.wasm", &["0123456789abcdef"])
        .build()
        .unwrap();
    ir.upstreams
        .push(Upstream::new("tenant-a", "127.0.0.1", 9001));
    ir.listener_mut("gateway").unwrap().routing = Some(TenantRouting::by_path(
        "/x/nsight_routing_filter.wasm",
        &[Tenant {
            namespace: "team-a".into(),
            upstream: tenant_upstream.into(),
            identities: vec!["alice".into()],
            ..Tenant::default()
        }],
    ));
    ir
}

fn find<'a>(v: &'a Value, key: &str) -> Vec<&'a Value> {
    let mut out = Vec::new();
    match v {
        Value::Object(m) => {
            if let Some(x) = m.get(key) {
                out.push(x);
            }
            for x in m.values() {
                out.extend(find(x, key));
            }
        }
        Value::Array(a) => a.iter().for_each(|x| out.extend(find(x, key))),
        _ => {}
    }
    out
}

#[test]
fn tenant_routes_come_first_and_the_filter_runs_only_there() {
    let json = to_json(&translate(&ir("tenant-a")).unwrap()).unwrap();
    let text = json.to_string();
    let routes = find(&json, "routes")
        .into_iter()
        .find(|r| r.to_string().contains("tenant-routed"))
        .unwrap_or_else(|| panic!("no tenant routes in {text}"));
    let routes = routes.as_array().unwrap();
    assert_eq!(routes[0]["name"], "tenant-routed", "{routes:?}");
    assert_eq!(
        routes[0]["route"]["cluster_header"],
        "x-nsight-tenant-cluster"
    );
    assert_eq!(
        routes[0]["match"]["headers"][0]["name"],
        "x-nsight-tenant-cluster"
    );
    assert_eq!(routes[0]["match"]["headers"][0]["present_match"], true);
    assert_eq!(routes[1]["match"]["prefix"], "/t/");
    assert_eq!(
        routes[1]["route"]["cluster_header"],
        "x-nsight-tenant-cluster"
    );
    for r in &routes[2..] {
        assert!(
            r["typed_per_filter_config"]
                .get("nsight.filters.http.routing")
                .is_some(),
            "routing filter not disabled on {r}"
        );
    }
    for r in &routes[..2] {
        assert!(r
            .get("typed_per_filter_config")
            .is_none_or(|c| c.get("nsight.filters.http.routing").is_none()));
    }
    // Filter order in the HCM: auth, routing, router.
    let filters: Vec<&str> = find(&json, "http_filters")
        .into_iter()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|f| f["name"].as_str())
        .collect();
    assert_eq!(
        filters,
        [
            "envoy.filters.http.wasm",
            "nsight.filters.http.routing",
            "envoy.filters.http.router"
        ]
    );
}

#[test]
fn an_undefined_tenant_upstream_is_refused() {
    let err = translate(&ir("tenant-z")).unwrap_err();
    assert!(
        matches!(&err, IrError::UnknownUpstream { upstream, .. } if upstream == "tenant-z"),
        "{err}"
    );
}
