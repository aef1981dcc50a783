//! The user's CLI (`nsight-cloud`) as tests run it: a configuration file of the test's own, no
//! API key from the environment, exit code and both streams captured.

use std::{ffi::OsStr, path::Path, process::Command};

use serde_json::Value;

use crate::bin;

/// `nsight-cloud --config <config> ...`.
#[derive(Debug)]
pub struct Cli<'a> {
    pub config: &'a Path,
}

impl Cli<'_> {
    /// Runs one command: (exit code, stdout, stderr).
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        self.run_env(args, &[])
    }

    /// [`Cli::run`] with more environment (e.g. `KUBECONFIG` for `autoconfigure`).
    pub fn run_env(&self, args: &[&str], env: &[(&str, &OsStr)]) -> (i32, String, String) {
        let out = Command::new(bin("nsight-cloud"))
            .arg("--config")
            .arg(self.config)
            .args(args)
            .env_remove("NSIGHT_API_KEY")
            .envs(env.iter().copied())
            .output()
            .expect("nsight-cloud runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs a command that must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.run(args);
        assert_eq!(code, 0, "nsight-cloud {args:?} failed:\n{out}\n{err}");
        out
    }

    /// Runs a command with `--output json` that must succeed; its answer.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--output", "json"];
        all.extend_from_slice(args);
        serde_json::from_str(&self.ok(&all)).expect("nsight-cloud printed JSON")
    }
}
