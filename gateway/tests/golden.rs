//! Golden tests: IR in, YAML out. Regenerate with `NSIGHT_UPDATE_GOLDEN=1 cargo test -p
//! nsight-gateway --test golden` and review the diff.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use std::{net::SocketAddr, path::PathBuf};

use nsight_gateway::{ir::GatewayIr, render::to_yaml, translate::translate};

fn addr(port: u16) -> SocketAddr {
    ([127, 0, 0, 1], port).into()
}

fn check(name: &str, ir: &GatewayIr) {
    let yaml = to_yaml(&translate(ir).unwrap()).unwrap();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/{name}.yaml"));
    if std::env::var_os("NSIGHT_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &yaml).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "{} missing: run with NSIGHT_UPDATE_GOLDEN=1",
            path.display()
        )
    });
    assert!(
        want == yaml,
        "{name}: translation differs from {}; rerun with NSIGHT_UPDATE_GOLDEN=1 and review the diff.\n--- got ---\n{yaml}",
        path.display()
    );
}

fn local() -> nsight_gateway::local::LocalGateway {
    GatewayIr::local()
        .coordinator(addr(8081))
        .coordinator_health_check("/healthz")
        .analysis(addr(8082))
        .tenant(addr(8083))
        .ui(addr(8084))
        .storage(addr(8085))
}

#[test]
fn local_platform_http_with_api_key() {
    let ir = local()
        .api_key_auth(
            "/opt/nsight/nsight_auth_filter.wasm",
            &["0123456789abcdef0123"],
        )
        .build()
        .unwrap();
    check("local_http_api_key", &ir);
}

#[test]
fn local_platform_https() {
    let ir = local()
        .tls(
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
            "KEY",
        )
        .build()
        .unwrap();
    check("local_https", &ir);
}

#[test]
fn coordinator_only_on_custom_ports_with_dns_upstream() {
    let mut ir = GatewayIr::local()
        .listen("0.0.0.0", 18888, 19000)
        .coordinator(addr(8081))
        .build()
        .unwrap();
    ir.upstreams[0].endpoints[0].host = "nsight-coordinator.nsight.svc".into();
    check("coordinator_dns", &ir);
}

#[test]
fn the_private_key_never_reaches_the_rendering() {
    let ir = local().tls("CERT", "SECRET-KEY-MATERIAL").build().unwrap();
    let yaml = to_yaml(&translate(&ir).unwrap()).unwrap();
    assert!(!yaml.contains("SECRET-KEY-MATERIAL"));
    assert!(!format!("{ir:?}").contains("SECRET-KEY-MATERIAL"));
}
