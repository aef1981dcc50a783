//! Whether the program under nsys ever started. nsys launches the agent itself as a tiny
//! trampoline, `nsight-agent exec-marked <marker> -- argv...`, which creates the marker file
//! and then replaces itself with the program (same pid, arguments, environment, stdio). So
//! "nsys exited and no marker exists" means the program never ran (nsys refused an option,
//! could not inject, crashed first), and the agent may run it unprofiled without ever running
//! it twice. A marker that cannot be created means the program is not run by the trampoline
//! (exit 127), for the same reason.
//!
//! ```text
//!  agent ──spawn──> nsys launch|profile ... -- nsight-agent exec-marked M -- argv
//!                                            creates M, then execvp(argv)
//!  nsys exits, M missing  -> NeverRan(status): run argv unprofiled, report why
//!  M appears              -> Started: the program runs under nsys (never started again)
//! ```
//!
//! Also keeps the tail of nsys's stderr (copied through to the agent's own stderr as it comes),
//! so that the reason quotes nsys's own error. Owns no nsys command line ([`crate::nsys`]).

use std::{
    io::Write as _,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::ExitStatus,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::io::AsyncReadExt as _;

/// The agent's subcommand that nsys runs in front of the program.
pub const EXEC_MARKED: &str = "exec-marked";

/// How much of nsys's stderr a failure reason quotes.
const TAIL_BYTES: usize = 2048;

/// The words to put before the program's argv: `<agent> exec-marked <marker> --`.
pub fn wrapper(agent: &Path, marker: &Path) -> Vec<String> {
    vec![
        agent.display().to_string(),
        EXEC_MARKED.to_owned(),
        marker.display().to_string(),
        "--".to_owned(),
    ]
}

/// `exec-marked`: creates `marker`, then replaces this process with `argv` (searched on PATH).
/// Returns only on failure (the caller exits 127, as a shell would); without the marker the
/// program is not started.
pub fn exec_marked(marker: &Path, argv: &[String]) -> std::io::Error {
    let Some((program, args)) = argv.split_first() else {
        return std::io::Error::new(std::io::ErrorKind::InvalidInput, "nothing to run");
    };
    if let Err(e) = std::fs::write(marker, std::process::id().to_string()) {
        return std::io::Error::new(
            e.kind(),
            format!("cannot create the start marker {}: {e}", marker.display()),
        );
    }
    std::process::Command::new(program).args(args).exec()
}

/// The last [`TAIL_BYTES`] of a child's stderr, which is also copied to ours as it arrives.
#[derive(Debug, Clone, Default)]
pub struct StderrTail(Arc<Tail>);

#[derive(Debug, Default)]
struct Tail {
    bytes: Mutex<Vec<u8>>,
    /// Set when the pipe closed (every byte is in `bytes`).
    closed: std::sync::atomic::AtomicBool,
    closing: tokio::sync::Notify,
}

/// How long [`StderrTail::settled_text`] waits for the last bytes of a child that exited.
const SETTLE: Duration = Duration::from_secs(1);

impl StderrTail {
    /// Copies `stderr` to this process's stderr until it closes, keeping the tail.
    pub fn follow(stderr: tokio::process::ChildStderr) -> Self {
        let tail = Self::default();
        let keep = tail.clone();
        tokio::spawn(async move {
            let mut stderr = stderr;
            let mut buf = [0u8; 4096];
            loop {
                match stderr.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let chunk = buf.get(..n).unwrap_or_default();
                        let _ = std::io::stderr().write_all(chunk);
                        keep.push(chunk);
                    }
                }
            }
            keep.0
                .closed
                .store(true, std::sync::atomic::Ordering::Release);
            keep.0.closing.notify_waiters();
        });
        tail
    }

    /// [`Self::text`] once the pipe has closed, or after [`SETTLE`]: the child has exited, but
    /// its last lines (the error that says why) may still be on their way through the pipe.
    pub async fn settled_text(&self) -> String {
        let closing = self.0.closing.notified();
        if !self.0.closed.load(std::sync::atomic::Ordering::Acquire) {
            let _ = tokio::time::timeout(SETTLE, closing).await;
        }
        self.text()
    }

    fn push(&self, chunk: &[u8]) {
        let mut t = self
            .0
            .bytes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        t.extend_from_slice(chunk);
        let excess = t.len().saturating_sub(TAIL_BYTES);
        t.drain(..excess);
    }

    /// The tail as text: its non-empty lines joined by ` / `.
    pub fn text(&self) -> String {
        let t = self
            .0
            .bytes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        String::from_utf8_lossy(&t)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" / ")
    }
}

