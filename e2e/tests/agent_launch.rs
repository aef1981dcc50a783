//! `nsight-agent run --mode launch` with the built-in nvtx backend on real programs: a C program
//! built against the NVTX v3 headers, a Python program using the PyPI `nvtx` package, and a
//! shell script whose python child the exec hook wraps (the shell itself is skipped). The
//! reports are read with sqlite3 and checked against what the programs did.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

use std::time::Instant;

use nsight_e2e::{
    agent::{
        files_with_ext, gcc_nvtx, python, query, range_summary, run_launch,
        NVTX_C_PROGRAM as C_PROGRAM,
    },
    bin, TempDir,
};

#[test]
fn a_c_program_gets_one_report_with_its_ranges_nesting_and_durations() {
    let dir = TempDir::new("agent-c");
    let exe = dir.path().join("nvtx_c");
    gcc_nvtx(C_PROGRAM, &exe);
    let store = dir.path().join("store");
    let began = Instant::now();
    let out = run_launch(&store, &[], &[exe.to_str().unwrap()]);
    let wall = began.elapsed().as_nanos() as i64;
    assert_eq!(
        out.status.code(),
        Some(3),
        "the agent exits with the program's code"
    );
    let reports = files_with_ext(&store, "sqlite");
    assert_eq!(
        reports.len(),
        1,
        "{reports:?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db = &reports[0];
    let name = db.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("nvtx-c_default_"), "{name}");
    assert!(
        db.parent().unwrap().ends_with("1"),
        "collection 1: {}",
        db.display()
    );

    let summary = range_summary(db);
    let names: Vec<&str> = summary.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "async",
            "cdomain:registered-step",
            "inner",
            "outer",
            "worker"
        ]
    );
    let get = |n: &str| summary.iter().find(|s| s.0 == n).unwrap().clone();
    let (_, inner_n, inner_total) = get("inner");
    assert_eq!(inner_n, 3);
    assert!(
        (60_000_000..600_000_000).contains(&inner_total),
        "3 x 20 ms: {inner_total}"
    );
    let (_, _, outer) = get("outer");
    assert!(
        outer >= inner_total + 40_000_000 && outer < wall,
        "outer {outer} vs wall {wall}"
    );
    assert!(get("worker").2 >= 30_000_000);
    assert!(
        get("async").2 >= get("worker").2,
        "async spans the worker thread"
    );

    // Nesting: every inner range lies inside outer, on the same thread.
    let nested = query(
        db,
        "SELECT count(*) AS n FROM NVTX_EVENTS i JOIN NVTX_EVENTS o ON o.text = 'outer'
         WHERE i.text = 'inner' AND i.start >= o.start AND i.end <= o.end
           AND i.globalTid = o.globalTid",
    );
    assert_eq!(nested[0]["n"], 3);
    // The registered-string range keeps its attributes; the category and mark are there.
    let reg = query(
        db,
        "SELECT e.category, e.color, e.int64Value, e.eventType FROM NVTX_EVENTS e
         JOIN StringIds s ON s.id = e.textId WHERE s.value = 'registered-step'",
    );
    assert_eq!(reg[0]["category"], 7);
    assert_eq!(reg[0]["color"], 0xFF00FF00u32);
    assert_eq!(reg[0]["int64Value"], 42);
    assert_eq!(reg[0]["eventType"], 59);
    let kinds = query(
        db,
        "SELECT eventType, text FROM NVTX_EVENTS WHERE eventType IN (33, 34, 60, 75) ORDER BY eventType",
    );
    let kinds: Vec<(i64, &str)> = kinds
        .iter()
        .map(|r| {
            (
                r["eventType"].as_i64().unwrap(),
                r["text"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (33, "io"),
            (34, "checkpoint"),
            (60, "async"),
            (75, "cdomain")
        ]
    );
    // The worker's range is on another thread of the same process, which is named.
    let threads = query(
        db,
        "SELECT s.value AS name FROM NVTX_EVENTS e JOIN ThreadNames t ON t.globalTid = e.globalTid
         JOIN StringIds s ON s.id = t.nameId WHERE e.text = 'worker'",
    );
    assert_eq!(threads[0]["name"], "c-worker");
    let process = query(
        db,
        "SELECT p.pid, p.name, (SELECT count(DISTINCT globalTid / 0x1000000 % 0x1000000) FROM NVTX_EVENTS) AS pids,
                (SELECT min(globalTid / 0x1000000 % 0x1000000) FROM NVTX_EVENTS) AS pid_of_events
         FROM PROCESSES p",
    );
    assert_eq!(process[0]["pids"], 1);
    assert_eq!(process[0]["pid"], process[0]["pid_of_events"]);
    assert_eq!(process[0]["name"], "nvtx_c");
    let meta = query(
        db,
        "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PARAM_EXPORT_TYPE'",
    );
    assert_eq!(meta[0]["value"], "SQLite");
}

const PY_PROGRAM: &str = r#"
import time, nvtx
with nvtx.annotate("train", color="red"):
    for step in range(4):
        with nvtx.annotate("step", domain="trainer", category="compute"):
            time.sleep(0.015)
nvtx.mark("done")
r = nvtx.start_range("tail")
time.sleep(0.01)
nvtx.end_range(r)
"#;

#[test]
fn a_python_program_using_the_nvtx_package_is_recorded() {
    let dir = TempDir::new("agent-py");
    let script = dir.path().join("train.py");
    std::fs::write(&script, PY_PROGRAM).unwrap();
    let store = dir.path().join("store");
    let out = run_launch(
        &store,
        &[],
        &[python().to_str().unwrap(), script.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reports = files_with_ext(&store, "sqlite");
    assert_eq!(reports.len(), 1, "{reports:?}");
    let summary = range_summary(&reports[0]);
    let names: Vec<&str> = summary.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, ["tail", "train", "trainer:step"]);
    let step = &summary[2];
    assert_eq!(step.1, 4);
    assert!(step.2 >= 60_000_000, "4 x 15 ms: {}", step.2);
    assert!(summary[1].2 >= step.2, "train encloses the steps");
    let category = query(
        &reports[0],
        "SELECT e.category AS c, (SELECT text FROM NVTX_EVENTS WHERE eventType = 33) AS name
         FROM NVTX_EVENTS e JOIN StringIds s ON s.id = e.textId WHERE s.value = 'step' LIMIT 1",
    );
    assert_eq!(category[0]["name"], "compute");
    assert_eq!(category[0]["c"], 1);
}

#[test]
fn the_exec_hook_skips_the_shell_and_wraps_its_python_child() {
    let dir = TempDir::new("agent-hook");
    let script = dir.path().join("train.py");
    std::fs::write(&script, PY_PROGRAM).unwrap();
    let shell = dir.path().join("run.sh");
    std::fs::write(
        &shell,
        format!(
            "#!/bin/sh\nls / > /dev/null\nsleep 0\n{} {}\necho shell-done\n",
            python().display(),
            script.display()
        ),
    )
    .unwrap();
    let store = dir.path().join("store");
    let out = std::process::Command::new("/bin/sh")
        .arg(&shell)
        .env("LD_PRELOAD", bin("libnsight_hook.so"))
        .env("NSIGHT_INJECT_INCLUDE", "python|run\\.sh")
        .env("NSIGHT_AGENT_BIN", bin("nsight-agent"))
        .env("NSIGHT_AGENT_MODE", "launch")
        .env("NSIGHT_STORAGE_DIR", &store)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("shell-done"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reports = files_with_ext(&store, "sqlite");
    assert_eq!(reports.len(), 1, "only python is profiled: {reports:?}");
    let name = reports[0].file_name().unwrap().to_str().unwrap().to_owned();
    assert!(name.starts_with("python"), "{name}");
    assert_eq!(range_summary(&reports[0]).len(), 3);
}

#[test]
fn duration_ends_the_collection_while_the_program_keeps_running() {
    let dir = TempDir::new("agent-duration");
    let script = dir.path().join("loop.py");
    std::fs::write(
        &script,
        "import time, nvtx\nt0 = time.time()\nwhile time.time() - t0 < 2.5:\n    with nvtx.annotate('tick'):\n        time.sleep(0.05)\nprint('finished')\n",
    )
    .unwrap();
    let store = dir.path().join("store");
    let began = Instant::now();
    let out = run_launch(
        &store,
        &["--duration", "1"],
        &[python().to_str().unwrap(), script.to_str().unwrap()],
    );
    assert!(
        began.elapsed().as_secs_f64() >= 2.4,
        "the program ran to its end"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("finished"));
    let reports = files_with_ext(&store, "sqlite");
    assert_eq!(reports.len(), 1, "{reports:?}");
    let span = query(
        &reports[0],
        "SELECT count(*) AS n, max(e.end) - min(e.start) AS span FROM NVTX_EVENTS e
         JOIN StringIds s ON s.id = e.textId WHERE s.value = 'tick'",
    );
    let n = span[0]["n"].as_i64().unwrap();
    let span = span[0]["span"].as_i64().unwrap();
    assert!(
        (5..=22).contains(&n),
        "about 1 s of 50 ms ticks, not 2.5 s: {n}"
    );
    assert!(span < 1_600_000_000, "window about 1 s: {span}");
}

/// Kubernetes stops a pod with SIGTERM to its processes: the agent stands in for the program
/// it wraps, so the program must get the signal (and the agent must not leave it running).
#[test]
fn sigterm_to_the_agent_reaches_the_program_and_the_launch_report_is_kept() {
    let dir = TempDir::new("agent-sigterm");
    let script = dir.path().join("forever.py");
    std::fs::write(
        &script,
        "import signal, sys, time, nvtx\n\
         def bye(signum, frame):\n    print('got', signum, flush=True)\n    sys.exit(42)\n\
         signal.signal(signal.SIGTERM, bye)\n\
         while True:\n    with nvtx.annotate('tick'):\n        time.sleep(0.01)\n",
    )
    .unwrap();
    let store = dir.path().join("store");
    let mut cmd = std::process::Command::new(bin("nsight-agent"));
    cmd.args(["run", "--mode", "launch", "--storage-dir"])
        .arg(&store)
        .arg("--")
        .arg(python())
        .arg(&script);
    let log = dir.path().join("agent.log");
    let mut agent = nsight_e2e::process::Running::spawn("nsight-agent", cmd, &log);
    assert!(
        nsight_e2e::wait_for(std::time::Duration::from_secs(20), || {
            std::fs::read_to_string(&log)
                .ok()
                .filter(|l| l.contains("target started"))
        })
        .is_some(),
        "{}",
        agent.log()
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    let status = std::process::Command::new("kill")
        .args(["-TERM", &agent.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = agent
        .wait_exit(std::time::Duration::from_secs(20))
        .unwrap_or_else(|| panic!("the agent did not exit after SIGTERM:\n{}", agent.log()));
    assert_eq!(
        exit.code(),
        Some(42),
        "the program's own exit code:\n{}",
        agent.log()
    );
    assert!(agent.log().contains("got 15"), "{}", agent.log());
    let reports = files_with_ext(&store, "sqlite");
    assert_eq!(
        reports.len(),
        1,
        "the collection up to the signal is stored: {reports:?}"
    );
}
