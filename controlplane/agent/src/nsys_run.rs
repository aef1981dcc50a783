//! Running the `nsys` backend: finding nsys, running the command lines of [`crate::nsys`],
//! supervising `nsys launch` / `nsys profile` (the target runs as nsys's child), finding the
//! report nsys wrote, exporting it to SQLite and uploading both. The thin I/O shell around the
//! pure [`crate::nsys::NsysState`].
//!
//! ```text
//!  launch mode:      nsys profile --output=<dir>/<session>-1.nsys-rep [all args] -- T argv  (exit code = nsys's)
//!  coordinator mode: nsys launch --session-new=<s> [launch args] -- T argv
//!                    START -> nsys start --session=<s> --output=... [start args]
//!                    STOP -> nsys stop; nsys export
//!  T = nsight-agent exec-marked <marker> --: nsys exits without the marker -> run argv unprofiled
//!                    target exits while collecting -> nsys writes the report -> export, upload
//!  <x>.nsys-rep + <x>.sqlite ──Publisher::publish_files──> storage
//! ```

use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
    time::Duration,
};

use nsight_storage::layout::ReportKind;

use crate::{
    channel::{Backend, CollectionRef, FinalReport},
    nsys::{Action, NsysState},
    publish::Publisher,
    started::{self, Start, StderrTail},
};

/// How long one `nsys start/stop/export` may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);
/// How long nsys may take to write the report after the target exited.
const REPORT_WAIT: Duration = Duration::from_secs(120);

/// Finds the nsys executable: `explicit` (`--nsys` / `NSIGHT_NSYS`) if given (the executable,
/// or a directory holding an installation: see [`crate::nsys_install::find_under`]), else
/// `nsys` on `path` (`$PATH`). The error says what to do.
pub fn locate(explicit: Option<&Path>, path: Option<&OsStr>) -> Result<PathBuf, String> {
    if let Some(p) = explicit {
        if p.is_dir() {
            return crate::nsys_install::find_under(p)
                .map_err(|e| format!("nsys (--nsys / NSIGHT_NSYS): {e}"));
        }
        return if is_executable(p) {
            Ok(p.to_path_buf())
        } else {
            Err(format!(
                "nsys not found at {} (--nsys / NSIGHT_NSYS): point it at the Nsight Systems \
                 CLI (e.g. /opt/nvidia/nsight-systems/<version>/bin/nsys)",
                p.display()
            ))
        };
    }
    path.into_iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("nsys"))
        .find(|p| is_executable(p))
        .ok_or_else(|| {
            "the nsys backend needs the Nsight Systems CLI, but `nsys` is not on PATH: install \
             Nsight Systems in the image (or mount the operator's nsys volume) and add its bin \
             directory to PATH, give its path with --nsys / NSIGHT_NSYS, or use --backend nvtx \
             (built in, needs no nsys)"
                .to_owned()
        })
}

