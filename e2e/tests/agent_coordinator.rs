//! Coordinator mode end to end: a real coordinator, `nsight-agent run` (nvtx backend, mutual TLS,
//! local report directory) around a Python program, START/STOP through the coordinator's REST
//! API. Each collection's report key appears in the collection and the file is in storage,
//! holding only that window's ranges; the agent mirrors them to the real OTLP converter and its
//! heartbeats bring the counters to the coordinator's status (one span sent per range); the
//! coordinator stops each ended collection on the converter (`--otlp-converter`), whose report
//! holds the same ranges, with nobody calling the converter. An
//! upload that outlasts the heartbeat timeout (storage frozen) neither loses the agent nor the
//! report.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

use std::{process::Command, time::Duration};

use nsight_e2e::{
    agent::{python, query},
    bin, free_port, http, otlp,
    platform::{tls_dir, CoordinatorProcess},
    process::Running,
    s3::S3Server,
    wait_for, TempDir,
};
use serde_json::Value;

fn post(c: &CoordinatorProcess, path: &str) -> Value {
    let r = http::post_json(c.http, path, r#"{"tag":"default"}"#).unwrap();
    assert_eq!(r.status, 200, "POST {path}: {r:?}");
    serde_json::from_str(&r.body).unwrap()
}

/// Waits until the collection is completed and returns the keys its one agent uploaded.
/// The coordinator's only agent, once it is the only one and connected.
fn the_connected_agent(c: &CoordinatorProcess) -> Option<Value> {
    let agents = c.get("/v1/status")["agents"].as_array()?.clone();
    (agents.len() == 1 && agents[0]["connected"] == true).then(|| agents[0].clone())
}

/// Waits (30 s) until the agent logging into `agent` is the coordinator's only, connected one.
fn wait_registered(c: &CoordinatorProcess, agent: &Running) -> Value {
    wait_for(Duration::from_secs(30), || the_connected_agent(c))
        .unwrap_or_else(|| panic!("agent registers; log:\n{}", agent.log()))
}

fn uploaded_keys(c: &CoordinatorProcess, session: &str, collection: u64) -> Vec<String> {
    let done = wait_for(Duration::from_secs(30), || {
        let s = c.get(&format!("/v1/sessions/{session}"));
        let col = s["collections"]
            .as_array()?
            .iter()
            .find(|x| x["id"] == collection)?
            .clone();
        (col["state"] == "completed").then_some(col)
    })
    .expect("the collection completes");
    let agents = done["agents"].as_object().unwrap();
    assert_eq!(agents.len(), 1, "{done}");
    let outcome = agents.values().next().unwrap();
    assert_eq!(outcome["state"], "uploaded", "{done}");
    outcome["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect()
}

fn ticks(db: &std::path::Path) -> i64 {
    query(
        db,
        "SELECT count(*) AS n FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
         WHERE coalesce(s.value, e.text) = 'tick' AND e.end IS NOT NULL",
    )[0]["n"]
        .as_i64()
        .unwrap()
}

/// `nsight-agent run` (coordinator mode, nvtx backend) of `script` as Pod `pod`, its reports in
/// `store`, mirroring to the converter `mirror_to` (OTLP/gRPC).
fn mirroring_agent(
    coordinator: &CoordinatorProcess,
    store: &std::path::Path,
    mirror_to: std::net::SocketAddr,
    pod: &str,
    script: &std::path::Path,
    log: &std::path::Path,
) -> Running {
    let mut cmd = Command::new(bin("nsight-agent"));
    cmd.args(["run", "--mode", "coordinator", "--coordinator"])
        .arg(coordinator.grpc_url())
        .arg("--tls-dir")
        .arg(tls_dir(&coordinator.state_dir))
        .arg("--storage-dir")
        .arg(store)
        .arg("--otlp-mirror")
        .arg(format!("http://{mirror_to}"))
        .args(["--pod", pod, "--"])
        .arg(python())
        .arg(script)
        .env("NSIGHT_AGENT_LOG", "info");
    Running::spawn("nsight-agent", cmd, log)
}

/// Waits (30 s) until the converter's reports in `dir` (one collection's) hold `n` tick
/// ranges in all (spans later than the stop make a second report: all count); the count found.
fn converted_ticks(dir: &std::path::Path, n: i64) -> (bool, i64) {
    let mut found = 0;
    let done = wait_for(Duration::from_secs(30), || {
        found = std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.contains("_otlp") && n.ends_with(".sqlite"))
            })
            .map(|p| ticks(&p))
            .sum();
        (found == n).then_some(())
    });
    (done.is_some(), found)
}

