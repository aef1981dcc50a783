//! The real `nsight-analysis` binary in a test: start it over a local directory store, seed the
//! store with real nsys exports, call its REST API, wait for jobs, check what it refuses.

#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers fail loudly on unexpected errors"
)]

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use nsight_e2e::{
    free_port, http, platform::AnalysisProcess, process::Running, required_path, wait_for,
};
use serde_json::Value;

/// How long a job may take to reach a state in these tests.
pub const WAIT: Duration = Duration::from_secs(60);

/// A running `nsight-analysis`.
pub struct Service {
    pub http: SocketAddr,
    pub process: Running,
}

impl Service {
    pub fn start(root: &Path, state: Option<&Path>, extra: &[&str]) -> Self {
        Self::start_on(free_port(), root, state, extra)
    }

    pub fn start_on(port: u16, root: &Path, state: Option<&Path>, extra: &[&str]) -> Self {
        let log = root.join(format!("analysis-{port}-{}.log", std::process::id()));
        let AnalysisProcess { http, process } = AnalysisProcess::start(
            Path::new(env!("CARGO_BIN_EXE_nsight-analysis")),
            port,
            (&root.join("store"), state),
            extra,
            &log,
        );
        Self { http, process }
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        let r = http::get(self.http, path, &[]).unwrap();
        (
            r.status,
            serde_json::from_str(&r.body).unwrap_or(Value::Null),
        )
    }

    pub fn raw(&self, path: &str) -> http::Response {
        http::get(self.http, path, &[]).unwrap()
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = http::post_json(self.http, path, &body.to_string()).unwrap();
        (
            r.status,
            serde_json::from_str(&r.body).unwrap_or(Value::Null),
        )
    }

    pub fn create(&self, body: Value) -> String {
        let (status, job) = self.post("/analysis/v1/jobs", &body);
        assert_eq!(status, 202, "{job}");
        assert_eq!(job["status"], "queued");
        job["id"].as_str().unwrap().to_owned()
    }

    pub fn wait_status(&self, id: &str, status: &str) -> Value {
        wait_for(WAIT, || {
            let (_, job) = self.get(&format!("/v1/jobs/{id}"));
            (job["status"] == status).then_some(job)
        })
        .unwrap_or_else(|| {
            panic!(
                "job {id} never {status}: {}\n{}",
                self.get(&format!("/v1/jobs/{id}")).1,
                self.process.log()
            )
        })
    }

    pub fn wait_finished(&self, id: &str) -> Value {
        wait_for(WAIT, || {
            let (_, job) = self.get(&format!("/v1/jobs/{id}"));
            ["succeeded", "failed", "cancelled"]
                .contains(&job["status"].as_str().unwrap_or(""))
                .then_some(job)
        })
        .unwrap()
    }
}

/// Puts `source` into the store as `<tag>/<session>/<collection>/<file>`.
pub fn seed(root: &Path, key: &str, source: &Path) -> PathBuf {
    let dest = root.join("store").join(key);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(source, &dest).unwrap();
    dest
}

pub fn testdata(rel: &str) -> PathBuf {
    super::testdata_dir().join(rel)
}

pub fn problem(status: u16, body: &http::Response, want: &str) {
    assert_eq!(body.status, status, "{}", body.body);
    assert_eq!(
        body.header("content-type"),
        Some("application/problem+json")
    );
    let v: Value = serde_json::from_str(&body.body).unwrap();
    assert_eq!(v["status"], status);
    let detail = v["detail"].as_str().unwrap();
    assert!(detail.contains(want), "{detail}");
}

/// Validates a notebook with the `nbformat` package in the project's Python venv.
pub fn nbformat_validate(dir: &Path, notebook: &str) {
    let python = required_path("NSIGHT_CACHE_DIR", "cargo xtask setup").join("venv/bin/python");
    let path = dir.join("check.ipynb");
    std::fs::write(&path, notebook).unwrap();
    let out = Command::new(&python)
        .args([
            "-c",
            "import sys, nbformat; nb = nbformat.read(sys.argv[1], as_version=4); \
             nbformat.validate(nb); print(len(nb.cells))",
        ])
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    assert!(
        out.status.success(),
        "nbformat refused the notebook (or is missing: `{} -m pip install nbformat==5.10.4`): {}",
        python.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}
