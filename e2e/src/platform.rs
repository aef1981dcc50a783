//! Our own servers as real processes for end-to-end tests: the coordinator (with a state dir
//! that survives a restart) and the simulated agents of the agent crate's test harness.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use serde_json::Value;

use crate::{bin, free_port, http, process::Running, wait_for, wait_for_tcp};

/// A coordinator process on fixed loopback ports (so a restarted one is found again).
#[derive(Debug)]
pub struct CoordinatorProcess {
    pub http: SocketAddr,
    pub grpc: SocketAddr,
    pub state_dir: PathBuf,
    pub process: Running,
}

impl CoordinatorProcess {
    /// Starts on fresh ports with `state_dir` and waits until both ports answer.
    pub fn start(state_dir: &Path, heartbeat_timeout_ms: u64) -> Self {
        let http: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let grpc: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        Self::start_on(http, grpc, state_dir, heartbeat_timeout_ms)
    }

    pub fn start_on(
        http: SocketAddr,
        grpc: SocketAddr,
        state_dir: &Path,
        heartbeat_timeout_ms: u64,
    ) -> Self {
        let mut cmd = Command::new(bin("nsight-coordinator"));
        cmd.arg("--http")
            .arg(http.to_string())
            .arg("--grpc")
            .arg(grpc.to_string())
            .arg("--state-dir")
            .arg(state_dir)
            .arg("--heartbeat-timeout-ms")
            .arg(heartbeat_timeout_ms.to_string())
            .env("RUST_LOG", "info");
        let log = state_dir.with_extension(format!("log-{}", free_port()));
        let process = Running::spawn("nsight-coordinator", cmd, &log);
        assert!(
            wait_for_tcp(http, Duration::from_secs(20))
                && wait_for_tcp(grpc, Duration::from_secs(5)),
            "coordinator did not listen; log:\n{}",
            process.log()
        );
        Self {
            http,
            grpc,
            state_dir: state_dir.to_path_buf(),
            process,
        }
    }

    pub fn grpc_url(&self) -> String {
        format!("http://{}", self.grpc)
    }

    /// GET a REST path and parse the JSON answer.
    pub fn get(&self, path: &str) -> Value {
        let r = http::get(self.http, path, &[]).expect("coordinator answers");
        assert_eq!(r.status, 200, "GET {path}: {r:?}");
        serde_json::from_str(&r.body).expect("JSON answer")
    }

    /// `kill -9`: no chance to flush or say goodbye.
    pub fn kill9(mut self) -> (SocketAddr, SocketAddr, PathBuf) {
        self.process.kill();
        (self.http, self.grpc, self.state_dir.clone())
    }
}

/// Simulated agents (`nsight-agent-sim`): real protocol, fake profiler.
#[derive(Debug)]
pub struct SimAgents {
    pub process: Running,
    events: PathBuf,
}

impl SimAgents {
    pub fn start(
        dir: &Path,
        coordinator_grpc: &str,
        count: u32,
        tag: &str,
        pod_prefix: &str,
    ) -> Self {
        let events = dir.join(format!("{pod_prefix}-events.jsonl"));
        let mut cmd = Command::new(bin("nsight-agent-sim"));
        cmd.args([
            "--coordinator",
            coordinator_grpc,
            "--tag",
            tag,
            "--pod-prefix",
            pod_prefix,
        ])
        .arg("--count")
        .arg(count.to_string());
        let process = Running::spawn("nsight-agent-sim", cmd, &events);
        Self { process, events }
    }

    /// Every event line printed so far.
    pub fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.events)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Number of events of `kind` (e.g. "registered", "started") so far.
    pub fn count(&self, kind: &str) -> usize {
        self.events().iter().filter(|e| e["event"] == kind).count()
    }

    /// Waits until at least `n` events of `kind` were seen.
    pub fn wait_count(&self, kind: &str, n: usize, timeout: Duration) -> bool {
        wait_for(timeout, || (self.count(kind) >= n).then_some(())).is_some()
    }
}
