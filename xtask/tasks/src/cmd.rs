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

/// A command running in the background with its output in a log file: started early so that it
/// fills the cores while the foreground waits on something serial. It leads a process group of
/// its own, and the whole group (its `go build`s and `cargo install`s too) is killed if it is
/// dropped unwaited.
pub struct Background {
    child: Option<std::process::Child>,
    line: String,
    log: std::path::PathBuf,
}

impl Background {
    pub fn spawn(cmd: &mut Command, log: &std::path::Path) -> Result<Self> {
        let line = describe(cmd);
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let out = std::fs::File::create(log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let err = out.try_clone()?;
        eprintln!("$ {line} (in the background; output in {})", log.display());
        use std::os::unix::process::CommandExt as _;
        let child = cmd
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("could not start `{line}`"))?;
        Ok(Self {
            child: Some(child),
            line,
            log: log.to_path_buf(),
        })
    }

    /// Waits for the command; on failure prints the end of its log and names the whole log.
    pub fn wait(mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let status = child
            .wait()
            .with_context(|| format!("waiting for `{}`", self.line))?;
        if status.success() {
            return Ok(());
        }
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for line in &lines[lines.len().saturating_sub(40)..] {
            eprintln!("    {line}");
        }
        bail!(
            "`{}` failed with {status} (whole output in {})",
            self.line,
            self.log.display()
        )
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            if let Some(group) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
