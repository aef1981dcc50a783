//! The agent's `nsys` backend run path. No nsys exists on these machines: the tests named
//! `mock_nsys_*` run the real agent (and a real coordinator) against a MOCK nsys script
//! (`nsight_e2e::agent::mock_nsys`) that logs its command lines and writes placeholder reports,
//! so they check the command lines, process supervision, report discovery and upload, not
//! Nsight Systems. `real_nsys_launch_mode` runs the real nsys when it is on PATH and says why it
//! was skipped otherwise.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

use std::{path::Path, process::Command, time::Duration};

use nsight_e2e::{
    agent::{files_with_ext, mock_nsys, mock_nsys_calls, mock_nsys_refuse, python, query},
    bin, http,
    platform::{tls_dir, CoordinatorProcess},
    process::Running,
    wait_for, TempDir,
};
use serde_json::Value;

/// A real nsys SQLite export, which the mock's `export` copies.
fn real_export() -> &'static Path {
    Path::new("/work/shared/testdata/nsys/gtls/report1.sqlite")
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| (*s).to_owned()).collect()
}

fn agent(extra: &[&str]) -> Command {
    let mut cmd = Command::new(bin("nsight-agent"));
    cmd.args(["run", "--backend", "nsys"])
        .args(extra)
        .env("NSIGHT_AGENT_LOG", "info");
    cmd
}

#[test]
fn without_nsys_the_program_runs_unprofiled_and_the_reason_is_actionable() {
    let dir = TempDir::new("agent-nsys-missing");
    let out = agent(&["--mode", "launch", "--storage-dir"])
        .arg(dir.path())
        .args([
            "--",
            "/bin/sh",
            "-c",
            "echo \"ran unprofiled: $NSIGHT_PROFILING_DISABLED\"; exit 7",
        ])
        .env("PATH", dir.path())
        .env_remove("NSIGHT_NSYS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The workload ran (its own exit status) and was told why it was not profiled.
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    assert!(
        stdout.contains("ran unprofiled: ") && stdout.contains("`nsys` is not on PATH"),
        "{stdout}"
    );
    assert!(
        stderr.contains("profiling disabled, running /bin/sh unprofiled")
            && stderr.contains("`nsys` is not on PATH")
            && stderr.contains("--backend nvtx"),
        "{stderr}"
    );
}

#[test]
fn without_storage_the_program_runs_unprofiled() {
    let out = Command::new(bin("nsight-agent"))
        .args(["run", "--backend", "nvtx", "--mode", "launch"])
        .args(["--", "/bin/sh", "-c", "exit 3"])
        .env_remove("NSIGHT_CLOUD_STORAGE_CONFIG_FILE")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("no report storage"), "{stderr}");
}

#[test]
fn a_program_that_cannot_start_at_all_exits_127() {
    let dir = TempDir::new("agent-missing-program");
    let out = agent(&["--mode", "launch", "--storage-dir"])
        .arg(dir.path())
        .args(["--", "/nonexistent/program"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{stderr}");
    assert!(
        stderr.contains("cannot start /nonexistent/program"),
        "{stderr}"
    );
}

#[test]
fn mock_nsys_launch_mode_profiles_exports_and_uploads_both_files() {
    let dir = TempDir::new("agent-nsys-launch");
    let nsys = mock_nsys(dir.path(), real_export());
    let store = dir.path().join("store");
    let work = dir.path().join("work");
    let out = agent(&[
        "--mode",
        "launch",
        "--tool-args",
        "--trace=nvtx,osrt --sample=none",
    ])
    .arg("--nsys")
    .arg(&nsys)
    .arg("--storage-dir")
    .arg(&store)
    .arg("--work-dir")
    .arg(&work)
    .args(["--pod", "p0", "--", "sh", "-c", "exit 4"])
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(4),
        "the target's exit code: {stderr}"
    );
    let calls = mock_nsys_calls(dir.path());
    assert_eq!(calls.len(), 2, "{calls:?}");
    let rep = calls[0][1].strip_prefix("--output=").unwrap().to_owned();
    assert!(
        rep.starts_with(&format!("{}/nsys/launch-", work.display()))
            && rep.ends_with("-1.nsys-rep"),
        "{rep}"
    );
    // The program goes through the agent's trampoline, which marks that it started.
    let agent_bin = calls[0][6].clone();
    assert!(agent_bin.ends_with("/nsight-agent"), "{calls:?}");
    let marker = work.join("target-started").display().to_string();
    assert_eq!(
        calls[0],
        words(&[
            "profile",
            &format!("--output={rep}"),
            "--force-overwrite=true",
            "--trace=nvtx,osrt",
            "--sample=none",
            "--",
            &agent_bin,
            "exec-marked",
            &marker,
            "--",
            "sh",
            "-c",
            "exit 4",
        ])
    );
    let sqlite = rep.replace(".nsys-rep", ".sqlite");
    assert_eq!(
        calls[1],
        words(&[
            "export",
            "--type",
            "sqlite",
            "--force-overwrite",
            "true",
            "--output",
            &sqlite,
            &rep
        ])
    );
    let reps = files_with_ext(&store, "nsys-rep");
    let dbs = files_with_ext(&store, "sqlite");
    assert_eq!((reps.len(), dbs.len()), (1, 1), "{stderr}");
    let name = reps[0].file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("sh_default_p0_pid"), "{name}");
    assert!(std::fs::read_to_string(&reps[0])
        .unwrap()
        .starts_with("MOCK"));
    assert_eq!(
        std::fs::read(&dbs[0]).unwrap(),
        std::fs::read(real_export()).unwrap()
    );
}

