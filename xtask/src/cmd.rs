//! Running external commands with a readable echo and errors that name the command.

use std::{
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{bail, Context, Result};

/// Runs `cmd`, echoing it first, and fails with the command line if it exits non-zero.
pub fn run(cmd: &mut Command) -> Result<()> {
    let line = describe(cmd);
    eprintln!("$ {line}");
    let status = cmd
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("could not start `{line}`"))?;
    if !status.success() {
        bail!("`{line}` failed with {status}");
    }
    Ok(())
}

/// Runs `cmd` quietly and returns its stdout, or `None` if it could not run or failed.
pub fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn describe(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}

/// Times a named stage and prints its duration, success or not.
pub fn stage<T>(name: &str, f: impl FnOnce() -> Result<T>) -> Result<(T, f64)> {
    eprintln!("\n==> {name}");
    let start = Instant::now();
    let result = f();
    let secs = start.elapsed().as_secs_f64();
    match &result {
        Ok(_) => eprintln!("==> {name}: ok in {secs:.1}s"),
        Err(e) => eprintln!("==> {name}: FAILED after {secs:.1}s: {e:#}"),
    }
    result.map(|v| (v, secs))
}
