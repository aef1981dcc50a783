//! schemathesis (PyPI, in the venv of `cargo xtask setup python`) against a live service: the
//! OpenAPI document it serves, every check (no 5xx; statuses, content types and bodies as
//! documented; schema-valid requests accepted, invalid ones refused), 25 examples per
//! operation, a fixed seed so a failure reproduces.

use std::{path::Path, process::Command};

/// Runs schemathesis on the document at `openapi` against `base`, with extra request headers
/// (`name: value`); `Err` holds its report. `work_dir` receives its `.schemathesis/` cache.
pub fn check(work_dir: &Path, openapi: &str, base: &str, headers: &[&str]) -> Result<(), String> {
    let st = crate::cache_dir().join("venv/bin/st");
    if !st.exists() {
        return Err(format!(
            "{} missing: run `cargo xtask setup python`",
            st.display()
        ));
    }
    let mut c = Command::new(&st);
    c.current_dir(work_dir)
        .arg("run")
        .arg(openapi)
        .args(["--url", base]);
    for header in headers {
        c.args(["-H", header]);
    }
    let out = c
        .args([
            "--checks",
            "all",
            "--max-examples",
            "25",
            "--seed",
            "1",
            "--no-color",
        ])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", st.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