fn post(c: &CoordinatorProcess, path: &str) -> Value {
    let r = http::post_json(c.http, path, r#"{"tag":"default"}"#).unwrap();
    assert_eq!(r.status, 200, "POST {path}: {r:?}");
    serde_json::from_str(&r.body).unwrap()
}

/// The one agent's outcome in `collection` once it is no longer awaited.
fn outcome(
    c: &CoordinatorProcess,
    session: &str,
    collection: u64,
    log: &dyn Fn() -> String,
) -> Value {
    wait_for(Duration::from_secs(30), || {
        let s = c.get(&format!("/v1/sessions/{session}"));
        let col = s["collections"]
            .as_array()?
            .iter()
            .find(|x| x["id"] == collection)?
            .clone();
        let o = col["agents"].as_object()?.values().next()?.clone();
        (!["pending", "started", "stopSent", "stop_sent"].contains(&o["state"].as_str()?))
            .then_some(o)
    })
    .unwrap_or_else(|| panic!("collection {collection} settles; log:\n{}", log()))
}

#[test]
fn mock_nsys_coordinator_mode_start_stop_and_target_exit_upload_reports() {
    let dir = TempDir::new("agent-nsys-coord");
    let coordinator = CoordinatorProcess::start(&dir.path().join("state"), 15_000);
    let nsys = mock_nsys(dir.path(), real_export());
    let exit_file = dir.path().join("exit");
    let script = dir.path().join("app.py");
    std::fs::write(
        &script,
        format!(
            "import os, sys, time\nt0 = time.time()\nwhile not os.path.exists({:?}) and time.time() - t0 < 90:\n    time.sleep(0.05)\nsys.exit(5)\n",
            exit_file.display().to_string()
        ),
    )
    .unwrap();
    let store = dir.path().join("store");
    // The issue's arguments: `--sample`/`--cpuctxsw` go to `start` (the mock's `launch`
    // refuses them as nsys does).
    let mut cmd = agent(&[
        "--mode",
        "coordinator",
        "--tool-args",
        "--trace=cuda,nvtx --sample=none --cpuctxsw=none",
    ]);
    cmd.arg("--nsys")
        .arg(&nsys)
        .arg("--coordinator")
        .arg(coordinator.grpc_url())
        .arg("--tls-dir")
        .arg(tls_dir(&coordinator.state_dir))
        .arg("--storage-dir")
        .arg(&store)
        .args(["--pod", "trainer-0", "--"])
        .arg(python())
        .arg(&script);
    let mut agent = Running::spawn("nsight-agent", cmd, &dir.path().join("agent.log"));
    let registered = wait_for(Duration::from_secs(30), || {
        let agents = coordinator.get("/v1/status")["agents"].as_array()?.clone();
        (agents.len() == 1 && agents[0]["connected"] == true).then(|| agents[0].clone())
    })
    .unwrap_or_else(|| panic!("agent registers; log:\n{}", agent.log()));
    assert_eq!(registered["info"]["backend"], "nsys");
    let log = || agent.log();

    // Collection 1: START/STOP.
    let session = post(&coordinator, "/v1/start")["session"]
        .as_str()
        .unwrap()
        .to_owned();
    std::thread::sleep(Duration::from_millis(300));
    post(&coordinator, "/v1/stop");
    let first = outcome(&coordinator, &session, 1, &log);
    assert_eq!(first["state"], "uploaded", "{first}; log:\n{}", log());
    let keys: Vec<&str> = first["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    let prefix = format!("default/{session}/1/python_default_trainer-0_pid");
    assert!(keys.iter().all(|k| k.starts_with(&prefix)), "{keys:?}");
    assert!(
        keys.iter().any(|k| k.ends_with(".nsys-rep"))
            && keys.iter().any(|k| k.ends_with(".sqlite"))
    );
    for k in &keys {
        assert!(store.join(k).is_file(), "{k} in storage");
    }
    let sqlite = keys.iter().find(|k| k.ends_with(".sqlite")).unwrap();
    assert!(!query(
        &store.join(sqlite),
        "SELECT name FROM sqlite_master WHERE name = 'StringIds'"
    )
    .is_empty());

    // Collection 2: the target exits while collecting; nsys writes the report, the agent uploads it.
    post(&coordinator, "/v1/start");
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&exit_file, b"").unwrap();
    let status = agent.wait_exit(Duration::from_secs(30));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(5),
        "log:\n{}",
        agent.log()
    );
    let log = || agent.log();
    let second = outcome(&coordinator, &session, 2, &log);
    assert_eq!(second["state"], "uploaded", "{second}; log:\n{}", log());
    assert_eq!(second["keys"].as_array().unwrap().len(), 2, "{second}");

    let calls = mock_nsys_calls(dir.path());
    let verbs: Vec<&str> = calls.iter().map(|c| c[0].as_str()).collect();
    assert_eq!(
        verbs,
        ["launch", "start", "stop", "export", "start", "export"],
        "{calls:?}"
    );
    let nsys_session = calls[0][1].clone();
    assert!(
        nsys_session.starts_with("--session-new=nsight-agent-"),
        "{nsys_session}"
    );
    assert_eq!(calls[0][2..4], words(&["--trace=cuda,nvtx", "--"]));
    assert_eq!(calls[0][5], "exec-marked", "{calls:?}");
    let named = nsys_session.replace("--session-new=", "--session=");
    assert_eq!(calls[1][1], named);
    assert_eq!(
        calls[1][4..],
        words(&["--sample=none", "--cpuctxsw=none"]),
        "{calls:?}"
    );
    assert_eq!(calls[2], vec!["stop".to_owned(), named]);
}

