//! NVTX mirroring: `nsight-agent run --otlp-mirror URL` sends each process's NVTX ranges as
//! OTLP spans over gRPC to the real converter (`nsight-otlp`), straight or through the OTLP
//! proxy sidecar as a Pod runs it (a real Envoy configured over our ADS); the converter
//! stores its own report beside the agent's in the same storage. The converter's report holds the ranges
//! the agent's report holds (names with domains, counts, total durations to the nanosecond),
//! the marks, the thread names. With nothing listening, the program runs and exits as ever, its
//! report is stored, and the dropped spans are counted in the agent's log.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

use std::{path::Path, time::Duration};

use nsight_e2e::{
    agent::{files_with_ext, gcc_nvtx, query, range_summary, run_launch, NVTX_C_PROGRAM},
    free_port, http,
    otlp::{converter, Sidecar},
    TempDir,
};
use nsight_gateway::otlp_sidecar::Collector;

/// Marks by text, with their counts.
fn marks(db: &Path) -> Vec<(String, i64)> {
    query(
        db,
        "SELECT coalesce(s.value, e.text) AS name, count(*) AS n
         FROM NVTX_EVENTS AS e LEFT JOIN StringIds AS s ON s.id = e.textId
         WHERE e.eventType = 34 GROUP BY 1 ORDER BY 1",
    )
    .into_iter()
    .map(|r| {
        (
            r["name"].as_str().unwrap().to_owned(),
            r["n"].as_i64().unwrap(),
        )
    })
    .collect()
}

fn thread_names(db: &Path) -> Vec<String> {
    query(
        db,
        "SELECT s.value AS name FROM ThreadNames AS t JOIN StringIds AS s ON s.id = t.nameId
         ORDER BY 1",
    )
    .into_iter()
    .map(|r| r["name"].as_str().unwrap().to_owned())
    .collect()
}

#[test]
fn mirrored_ranges_come_back_from_the_converter_as_the_agent_recorded_them() {
    round_trip(false);
}

#[test]
fn through_the_sidecar_envoy_the_ranges_come_back_the_same() {
    round_trip(true);
}

fn round_trip(through_sidecar: bool) {
    let dir = TempDir::new("agent-mirror");
    let storage = dir.path().join("storage");
    let conv = converter(dir.path(), &storage);
    let exe = dir.path().join("nvtx_c");
    gcc_nvtx(NVTX_C_PROGRAM, &exe);

    // The converter stands in for the collector (it speaks OTLP/HTTP and OTLP/gRPC).
    let (_sidecar, target) = if through_sidecar {
        let collector = Collector {
            host: "127.0.0.1".into(),
            http_port: conv.http.port(),
            grpc_port: conv.grpc.port(),
        };
        let sidecar = Sidecar::start(dir.path(), "nvtx-c", &collector);
        let grpc = sidecar.grpc();
        (Some(sidecar), grpc)
    } else {
        (None, conv.grpc)
    };
    let endpoint = format!("http://{target}");
    let out = run_launch(
        &storage,
        &["--otlp-mirror", &endpoint],
        &[exe.to_str().unwrap()],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "the program's exit code\n{stderr}"
    );
    assert!(
        stderr.contains("NVTX mirroring") && stderr.contains("sent=7"),
        "the agent reports the seven ranges it mirrored:\n{stderr}"
    );

    // The agent's report: <tag>/<session>/<collection>/<file>.
    let reports = files_with_ext(&storage, "sqlite");
    assert_eq!(reports.len(), 1, "{reports:?}\n{stderr}");
    let agents = reports[0].clone();
    let collection_dir = agents.parent().unwrap();
    let collection = collection_dir.file_name().unwrap().to_str().unwrap();
    let session = collection_dir
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();
    assert_eq!(collection, "1");

    // The collection stops at the converter (the coordinator's stop does this in a cluster).
    let answer = http::request(
        conv.http,
        "POST",
        &format!("/v1/collections/{session}/{collection}/stop"),
        &[],
        None,
    )
    .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
    let answer: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    let stored = answer["stored"].as_array().unwrap();
    assert_eq!(
        stored.len(),
        1,
        "one process, one report: {answer}\nthe agent:\n{stderr}\nthe converter:\n{}",
        conv.process.log()
    );
    let converted = storage.join(stored[0].as_str().unwrap());
    assert_eq!(
        converted.parent().unwrap(),
        collection_dir,
        "beside the agent's report"
    );
    let name = converted.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("nvtx-c_default_") && name.contains("_otlp-pid"),
        "{name}"
    );

    let expected = range_summary(&agents);
    assert_eq!(
        expected.len(),
        5,
        "the program's five range names: {expected:?}"
    );
    assert_eq!(
        range_summary(&converted),
        expected,
        "names (with domains), counts and total durations"
    );
    assert_eq!(marks(&converted), marks(&agents));
    assert_eq!(marks(&agents), [("checkpoint".to_owned(), 1)]);
    assert!(
        thread_names(&converted).contains(&"c-worker".to_owned()),
        "{:?}",
        thread_names(&converted)
    );
}

#[test]
fn with_nothing_listening_the_program_runs_and_the_drops_are_counted() {
    let dir = TempDir::new("agent-mirror-down");
    let storage = dir.path().join("storage");
    let exe = dir.path().join("nvtx_c");
    gcc_nvtx(NVTX_C_PROGRAM, &exe);
    let closed = format!("http://127.0.0.1:{}", free_port());
    let began = std::time::Instant::now();
    let out = run_launch(
        &storage,
        &["--otlp-mirror", &closed],
        &[exe.to_str().unwrap()],
    );
    let took = began.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(files_with_ext(&storage, "sqlite").len(), 1, "{stderr}");
    assert!(
        stderr.contains("NVTX mirroring dropped spans") && stderr.contains("dropped=7"),
        "the seven ranges (outer, 3 inner, registered-step, async, worker) are counted as \
         dropped:\n{stderr}"
    );
    assert!(
        took < Duration::from_secs(30),
        "the agent does not hang on a dead endpoint: {took:?}"
    );
}

/// A collector that accepts connections and then answers nothing (the real converter frozen
/// with SIGSTOP: the kernel still completes the TCP handshakes): the program keeps its exit code
/// and its report, and the agent gives up on the spans after its flush limit instead of hanging.
#[test]
fn with_a_stalled_collector_the_program_runs_and_the_drops_are_counted() {
    let dir = TempDir::new("agent-mirror-stalled");
    let storage = dir.path().join("storage");
    let conv = converter(dir.path(), &dir.path().join("converted"));
    let exe = dir.path().join("nvtx_c");
    gcc_nvtx(NVTX_C_PROGRAM, &exe);
    let signal = |sig: &str| {
        let status = std::process::Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(conv.process.pid().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{sig}");
    };
    signal("STOP");
    let began = std::time::Instant::now();
    let out = run_launch(
        &storage,
        &["--otlp-mirror", &format!("http://{}", conv.grpc)],
        &[exe.to_str().unwrap()],
    );
    let took = began.elapsed();
    signal("CONT");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(files_with_ext(&storage, "sqlite").len(), 1, "{stderr}");
    assert!(
        stderr.contains("NVTX mirroring dropped spans") && stderr.contains("dropped=7"),
        "the seven ranges are counted as dropped:\n{stderr}"
    );
    // The program itself takes well under a second; the agent waits 5 s for its exports.
    assert!(
        took < Duration::from_secs(15),
        "the agent does not hang on a stalled endpoint: {took:?}\n{stderr}"
    );
}