#[test]
fn start_stop_through_the_coordinator_uploads_one_report_per_collection() {
    let dir = TempDir::new("agent-coord");
    let converted = dir.path().join("converted");
    let converter = otlp::converter(dir.path(), &converted);
    let converter_url = format!("http://{}", converter.http);
    let coordinator = CoordinatorProcess::start_with(
        ([127, 0, 0, 1], free_port()).into(),
        ([127, 0, 0, 1], free_port()).into(),
        &dir.path().join("state"),
        15_000,
        &[
            "--otlp-converter",
            &converter_url,
            "--otlp-stop-delay-ms",
            "500",
        ],
    );
    let script = dir.path().join("loop.py");
    let stop_file = dir.path().join("stop");
    std::fs::write(
        &script,
        format!(
            "import os, time, nvtx\nt0 = time.time()\nwhile not os.path.exists({:?}) and time.time() - t0 < 90:\n    with nvtx.annotate('tick'):\n        time.sleep(0.02)\n",
            stop_file.display().to_string()
        ),
    )
    .unwrap();
    let store = dir.path().join("store");
    let mut agent = mirroring_agent(
        &coordinator,
        &store,
        converter.grpc,
        "trainer-0",
        &script,
        &dir.path().join("agent.log"),
    );

    let registered = wait_registered(&coordinator, &agent);
    assert_eq!(registered["info"]["backend"], "nvtx");
    assert_eq!(registered["info"]["identity"]["pod"], "trainer-0");
    assert_eq!(registered["info"]["identity"]["processName"], "python");
    assert!(
        registered["info"]["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d.as_str().unwrap().contains("no GPU access")),
        "preflight diagnostics reach the status: {registered}"
    );

    // Before any collection the program already runs: nothing of that time may be reported.
    std::thread::sleep(Duration::from_millis(500));
    let mut seen = Vec::new();
    let mut ranges = 0;
    for round in 1..=2u64 {
        let started = post(&coordinator, "/v1/start");
        let session = started["session"].as_str().unwrap().to_owned();
        assert_eq!(started["collection"], round);
        std::thread::sleep(Duration::from_millis(800));
        post(&coordinator, "/v1/stop");
        let keys = uploaded_keys(&coordinator, &session, round);
        assert_eq!(keys.len(), 1, "one report for the one process: {keys:?}");
        let key = &keys[0];
        assert!(
            key.starts_with(&format!(
                "default/{session}/{round}/python_default_trainer-0_pid"
            )),
            "{key}"
        );
        let file = store.join(key);
        assert!(
            file.exists(),
            "{} in storage; log:\n{}",
            file.display(),
            agent.log()
        );
        let n = ticks(&file);
        // 800 ms of ~20 ms ticks (plus Python overhead; a loaded machine runs fewer), never the
        // whole run.
        assert!((1..=45).contains(&n), "collection {round}: {n} ticks");
        ranges += n;
        seen.push(key.clone());
        // The coordinator told the converter the collection ended: its report of the mirrored
        // spans is stored beside the agent's, with the same ranges.
        let dir_of = converted.join(format!("default/{session}/{round}"));
        let (mirrored, found) = converted_ticks(&dir_of, n);
        assert!(
            mirrored,
            "collection {round}: {found} of {n} ranges in the converter's reports under {}; \
             coordinator log:\n{}",
            dir_of.display(),
            coordinator.process.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_ne!(seen[0], seen[1]);

    // The mirroring's counters arrive with the heartbeats (every 5 s): every range sent.
    let mut last = Value::Null;
    let mirrored = wait_for(Duration::from_secs(30), || {
        last = coordinator.get("/v1/status")["agents"][0]["mirroring"].clone();
        (last["sent"].as_i64() == Some(ranges)).then_some(())
    });
    assert!(
        mirrored.is_some(),
        "the status never showed {ranges} spans sent: {last}; log:\n{}",
        agent.log()
    );
    assert_eq!(last["dropped"], 0, "{last}");

    std::fs::write(&stop_file, b"").unwrap();
    let status = agent.wait_exit(Duration::from_secs(30));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "log:\n{}",
        agent.log()
    );
}

/// The target exits in the middle of a collection: the agent writes the report of what was
/// captured since START, uploads it and reports it as the collection's upload before STOP.
#[test]
fn a_target_that_exits_while_collecting_still_uploads_its_ranges() {
    let dir = TempDir::new("agent-exit");
    let coordinator = CoordinatorProcess::start(&dir.path().join("state"), 15_000);
    let script = dir.path().join("exits.py");
    let exit_file = dir.path().join("exit");
    std::fs::write(
        &script,
        format!(
            "import os, sys, time, nvtx\nt0 = time.time()\n\
             while not os.path.exists({:?}) and time.time() - t0 < 90:\n    \
             with nvtx.annotate('tick'):\n        time.sleep(0.02)\n\
             with nvtx.annotate('outer'):\n    with nvtx.annotate('last'):\n        time.sleep(0.05)\n\
             sys.exit(3)\n",
            exit_file.display().to_string()
        ),
    )
    .unwrap();
    let store = dir.path().join("store");
    let mut cmd = Command::new(bin("nsight-agent"));
    cmd.args(["run", "--mode", "coordinator", "--coordinator"])
        .arg(coordinator.grpc_url())
        .arg("--tls-dir")
        .arg(tls_dir(&coordinator.state_dir))
        .arg("--storage-dir")
        .arg(&store)
        .args(["--pod", "trainer-1", "--"])
        .arg(python())
        .arg(&script)
        .env("NSIGHT_AGENT_LOG", "info");
    let mut agent = Running::spawn("nsight-agent", cmd, &dir.path().join("agent.log"));
    wait_registered(&coordinator, &agent);

    let started = post(&coordinator, "/v1/start");
    let session = started["session"].as_str().unwrap().to_owned();
    std::thread::sleep(Duration::from_millis(700));
    std::fs::write(&exit_file, b"").unwrap();
    let status = agent.wait_exit(Duration::from_secs(30));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(3),
        "the agent exits with the target's code; log:\n{}",
        agent.log()
    );

    // Reported as this agent's upload while the collection is still open (before STOP).
    let outcome = wait_for(Duration::from_secs(10), || {
        let s = coordinator.get(&format!("/v1/sessions/{session}"));
        let col = s["collections"].as_array()?.first()?.clone();
        let outcome = col["agents"].as_object()?.values().next()?.clone();
        (outcome["state"] != "started" && outcome["state"] != "pending")
            .then_some((col["state"].clone(), outcome))
    });
    let (state, outcome) =
        outcome.unwrap_or_else(|| panic!("the agent reports; log:\n{}", agent.log()));
    assert_eq!(state, "collecting", "{outcome}");
    assert_eq!(
        outcome["state"],
        "uploaded",
        "{outcome}; log:\n{}",
        agent.log()
    );

    post(&coordinator, "/v1/stop");
    let keys = uploaded_keys(&coordinator, &session, 1);
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(
        keys[0].starts_with(&format!("default/{session}/1/python_default_trainer-1_pid")),
        "{}",
        keys[0]
    );
    let file = store.join(&keys[0]);
    let n = ticks(&file);
    // Some (fewer on a loaded machine), never the whole run.
    assert!((1..=45).contains(&n), "{n} ticks in ~700 ms");
    // The ranges run right before exit, nested, with their durations.
    let last = query(
        &file,
        "SELECT s.value AS name, e.start AS start, e.end AS end FROM NVTX_EVENTS e
         JOIN StringIds s ON s.id = e.textId WHERE s.value IN ('outer', 'last') ORDER BY e.start",
    );
    assert_eq!(last.len(), 2, "{last:?}");
    assert_eq!(last[0]["name"], "outer");
    let span = |r: &serde_json::Map<String, Value>| {
        (
            r["start"].as_i64().unwrap(),
            r["end"].as_i64().expect("closed"),
        )
    };
    let (outer, inner) = (span(&last[0]), span(&last[1]));
    assert!(outer.0 <= inner.0 && inner.1 <= outer.1, "{last:?}");
    assert!(inner.1 - inner.0 >= 50_000_000, "{last:?}");
}

/// An upload slower than the heartbeat timeout (the S3 server frozen with SIGSTOP for three
/// timeouts) keeps the agent connected and its outcome awaited; the collection completes with
/// the report once storage answers again. Before, the upload was awaited in the loop that sends
/// heartbeats: the agent was marked lost and its final message dropped (issue 22, item 1).
#[test]
fn an_upload_slower_than_the_heartbeat_timeout_keeps_the_agent_and_its_report() {
    let dir = TempDir::new("agent-slow-upload");
    let s3 = S3Server::start(&dir.path().join("s3"));
    let storage = s3.storage_config("reports", &dir.path().join("storage-config.yaml"));
    let heartbeat_timeout = Duration::from_millis(2_000);
    let coordinator = CoordinatorProcess::start(
        &dir.path().join("state"),
        u64::try_from(heartbeat_timeout.as_millis()).unwrap(),
    );
    let script = dir.path().join("loop.py");
    std::fs::write(
        &script,
        "import time, nvtx\nt0 = time.time()\nwhile time.time() - t0 < 90:\n    \
         with nvtx.annotate('tick'):\n        time.sleep(0.02)\n",
    )
    .unwrap();
    let mut cmd = Command::new(bin("nsight-agent"));
    cmd.args(["run", "--mode", "coordinator", "--coordinator"])
        .arg(coordinator.grpc_url())
        .arg("--tls-dir")
        .arg(tls_dir(&coordinator.state_dir))
        .arg("--storage-config")
        .arg(&storage)
        .args(["--pod", "trainer-2", "--"])
        .arg(python())
        .arg(&script)
        .env("NSIGHT_AGENT_LOG", "info");
    let agent = Running::spawn("nsight-agent", cmd, &dir.path().join("agent.log"));
    wait_registered(&coordinator, &agent);

    let started = post(&coordinator, "/v1/start");
    let session = started["session"].as_str().unwrap().to_owned();
    std::thread::sleep(Duration::from_millis(700));
    s3.pause();
    post(&coordinator, "/v1/stop");
    std::thread::sleep(heartbeat_timeout * 3);
    let s = coordinator.get(&format!("/v1/sessions/{session}"));
    let outcome = &s["collections"][0]["agents"];
    let outcome = outcome
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone();
    assert_eq!(
        outcome["state"],
        "stopSent",
        "still uploading, not lost: {s}; log:\n{}",
        agent.log()
    );
    assert!(
        the_connected_agent(&coordinator).is_some(),
        "the agent stays connected: {s}"
    );

    s3.resume();
    let keys = uploaded_keys(&coordinator, &session, 1);
    assert_eq!(keys.len(), 1, "{keys:?}");
    let file = s3.bucket_dir("reports").join(&keys[0]);
    let n = ticks(&file);
    // Some (fewer on a loaded machine), never the whole run.
    assert!((1..=45).contains(&n), "{n} ticks in ~700 ms");
}

/// A coordinator killed after a collection ended but before it told the converter (its stop
/// delay is long): restarted on its state, it tells the converter, whose report then holds
/// the agent's ranges.
#[test]
fn a_coordinator_killed_before_telling_the_converter_tells_it_after_its_restart() {
    let dir = TempDir::new("agent-coord-retell");
    let converted = dir.path().join("converted");
    let converter = otlp::converter(dir.path(), &converted);
    let converter_url = format!("http://{}", converter.http);
    let (http, grpc) = (
        ([127, 0, 0, 1], free_port()).into(),
        ([127, 0, 0, 1], free_port()).into(),
    );
    let state = dir.path().join("state");
    let start = |delay_ms: &str| {
        CoordinatorProcess::start_with(
            http,
            grpc,
            &state,
            15_000,
            &[
                "--otlp-converter",
                &converter_url,
                "--otlp-stop-delay-ms",
                delay_ms,
            ],
        )
    };
    let coordinator = start("600000");
    let script = dir.path().join("loop.py");
    std::fs::write(
        &script,
        "import time, nvtx\nt0 = time.time()\nwhile time.time() - t0 < 90:\n    with nvtx.annotate('tick'):\n        time.sleep(0.02)\n",
    )
    .unwrap();
    let store = dir.path().join("store");
    let agent = mirroring_agent(
        &coordinator,
        &store,
        converter.grpc,
        "trainer-2",
        &script,
        &dir.path().join("agent.log"),
    );
    wait_registered(&coordinator, &agent);
    let started = post(&coordinator, "/v1/start");
    let session = started["session"].as_str().unwrap().to_owned();
    std::thread::sleep(Duration::from_millis(700));
    post(&coordinator, "/v1/stop");
    let keys = uploaded_keys(&coordinator, &session, 1);
    let n = ticks(&store.join(&keys[0]));
    assert!(n > 0, "{keys:?}");
    // Killed inside its 10-minute stop delay: the converter was not told.
    drop(coordinator);
    let dir_of = converted.join(format!("default/{session}/1"));
    assert!(!dir_of.exists(), "nothing converted yet");
    let coordinator = start("200");
    let (converted_all, found) = converted_ticks(&dir_of, n);
    assert!(
        converted_all,
        "{found} of {n} ranges converted after the restart; coordinator log:\n{}",
        coordinator.process.log()
    );
}