/// nsys's own refusal, as nsys 2025.3 printed it for the issue's arguments.
const CPUCTXSW_REFUSED: &str = "ERROR: The --cpuctxsw switch is not supported by the launch \
     command after NVIDIA Nsight Systems v2021.5. The cpuctxsw switch can be set on the profile \
     and start commands.";

#[test]
fn mock_nsys_launch_refused_the_program_runs_unprofiled_and_the_coordinator_is_told() {
    let dir = TempDir::new("agent-nsys-refused");
    let coordinator = CoordinatorProcess::start(&dir.path().join("state"), 15_000);
    let nsys = mock_nsys(dir.path(), real_export());
    mock_nsys_refuse(dir.path(), "launch", CPUCTXSW_REFUSED);
    let exit_file = dir.path().join("exit");
    let out_file = dir.path().join("out");
    let script = dir.path().join("app.py");
    std::fs::write(
        &script,
        format!(
            "import os, sys, time\nopen({out:?}, 'w').write(os.environ.get('NSIGHT_PROFILING_DISABLED', 'profiled'))\nt0 = time.time()\nwhile not os.path.exists({exit:?}) and time.time() - t0 < 90:\n    time.sleep(0.05)\nsys.exit(6)\n",
            out = out_file.display().to_string(),
            exit = exit_file.display().to_string()
        ),
    )
    .unwrap();
    let mut cmd = agent(&["--mode", "coordinator", "--tool-args", "-t cuda,nvtx"]);
    cmd.arg("--nsys")
        .arg(&nsys)
        .arg("--coordinator")
        .arg(coordinator.grpc_url())
        .arg("--tls-dir")
        .arg(tls_dir(&coordinator.state_dir))
        .arg("--storage-dir")
        .arg(dir.path().join("store"))
        .args(["--pod", "trainer-0", "--"])
        .arg(python())
        .arg(&script);
    let mut agent = Running::spawn("nsight-agent", cmd, &dir.path().join("agent.log"));
    let registered = wait_for(Duration::from_secs(30), || {
        let agents = coordinator.get("/v1/status")["agents"].as_array()?.clone();
        (agents.len() == 1 && agents[0]["connected"] == true).then(|| agents[0].clone())
    })
    .unwrap_or_else(|| panic!("agent registers; log:\n{}", agent.log()));
    let diagnostics = registered["info"]["diagnostics"].to_string();
    assert!(
        diagnostics.contains(
            "profiling disabled: nsys launch exited (exit code 1) before the program started"
        ) && diagnostics.contains("--cpuctxsw switch is not supported by the launch command"),
        "{registered}"
    );
    // The program runs (once), unprofiled, and knows why.
    let told = wait_for(Duration::from_secs(30), || {
        std::fs::read_to_string(&out_file)
            .ok()
            .filter(|s| !s.is_empty())
    })
    .unwrap_or_else(|| panic!("the program runs; log:\n{}", agent.log()));
    assert!(told.starts_with("nsys launch exited"), "{told}");

    // A collection gets the reason from this agent.
    let session = post(&coordinator, "/v1/start")["session"]
        .as_str()
        .unwrap()
        .to_owned();
    let log = || agent.log();
    let first = outcome(&coordinator, &session, 1, &log);
    assert_eq!(first["state"], "failed", "{first}");
    assert!(
        first["reason"]
            .as_str()
            .unwrap()
            .contains("profiling disabled: nsys launch exited"),
        "{first}"
    );
    post(&coordinator, "/v1/stop");

    std::fs::write(&exit_file, b"").unwrap();
    let status = agent.wait_exit(Duration::from_secs(30));
    let log = agent.log();
    assert_eq!(status.and_then(|s| s.code()), Some(6), "log:\n{log}");
    assert!(
        log.contains("profiling disabled, running") && log.contains("--cpuctxsw switch"),
        "{log}"
    );
    let verbs: Vec<String> = mock_nsys_calls(dir.path())
        .iter()
        .map(|c| c[0].clone())
        .collect();
    assert_eq!(verbs, ["launch"], "nothing else reached nsys");
}

