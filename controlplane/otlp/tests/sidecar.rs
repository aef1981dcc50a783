//! The OTLP proxy sidecar as a mirroring Pod runs it, end to end: the real OpenTelemetry SDK
//! (its OTLP/HTTP and OTLP/gRPC exporters) -> a real Envoy configured only over our ADS (the
//! sidecar IR the operator publishes for an OTLPProxyConfig; the node id of one Pod) -> a real
//! collector (rotel) -> the converter -> storage: the real nvtx_sum over the stored report equals
//! the spans sent. A changed config (another collector, other ports) reaches the running
//! sidecar, and a second Pod's sidecar is served the same snapshot under its own node id.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::time::Duration;

use nsight_e2e::{
    free_port,
    otlp::{RotelCollector, Sidecar},
    wait_for, wait_for_tcp, TempDir,
};
use nsight_gateway::otlp_sidecar::{self, Collector};

mod common;
use common::{client, expected, nvtx_sum, report_of, start, stop, wait_arrived};

#[test]
fn sdk_spans_through_the_xds_fed_sidecar_and_a_collector_become_the_report_sent() {
    let dir = TempDir::new("otlp-sidecar");
    let c = start(dir.path(), &[]);
    let rotel = RotelCollector::start(dir.path(), c.grpc);
    let sidecar = Sidecar::start(dir.path(), "trainer-0", &rotel.as_collector());
    sidecar.wait_in_sync();
    let serving = sidecar.xds().nodes_serving(&sidecar.key);
    assert_eq!(
        serving.keys().collect::<Vec<_>>(),
        [&sidecar.node],
        "the Pod's own node id is served its config's snapshot"
    );

    let over_http = client(&[
        "--mode",
        "http",
        "--endpoint",
        &format!("http://{}/v1/traces", sidecar.http()),
        "--session",
        "s",
        "--collection",
        "1",
        "--pid",
        "11",
    ]);
    assert_eq!(over_http["result"], "SUCCESS", "{over_http}");
    let over_grpc = client(&[
        "--mode",
        "grpc",
        "--endpoint",
        &sidecar.grpc().to_string(),
        "--session",
        "s",
        "--collection",
        "1",
        "--pid",
        "11",
        "--offset",
        "5000000",
    ]);
    assert_eq!(over_grpc["result"], "SUCCESS", "{over_grpc}");
    wait_arrived(
        &c,
        "s",
        &format!("{}\n{}", sidecar.envoy.log(), rotel.process.log()),
    );
    let flushed = stop(&c, "s", "1");
    let sent = over_http["spans"].as_i64().unwrap() + over_grpc["spans"].as_i64().unwrap();
    assert_eq!(flushed["spans"].as_i64(), Some(sent), "{flushed}");
    assert_eq!(
        nvtx_sum(&report_of(dir.path(), &flushed)),
        expected(&[&over_http, &over_grpc])
    );
}

#[test]
fn a_changed_config_reaches_the_running_sidecar() {
    let dir = TempDir::new("otlp-sidecar-change");
    let dirs = [dir.path().join("first"), dir.path().join("second")];
    for d in &dirs {
        std::fs::create_dir_all(d).unwrap();
    }
    let first = start(&dirs[0], &[]);
    let to = |c: &nsight_e2e::otlp::Converter| Collector {
        host: "127.0.0.1".into(),
        http_port: c.http.port(),
        grpc_port: c.grpc.port(),
    };
    let sidecar = Sidecar::start(dir.path(), "trainer-0", &to(&first));
    sidecar.wait_in_sync();
    let send = |port: u16, session: &str| {
        let out = client(&[
            "--mode",
            "http",
            "--endpoint",
            &format!("http://127.0.0.1:{port}/v1/traces"),
            "--session",
            session,
        ]);
        assert_eq!(out["result"], "SUCCESS", "{out}");
        out
    };
    let a = send(sidecar.ports.0, "a");
    wait_arrived(&first, "a", &sidecar.envoy.log());
    assert_eq!(stop(&first, "a", "1")["spans"], a["spans"]);

    // Another collector and other ports, published while the sidecar runs.
    let second = start(&dirs[1], &[]);
    let ports = (free_port(), free_port());
    sidecar
        .xds()
        .set_ir(&sidecar.key, &otlp_sidecar::ir(ports, &to(&second)))
        .unwrap();
    sidecar.wait_listening(ports);
    sidecar.wait_in_sync();
    let old_closed = wait_for(Duration::from_secs(20), || {
        (!wait_for_tcp(
            ([127, 0, 0, 1], sidecar.ports.0).into(),
            Duration::from_millis(100),
        ))
        .then_some(())
    });
    assert!(old_closed.is_some(), "the old listener still accepts");
    let b = send(ports.0, "b");
    wait_arrived(&second, "b", &sidecar.envoy.log());
    assert_eq!(stop(&second, "b", "1")["spans"], b["spans"]);
    let first_sessions = nsight_e2e::http::get(first.http, "/v1/collections", &[]).unwrap();
    assert!(
        !first_sessions.body.contains("\"session\":\"b\""),
        "{}",
        first_sessions.body
    );
}
