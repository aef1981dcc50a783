//! The user's CLI (`nsight-cloud`) drives a whole session against a real coordinator with
//! several connected agents (the agent crate's simulated agents, speaking the real protocol):
//! configure, session-begin, profiler-start/stop twice, session-end, status.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::time::Duration;

use nsight_e2e::{
    cli::Cli,
    platform::{CoordinatorProcess, SimAgents},
    wait_for, TempDir,
};

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn cli_drives_a_full_session_with_several_agents() {
    let dir = TempDir::new("cli-session");
    let coordinator = CoordinatorProcess::start(&dir.path().join("state"), 15_000);
    let sims = SimAgents::start(dir.path(), &coordinator, 4, "train", "worker");
    let other = SimAgents::start(dir.path(), &coordinator, 1, "default", "bystander");
    assert!(sims.wait_count("registered", 4, WAIT));
    assert!(other.wait_count("registered", 1, WAIT));

    let config = dir.path().join("nsight-cloud.conf");
    let cli = Cli { config: &config };
    cli.ok(&["configure", "--gw", &format!("http://{}", coordinator.http)]);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the config file holds credentials");

    let begun = cli.json(&["--tag", "train", "session-begin", "--title", "baseline run"]);
    let session = begun["id"].as_str().unwrap().to_string();
    assert_eq!(begun["title"], "baseline run");

    for collection in [1, 2] {
        let started = cli.json(&["--tag", "train", "profiler-start"]);
        assert_eq!(started["session"], session.as_str());
        assert_eq!(started["collection"], collection);
        assert_eq!(started["agents"], 4, "only the tag's agents are started");
        assert!(sims.wait_count("started", 4 * collection as usize, WAIT));
        let stopped = cli.json(&["--tag", "train", "profiler-stop"]);
        assert_eq!(stopped["collection"], collection);
        assert!(sims.wait_count("stopped", 4 * collection as usize, WAIT));
    }
    assert_eq!(
        other.count("started"),
        0,
        "an agent of another tag was started"
    );

    // Both collections complete with one upload per agent.
    let session_view = wait_for(WAIT, || {
        let s = coordinator.get(&format!("/v1/sessions/{session}"));
        let done = s["collections"]
            .as_array()
            .is_some_and(|c| c.len() == 2 && c.iter().all(|c| c["state"] == "completed"));
        done.then_some(s)
    })
    .expect("both collections complete");
    for c in session_view["collections"].as_array().unwrap() {
        assert_eq!(c["agents"].as_object().unwrap().len(), 4);
    }

    // Table output for people, then the end of the session.
    let table = cli.ok(&["--tag", "train", "status"]);
    assert!(table.contains(&session), "{table}");
    assert!(table.contains("worker-0"), "{table}");
    let ended = cli.json(&["--tag", "train", "session-end"]);
    assert_eq!(ended["session"], session.as_str());
    let status = cli.json(&["--tag", "train", "status"]);
    assert!(status["activeSession"].is_null(), "{status}");
    assert_eq!(status["agents"].as_array().unwrap().len(), 4);

    // Ending it again is a conflict the user is told about (exit 1, reason on stderr).
    let (code, _, err) = cli.run(&["--tag", "train", "session-end", "--session", &session]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("ended"), "{err}");
}
