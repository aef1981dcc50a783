//! The local platform after `kill -9` (issue 22, item 3): its servers die with it, a restart on
//! the same state directory comes up, a second platform on a directory in use is refused with
//! the first one's pid, and a server left running by an earlier platform is named and stopped
//! before the next one starts.
//!
//! ```text
//! platform A --SIGKILL--> coordinator, analysis, envoy gone within 5 s (parent-death signal)
//! platform B on A's state and ports: ready;  platform C beside B: "another ... (pid B)"
//! B stopped; a coordinator started by hand on the state dir and ports (a survivor)
//! platform D: the survivor named in its log and stopped; D ready
//! ```

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::{path::Path, process::Command, time::Duration};

use nsight_e2e::{
    bin,
    demo::{DemoOptions, DemoPaths, LocalPlatform},
    http,
    process::Running,
    wait_for, wait_for_tcp, TempDir,
};

/// Live (not zombie) processes whose command line names `state`, as `pid program`.
fn processes_naming(state: &Path) -> Vec<String> {
    let state = state.display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let state_letter = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .next()?
                .to_owned();
            if state_letter == "Z" {
                return None;
            }
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let argv: Vec<String> = cmdline
                .split(|&b| b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            argv.iter()
                .skip(1)
                .any(|a| a.starts_with(&state))
                .then(|| format!("{pid} {}", argv[0]))
        })
        .collect()
}

#[test]
fn a_killed_platform_leaves_nothing_running_and_one_state_dir_runs_one_platform() {
    let dir = TempDir::new("local-restart");
    let paths = DemoPaths::for_tests();
    let options = DemoOptions::for_tests(dir.path());
    let state = options.state_dir.clone();

    let mut a = LocalPlatform::start(&paths, &options).unwrap();
    let servers: Vec<String> = processes_naming(&state)
        .into_iter()
        .filter(|p| !p.starts_with(&format!("{} ", a.pid())))
        .collect();
    for program in ["nsight-coordinator", "nsight-analysis", "envoy"] {
        assert!(
            servers.iter().any(|p| p.ends_with(program)),
            "{program} runs: {servers:?}"
        );
    }
    a.kill9();
    let gone = wait_for(Duration::from_secs(5), || {
        processes_naming(&state).is_empty().then_some(())
    });
    assert!(
        gone.is_some(),
        "servers still running 5 s after the platform was killed: {:?}",
        processes_naming(&state)
    );
    drop(a);

    let b = LocalPlatform::start(&paths, &options).unwrap();
    assert_eq!(http::get(b.gateway, "/", &[]).unwrap().status, 200);
    let refused = LocalPlatform::start(&paths, &options).unwrap_err();
    assert!(
        refused.contains(&format!("another nsight-controlplane (pid {})", b.pid()))
            && refused.contains(&state.display().to_string()),
        "{refused}"
    );
    assert_eq!(
        http::get(b.gateway, "/", &[]).unwrap().status,
        200,
        "the refused start left the running platform alone"
    );
    b.stop();

    // A coordinator left by an earlier platform: on the platform's ports and its database.
    let from = options.internal_ports_from;
    let mut cmd = Command::new(bin("nsight-coordinator"));
    cmd.args(["--http", &format!("127.0.0.1:{from}")])
        .args(["--grpc", &format!("127.0.0.1:{}", from + 1)])
        .arg("--state-dir")
        .arg(state.join("coordinator"))
        .arg("--tls-dir")
        .arg(state.join("tls"));
    let mut survivor = Running::spawn("nsight-coordinator", cmd, &dir.path().join("survivor.log"));
    assert!(
        wait_for_tcp(([127, 0, 0, 1], from).into(), Duration::from_secs(20)),
        "the hand-started coordinator listens; log:\n{}",
        survivor.log()
    );
    let d = LocalPlatform::start(&paths, &options).unwrap();
    let log = std::fs::read_to_string(&d.log).unwrap();
    assert!(
        log.contains(&format!("nsight-coordinator (pid {})", survivor.pid())),
        "the survivor is named: {log}"
    );
    assert!(
        survivor.wait_exit(Duration::from_secs(1)).is_some(),
        "the survivor was stopped"
    );
    assert_eq!(http::get(d.gateway, "/", &[]).unwrap().status, 200);
    d.stop();
}