#[test]
fn mock_nsys_profile_refused_the_program_runs_unprofiled_with_its_exit_code() {
    let dir = TempDir::new("agent-nsys-profile-refused");
    let nsys = mock_nsys(dir.path(), real_export());
    mock_nsys_refuse(
        dir.path(),
        "profile",
        "ERROR: cannot inject into the application",
    );
    let out = agent(&["--mode", "launch", "--tool-args", "-t cuda --sample=none"])
        .arg("--nsys")
        .arg(&nsys)
        .arg("--storage-dir")
        .arg(dir.path().join("store"))
        .args([
            "--",
            "/bin/sh",
            "-c",
            "echo \"ran: $NSIGHT_PROFILING_DISABLED\"; exit 9",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(9), "{stderr}");
    assert_eq!(
        stdout.matches("ran: ").count(),
        1,
        "the program ran once: {stdout}"
    );
    assert!(
        stdout.contains("ran: nsys profile exited (exit code 1) before the program started: ERROR: cannot inject"),
        "{stdout}"
    );
    assert!(
        stderr.contains("profiling disabled, running /bin/sh unprofiled"),
        "{stderr}"
    );
}

#[test]
fn tool_args_nsys_would_refuse_run_the_program_unprofiled_before_nsys_is_called() {
    let dir = TempDir::new("agent-nsys-bad-args");
    let nsys = mock_nsys(dir.path(), real_export());
    let out = agent(&[
        "--mode",
        "coordinator",
        "--tool-args",
        "-t cuda --duration=5",
    ])
    .arg("--nsys")
    .arg(&nsys)
    .arg("--storage-dir")
    .arg(dir.path().join("store"))
    .args(["--coordinator", "http://127.0.0.1:9"])
    .args(["--", "/bin/sh", "-c", "exit 2"])
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--duration is accepted only by nsys profile"),
        "{stderr}"
    );
    assert!(mock_nsys_calls(dir.path()).is_empty());
}

/// The real Nsight Systems, when present (never on these machines).
#[test]
fn real_nsys_launch_mode() {
    let Ok(nsys) = nsight_agent_locate() else {
        eprintln!("SKIPPED real_nsys_launch_mode: `nsys` is not on PATH (no Nsight Systems on this machine)");
        return;
    };
    let dir = TempDir::new("agent-nsys-real");
    let store = dir.path().join("store");
    let out = agent(&[
        "--mode",
        "launch",
        "--tool-args",
        "--trace=osrt --sample=none",
    ])
    .arg("--nsys")
    .arg(&nsys)
    .arg("--storage-dir")
    .arg(&store)
    .args(["--", "sleep", "1"])
    .output()
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(files_with_ext(&store, "nsys-rep").len(), 1);
    let dbs = files_with_ext(&store, "sqlite");
    assert_eq!(dbs.len(), 1);
    assert!(!query(
        &dbs[0],
        "SELECT name FROM sqlite_master WHERE name = 'StringIds'"
    )
    .is_empty());
}

fn nsight_agent_locate() -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("nsys"))
        .find(|p| p.is_file())
        .ok_or(())
}