/// A regular file someone may execute.
pub(crate) fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Runs one nsys command to completion; the error carries its exit status and stderr.
pub async fn run_command(argv: &[String]) -> Result<(), String> {
    let Some((program, args)) = argv.split_first() else {
        return Err("empty command".into());
    };
    tracing::info!(command = argv.join(" "), "nsys");
    let out = tokio::time::timeout(
        COMMAND_TIMEOUT,
        tokio::process::Command::new(program)
            .args(args)
            .env(crate::run::ENV_AGENT_ACTIVE, "1")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| format!("`{}` did not finish in {COMMAND_TIMEOUT:?}", argv.join(" ")))?
    .map_err(|e| format!("cannot run {program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{}` failed ({}): {}",
            argv.join(" "),
            crate::run::describe(out.status),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The report nsys wrote for the requested `output`: the path itself, else (older versions
/// and name clashes) the newest `<stem>*.nsys-rep` / `<stem>*.qdrep` beside it.
pub fn discover(output: &Path) -> Option<PathBuf> {
    if output.is_file() {
        return Some(output.to_path_buf());
    }
    let stem = output.file_stem()?.to_str()?.to_owned();
    let dir = output.parent()?;
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            // `<stem>.nsys-rep`, `<stem>.1.nsys-rep`, never `<stem>0.nsys-rep` (collection 10).
            name.strip_prefix(stem.as_str())
                .is_some_and(|rest| rest.starts_with('.'))
                && (name.ends_with(".nsys-rep") || name.ends_with(".qdrep"))
                && p.is_file()
        })
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
}

/// Waits up to `timeout` for [`discover`] to find the report.
pub async fn wait_for_report(output: &Path, timeout: Duration) -> Option<PathBuf> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(p) = discover(output) {
            return Some(p);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Exports a found report to SQLite beside it and uploads both (the `.nsys-rep` alone if the
/// export fails). Returns the stored keys.
pub async fn export_and_publish(
    state: &NsysState,
    publisher: &Publisher,
    at: &CollectionRef,
    process: (&str, u32),
    report: &Path,
) -> Result<Vec<String>, String> {
    let (export, sqlite) = state.commands().export(report);
    let mut files = vec![(report.to_path_buf(), ReportKind::NsysRep)];
    match run_command(&export).await {
        Ok(()) if sqlite.is_file() => files.push((sqlite, ReportKind::Sqlite)),
        Ok(()) => tracing::warn!(path = %sqlite.display(), "nsys export wrote no SQLite file"),
        Err(e) => tracing::warn!(error = %e, "SQLite export failed; uploading the .nsys-rep only"),
    }
    let collection = at.collection.to_string();
    publisher
        .publish_files((&at.session, &collection), process, &files)
        .await
}

/// The `nsys` backend behind the coordinator channel (coordinator mode).
#[derive(Debug)]
pub struct NsysBackend<'a> {
    pub state: NsysState,
    pub publisher: &'a Publisher,
    /// The target's name and the pid of `nsys launch` (the storage key's process and pid).
    pub process: (String, u32),
}

impl NsysBackend<'_> {
    async fn collect(
        &mut self,
        at: &CollectionRef,
        stop: Option<&[String]>,
    ) -> Result<Vec<String>, String> {
        let (rep, _) = self.state.outputs(at);
        let stopped = match stop {
            Some(cmd) => run_command(cmd).await,
            None => Ok(()),
        };
        let wait = if stop.is_some() {
            Duration::from_secs(10)
        } else {
            REPORT_WAIT
        };
        let result = match wait_for_report(&rep, wait).await {
            Some(report) => {
                let process = (self.process.0.as_str(), self.process.1);
                Box::pin(export_and_publish(
                    &self.state,
                    self.publisher,
                    at,
                    process,
                    &report,
                ))
                .await
            }
            None => Err(format!(
                "nsys wrote no report at {}{}",
                rep.display(),
                stopped.err().map(|e| format!(": {e}")).unwrap_or_default()
            )),
        };
        match &result {
            Ok(keys) => self.state.finished(at, keys.clone()),
            Err(_) => self.state.abandon(),
        }
        result
    }
}

#[tonic::async_trait]
impl Backend for NsysBackend<'_> {
    async fn start(&mut self, at: &CollectionRef) -> Result<(), String> {
        match self.state.on_start(at)? {
            Action::Run(commands) => {
                for cmd in &commands {
                    if let Err(e) = run_command(cmd).await {
                        self.state.abandon();
                        return Err(e);
                    }
                }
                Ok(())
            }
            Action::Repeat | Action::Answer(_) => Ok(()),
        }
    }

    async fn stop(&mut self, at: &CollectionRef) -> Result<Vec<String>, String> {
        match self.state.on_stop(at)? {
            Action::Answer(keys) => Ok(keys),
            Action::Repeat => Ok(Vec::new()),
            // [stop, export]: the export runs on the report found after the stop.
            Action::Run(commands) => {
                let stop = commands.first().cloned().unwrap_or_default();
                Box::pin(self.collect(at, Some(&stop))).await
            }
        }
    }

    async fn target_exited(&mut self, how: &str) -> Option<FinalReport> {
        let at = self.state.current()?.clone();
        // nsys ends the collection and writes the report when the application exits.
        let result = Box::pin(self.collect(&at, None))
            .await
            .map_err(|e| format!("the target exited ({how}) during the collection: {e}"));
        Some(FinalReport { at, result })
    }
}

/// Launch mode: `nsys profile` around the target, to its exit; uploads the report. Returns
/// nsys's exit code (nsys returns the application's). When nsys exits before the program
/// started (`marker` missing), returns [`NeverStarted`] and runs nothing: the caller runs the
/// program unprofiled.
pub async fn run_profile(
    state: &NsysState,
    publisher: &Publisher,
    argv: &[String],
    duration: Option<Duration>,
    session: &str,
    marker: &Path,
) -> anyhow::Result<i32> {
    let at = CollectionRef {
        session: session.to_owned(),
        collection: 1,
    };
    let (rep, _) = state.outputs(&at);
    if let Some(dir) = rep.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let cmd = state
        .commands()
        .profile(argv, &rep, duration.map(|d| d.as_secs().max(1)));
    let mut launched = spawn(&cmd)?;
    let pid = launched.pid;
    let forwarding = crate::signals::forward_to(pid, None);
    let start = started::until_started(&mut launched.child, marker).await;
    let status = match start {
        Ok(Start::Started) => {
            crate::run::mark_target_started();
            crate::run::wait_child(&mut launched.child).await
        }
        Ok(Start::NeverRan(status)) => {
            forwarding.abort();
            return Err(NeverStarted(started::failure_reason(
                "profile",
                status,
                &launched.stderr.settled_text().await,
            ))
            .into());
        }
        Err(e) => Err(e),
    };
    forwarding.abort();
    let code = crate::run::exit_code(status?);
    let process = process_name(argv);
    match wait_for_report(&rep, Duration::from_secs(10)).await {
        Some(report) => {
            match export_and_publish(state, publisher, &at, (&process, pid), &report).await {
                Ok(keys) => tracing::info!(?keys, "launch-mode nsys reports stored"),
                Err(e) => tracing::error!(error = %e, "launch-mode nsys reports not stored"),
            }
        }
        None => tracing::error!(
            path = %rep.display(),
            "nsys profile wrote no report (see its output above)"
        ),
    }
    Ok(code)
}

/// nsys exited before the program started; the reason quotes nsys.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NeverStarted(pub String);

/// `nsys launch`/`nsys profile` running, with the program behind it.
#[derive(Debug)]
pub struct Launched {
    pub child: tokio::process::Child,
    pub pid: u32,
    /// nsys's stderr (the program's too), copied through; its tail quotes nsys's error.
    pub stderr: StderrTail,
}

/// Spawns `argv` with the agent marker (the hook never re-wraps nsys's target). Does not mark
/// the target started: [`started::until_started`] tells.
pub fn spawn(argv: &[String]) -> anyhow::Result<Launched> {
    let Some((program, args)) = argv.split_first() else {
        anyhow::bail!("empty command");
    };
    tracing::info!(command = argv.join(" "), "nsys");
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env(crate::run::ENV_AGENT_ACTIVE, "1")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {program}: {e}"))?;
    let stderr = child
        .stderr
        .take()
        .map(StderrTail::follow)
        .unwrap_or_default();
    let pid = child.id().unwrap_or_default();
    Ok(Launched { child, pid, stderr })
}

/// Waits for a child spawned by [`spawn`], forwarding SIGTERM/SIGINT/SIGHUP/SIGQUIT to it.
pub async fn wait(
    mut child: tokio::process::Child,
    pid: u32,
) -> anyhow::Result<std::process::ExitStatus> {
    let forwarding = crate::signals::forward_to(pid, None);
    let status = crate::run::wait_child(&mut child).await;
    forwarding.abort();
    Ok(status?)
}

/// The target's name for report keys: the base name of its program.
pub fn process_name(argv: &[String]) -> String {
    let program = argv.first().map(String::as_str).unwrap_or("app");
    Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| program.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_nsys_gives_an_actionable_error() {
        let dir = std::env::temp_dir().join(format!("nsys-locate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = locate(None, Some(dir.as_os_str())).unwrap_err();
        assert!(
            err.contains("not on PATH") && err.contains("--backend nvtx"),
            "{err}"
        );
        let err = locate(Some(&dir.join("nsys")), None).unwrap_err();
        assert!(err.contains("NSIGHT_NSYS"), "{err}");
        let nsys = dir.join("nsys");
        std::fs::write(&nsys, "#!/bin/sh\n").unwrap();
        assert!(
            locate(None, Some(dir.as_os_str())).is_err(),
            "not executable"
        );
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&nsys, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths(["/nonexistent", dir.to_str().unwrap()]).unwrap();
        assert_eq!(locate(None, Some(&path)).unwrap(), nsys);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn discovery_finds_the_exact_report_or_the_newest_with_its_stem() {
        let dir = std::env::temp_dir().join(format!("nsys-discover-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let want = dir.join("s-1.nsys-rep");
        assert_eq!(discover(&want), None);
        std::fs::write(dir.join("s-2.nsys-rep"), b"x").unwrap();
        std::fs::write(dir.join("s-10.nsys-rep"), b"x").unwrap();
        std::fs::write(dir.join("s-1.1.qdrep"), b"x").unwrap();
        assert_eq!(discover(&want), Some(dir.join("s-1.1.qdrep")));
        std::fs::write(&want, b"x").unwrap();
        assert_eq!(discover(&want), Some(want.clone()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
