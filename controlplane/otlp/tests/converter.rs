//! The converter as a process, fed by the real OpenTelemetry Python SDK (its OTLP/HTTP and
//! OTLP/gRPC exporters), directly or through a real collector (rotel): spans become a report in
//! storage (a directory, or S3 through a real s3s-fs) that the real nvtx_sum recipe summarises as
//! the spans were sent; acknowledged spans survive a SIGKILL and a storage outage; late spans are
//! converted on their own; bad input gets a clear 4xx.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::{collections::BTreeMap, net::SocketAddr, process::Command, time::Duration};

use nsight_e2e::{
    free_port, http,
    otlp::RotelCollector,
    process::Running,
    s3::{S3Server, ACCESS_KEY, SECRET_KEY},
    wait_for, wait_for_tcp, TempDir,
};

mod common;
use common::{
    client, expected, nvtx_sum, report_of, send_http, sql_ranges, start, stop, wait_arrived,
};

#[test]
fn sdk_spans_over_http_and_grpc_become_reports_that_nvtx_sum_sums_as_sent() {
    let dir = TempDir::new("otlp-sdk");
    let c = start(dir.path(), &[]);
    let sent = send_http(&c, &["--session", "sess-1", "--collection", "1"]);
    let flushed = stop(&c, "sess-1", "1");
    assert_eq!(flushed["spans"], sent["spans"], "{flushed}");
    let key = flushed["reports"][0].as_str().unwrap();
    assert_eq!(
        key, "default/sess-1/1/trainer_default_pod-a_otlp-pid4242.sqlite",
        "the agent's key layout, with the converter's stub"
    );
    let db = report_of(dir.path(), &flushed);
    let want = expected(&[&sent]);
    assert_eq!(nvtx_sum(&db), want);
    assert_eq!(sql_ranges(&db), want);
    // The same stop again (a restarted coordinator tells its converters again): nothing is
    // converted twice, and the stored report is the only one of the collection.
    let again = stop(&c, "sess-1", "1");
    assert_eq!(again["spans"], 0, "{again}");
    assert_eq!(again["reports"], serde_json::json!([]), "{again}");
    let stored: Vec<_> = std::fs::read_dir(db.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(stored.len(), 1, "{stored:?}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let product: String = conn
        .query_row(
            "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PRODUCT_NAME'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(product.contains("OTLP"), "{product}");
    let (marks, start_end): (i64, i64) = conn
        .query_row(
            "SELECT sum(eventType = 34), sum(eventType = 60) FROM NVTX_EVENTS",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (marks, start_end),
        (2, 2),
        "span events are marks; overlaps start/end"
    );

    // The same through the SDK's gRPC exporter.
    let endpoint = c.grpc.to_string();
    let sent = client(&[
        "--mode",
        "grpc",
        "--endpoint",
        &endpoint,
        "--session",
        "sess-1",
        "--collection",
        "2",
        "--pid",
        "77",
        "--steps",
        "9",
    ]);
    assert_eq!(sent["result"], "SUCCESS", "{sent}");
    let flushed = stop(&c, "sess-1", "2");
    assert_eq!(
        nvtx_sum(&report_of(dir.path(), &flushed)),
        expected(&[&sent])
    );
}

#[test]
fn acknowledged_spans_survive_a_sigkill_and_late_spans_are_converted_on_their_own() {
    let dir = TempDir::new("otlp-kill");
    let mut c = start(dir.path(), &["--linger-ms", "200"]);
    let first = send_http(&c, &["--session", "s", "--collection", "1"]);
    c.process.kill();
    let c = start(dir.path(), &["--linger-ms", "200"]);
    let second = send_http(
        &c,
        &[
            "--session",
            "s",
            "--collection",
            "1",
            "--offset",
            "1000000000",
        ],
    );
    let flushed = stop(&c, "s", "1");
    let db = report_of(dir.path(), &flushed);
    assert_eq!(nvtx_sum(&db), expected(&[&first, &second]));

    // Spans after the stop (a collector's last batch) become a report of their own.
    let late = send_http(
        &c,
        &[
            "--session",
            "s",
            "--collection",
            "1",
            "--offset",
            "9000000000",
        ],
    );
    let late_db = dir
        .path()
        .join("storage/default/s/1/trainer_default_pod-a_otlp1-pid4242.sqlite");
    assert!(
        wait_for(Duration::from_secs(20), || late_db.exists().then_some(())).is_some(),
        "late spans were not converted: {}",
        c.process.log()
    );
    assert_eq!(nvtx_sum(&late_db), expected(&[&late]));
}

#[test]
fn bad_input_gets_a_clear_4xx_and_the_converter_keeps_serving() {
    let dir = TempDir::new("otlp-bad");
    let mut c = start(
        dir.path(),
        &["--max-body-bytes", "8000", "--max-collection-bytes", "6000"],
    );
    let post = |body: &str, headers: &[(&str, &str)]| {
        http::request(c.http, "POST", "/v1/traces", headers, Some(body)).unwrap()
    };
    let protobuf = [("Content-Type", "application/x-protobuf")];
    let r = post("not a protobuf message", &protobuf);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.contains("not an OTLP ExportTraceServiceRequest"),
        "{}",
        r.body
    );
    let r = post(
        "{\"resourceSpans\": 3}",
        &[("Content-Type", "application/json")],
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("not an OTLP/JSON"), "{}", r.body);
    let r = post("x", &[("Content-Type", "text/plain")]);
    assert_eq!(r.status, 415, "{}", r.body);
    assert!(r.body.contains("application/x-protobuf"), "{}", r.body);
    let r = post(
        "x",
        &[
            ("Content-Type", "application/x-protobuf"),
            ("Content-Encoding", "gzip"),
        ],
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("not valid gzip"), "{}", r.body);
    let r = post(
        "x",
        &[
            ("Content-Type", "application/x-protobuf"),
            ("Content-Encoding", "br"),
        ],
    );
    assert_eq!(r.status, 415, "{}", r.body);
    let r = post(&"x".repeat(9000), &protobuf);
    assert_eq!(r.status, 413, "{}", r.body);
    assert!(r.body.contains("--max-body-bytes"), "{}", r.body);

    let endpoint = format!("http://{}/v1/traces", c.http);
    let raw = |args: &[&str]| {
        let mut all = vec!["--mode", "raw", "--endpoint", &endpoint, "--epochs", "1"];
        all.extend_from_slice(args);
        client(&all)
    };
    let r = raw(&[]);
    assert_eq!(r["status"], 400, "{r}");
    assert!(
        r["body"].as_str().unwrap().contains("nsight.session"),
        "{r}"
    );

    // The collection's bound: accepted until the next request would pass it, then 429.
    let first = raw(&["--session", "s", "--collection", "1"]);
    assert_eq!(first["status"], 200, "{first}");
    let mut refused = None;
    for _ in 0..10 {
        let r = raw(&["--session", "s", "--collection", "1"]);
        if r["status"] != 200 {
            refused = Some(r);
            break;
        }
    }
    let refused = refused.expect("the bound was never reached");
    assert_eq!(refused["status"], 429, "{refused}");
    assert!(
        refused["body"]
            .as_str()
            .unwrap()
            .contains("--max-collection-bytes"),
        "{refused}"
    );
    assert_eq!(refused["retry_after"], "5");
    // A stop frees the collection's buffer.
    let flushed = stop(&c, "s", "1");
    assert!(flushed["spans"].as_u64().unwrap() > 0, "{flushed}");
    assert_eq!(raw(&["--session", "s", "--collection", "1"])["status"], 200);

    // The same refusals over gRPC, with OTLP's status codes.
    let grpc = c.grpc.to_string();
    let r = client(&["--mode", "grpc-raw", "--endpoint", &grpc, "--epochs", "1"]);
    assert_eq!(r["code"], "INVALID_ARGUMENT", "{r}");
    assert!(
        r["details"].as_str().unwrap().contains("nsight.session"),
        "{r}"
    );
    let mut exhausted = None;
    for _ in 0..10 {
        let r = client(&[
            "--mode",
            "grpc-raw",
            "--endpoint",
            &grpc,
            "--epochs",
            "1",
            "--session",
            "g",
        ]);
        if r["code"] != "OK" {
            exhausted = Some(r);
            break;
        }
    }
    let r = exhausted.expect("the bound was never reached over gRPC");
    assert_eq!(r["code"], "RESOURCE_EXHAUSTED", "{r}");
    assert!(
        r["details"]
            .as_str()
            .unwrap()
            .contains("--max-collection-bytes"),
        "{r}"
    );

    assert!(c.process.is_running(), "{}", c.process.log());
    assert!(!c.process.log().contains("panicked"), "{}", c.process.log());
    assert_eq!(http::get(c.http, "/healthz", &[]).unwrap().status, 200);
}

#[test]
fn sdk_spans_through_the_rotel_collector_become_the_same_report() {
    let dir = TempDir::new("otlp-rotel");
    let c = start(dir.path(), &[]);
    let rotel = RotelCollector::start(dir.path(), c.grpc);
    let endpoint = format!("http://{}/v1/traces", rotel.http);
    let sent = client(&[
        "--mode",
        "http",
        "--endpoint",
        &endpoint,
        "--session",
        "r",
        "--collection",
        "1",
    ]);
    assert_eq!(sent["result"], "SUCCESS", "{sent}");
    wait_arrived(&c, "r", &rotel.process.log());
    let flushed = stop(&c, "r", "1");
    assert_eq!(flushed["spans"], sent["spans"], "{flushed}");
    assert_eq!(
        nvtx_sum(&report_of(dir.path(), &flushed)),
        expected(&[&sent])
    );
}

#[test]
fn reports_go_to_s3_and_a_storage_outage_at_the_stop_loses_nothing() {
    let dir = TempDir::new("otlp-s3");
    let mut s3 = S3Server::start(&dir.path().join("s3"));
    // s3s-fs keeps a bucket as a directory of its root.
    std::fs::create_dir_all(s3.bucket_dir("reports")).unwrap();
    let config = dir.path().join("storage-config.yaml");
    std::fs::write(
        &config,
        format!(
            "storage_type: s3\nbucket_name: reports\naws_access_key_id: {ACCESS_KEY}\n\
             aws_secret_access_key: {SECRET_KEY}\nendpoint_url: {}\n",
            s3.endpoint()
        ),
    )
    .unwrap();
    let conv_dir = dir.path().join("converter");
    std::fs::create_dir_all(&conv_dir).unwrap();
    let http_addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nsight-otlp"));
    cmd.arg("--http-listen")
        .arg(http_addr.to_string())
        .args(["--grpc-listen", "off"])
        .arg("--data-dir")
        .arg(conv_dir.join("data"))
        .arg("--storage-config")
        .arg(&config);
    let converter = Running::spawn("nsight-otlp", cmd, &conv_dir.join("converter.log"));
    assert!(
        wait_for_tcp(http_addr, Duration::from_secs(30)),
        "{}",
        converter.log()
    );
    let endpoint = format!("http://{http_addr}/v1/traces");
    let sent = client(&[
        "--mode",
        "http",
        "--endpoint",
        &endpoint,
        "--session",
        "s3",
        "--collection",
        "1",
    ]);
    assert_eq!(sent["result"], "SUCCESS", "{sent}");

    // Storage goes away just before the stop and comes back while the stop retries.
    s3.kill();
    let stopper = std::thread::spawn(move || {
        http::request(http_addr, "POST", "/v1/collections/s3/1/stop", &[], None).unwrap()
    });
    std::thread::sleep(Duration::from_secs(2));
    let s3 = s3.restart();
    let answer = stopper.join().unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
    let key = "default/s3/1/trainer_default_pod-a_otlp-pid4242.sqlite";
    let stored = s3.bucket_dir("reports").join(key);
    assert!(
        wait_for(Duration::from_secs(60), || stored.exists().then_some(())).is_some(),
        "the report never reached S3: {}\n{}",
        answer.body,
        converter.log()
    );
    assert_eq!(nvtx_sum(&stored), expected(&[&sent]));
}

#[test]
fn otlp_json_spans_become_a_report_too() {
    let dir = TempDir::new("otlp-json");
    let c = start(dir.path(), &[]);
    // The opentelemetry-proto repository's examples/trace.json, with our attributes.
    let body = r#"{"resourceSpans":[{"resource":{"attributes":[
        {"key":"service.name","value":{"stringValue":"my.service"}},
        {"key":"process.pid","value":{"intValue":"7"}},
        {"key":"nsight.session","value":{"stringValue":"j"}},
        {"key":"nsight.collection","value":{"stringValue":"1"}}]},
      "scopeSpans":[{"scope":{"name":"my.library","version":"1.0.0"},
      "spans":[{"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"EEE19B7EC3C1B174",
        "parentSpanId":"EEE19B7EC3C1B173","name":"I'm a server span",
        "startTimeUnixNano":"1544712660000000000","endTimeUnixNano":"1544712661000000000",
        "kind":2,"attributes":[{"key":"nvtx.domain","value":{"stringValue":"d"}}]}]}]}]}"#;
    let r = http::request(
        c.http,
        "POST",
        "/v1/traces",
        &[("Content-Type", "application/json")],
        Some(body),
    )
    .unwrap();
    assert_eq!((r.status, r.body.as_str()), (200, "{}"));
    let flushed = stop(&c, "j", "1");
    let db = report_of(dir.path(), &flushed);
    assert_eq!(
        nvtx_sum(&db),
        BTreeMap::from([("d:I'm a server span".to_owned(), (1, 1_000_000_000))])
    );
}