/// How the wait for the program's start ended.
#[derive(Debug)]
pub enum Start {
    /// The marker exists: the program runs (or ran) under nsys.
    Started,
    /// nsys exited and the program never started.
    NeverRan(ExitStatus),
}

/// How often [`until_started`] looks for the marker.
const POLL: Duration = Duration::from_millis(50);

/// Waits until `marker` exists (the program started) or `child` (nsys) exits without it.
pub async fn until_started(
    child: &mut tokio::process::Child,
    marker: &Path,
) -> std::io::Result<Start> {
    loop {
        if marker.exists() {
            return Ok(Start::Started);
        }
        tokio::select! {
            status = crate::run::wait_child(child) => {
                let status = status?;
                // The trampoline writes the marker before it execs: nsys cannot have exited
                // before a marker that exists became visible.
                return Ok(if marker.exists() { Start::Started } else { Start::NeverRan(status) });
            }
            () = tokio::time::sleep(POLL) => {}
        }
    }
}

/// The marker for this agent's program, removed if a former run left one.
pub fn fresh_marker(dir: &Path) -> std::io::Result<PathBuf> {
    let marker = dir.join("target-started");
    match std::fs::remove_file(&marker) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    Ok(marker)
}

/// Why nsys did not start the program, for the log, the coordinator and the program's
/// environment: `nsys launch exited (exit code 1) before the program started: <stderr>`.
pub fn failure_reason(verb: &str, status: ExitStatus, stderr: &str) -> String {
    let said = if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    };
    format!(
        "nsys {verb} exited ({}) before the program started{said}",
        crate::run::describe(status)
    )
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt as _;

    use super::*;

    #[test]
    fn the_tail_keeps_the_last_bytes_as_one_line() {
        let t = StderrTail::default();
        t.push(b"first\n\n");
        t.push(b"ERROR: The --cpuctxsw switch is not supported by the launch command\n");
        assert_eq!(
            t.text(),
            "first / ERROR: The --cpuctxsw switch is not supported by the launch command"
        );
        t.push(&[b'x'; 3000]);
        assert_eq!(t.text().len(), TAIL_BYTES);
    }

    #[test]
    fn the_reason_names_the_command_its_status_and_what_it_said() {
        let status = ExitStatus::from_raw(1 << 8);
        assert_eq!(
            failure_reason("launch", status, "ERROR: bad switch"),
            "nsys launch exited (exit code 1) before the program started: ERROR: bad switch"
        );
        assert_eq!(
            failure_reason("profile", status, ""),
            "nsys profile exited (exit code 1) before the program started"
        );
    }

    #[test]
    fn exec_marked_does_not_run_the_program_without_its_marker() {
        let err = exec_marked(Path::new("/nonexistent/dir/marker"), &["true".into()]);
        assert!(err.to_string().contains("start marker"), "{err}");
        assert_eq!(
            exec_marked(Path::new("/tmp/x"), &[]).kind(),
            std::io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn the_wrapper_runs_the_agent_s_trampoline() {
        assert_eq!(
            wrapper(Path::new("/a/nsight-agent"), Path::new("/w/m")),
            vec!["/a/nsight-agent", "exec-marked", "/w/m", "--"]
        );
    }

    #[tokio::test]
    async fn the_settled_tail_holds_what_a_child_said_before_it_exited() {
        for _ in 0..20 {
            let mut child = tokio::process::Command::new("/bin/sh")
                .args([
                    "-c",
                    "echo one >&2; echo 'ERROR: the last word' >&2; exit 3",
                ])
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let tail = StderrTail::follow(child.stderr.take().unwrap());
            let status = child.wait().await.unwrap();
            assert_eq!(status.code(), Some(3));
            assert_eq!(tail.settled_text().await, "one / ERROR: the last word");
        }
    }
}
