//! One platform per state directory, and nothing left running from an earlier one.
//!
//! - `nsight-controlplane local` holds an exclusive lock on `<state>/controlplane.lock` (which
//!   also holds its pid) while it runs: a second one on the same state directory is refused,
//!   naming the first.
//! - Its children (coordinator, analysis service, Envoy) get a parent-death signal (SIGTERM when
//!   this process dies, even by SIGKILL): see [`nsight_gateway::supervisor::die_with_parent`].
//! - At start, with the lock held, any process still running from an earlier platform on this
//!   state directory (one of the platform's programs whose command line names the directory:
//!   left by an older version, or by a parent whose spawning thread died) is named and stopped
//!   before anything binds its ports or opens its databases.

use std::{
    fs::File,
    io::{Read as _, Seek as _, Write as _},
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};

/// The lock file's name in the state directory.
pub const LOCK_FILE: &str = "controlplane.lock";

/// Held while the platform runs; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct StateLock {
    _file: File,
}

/// Takes the state directory's lock, or says which process holds it.
pub fn lock(state_dir: &Path) -> Result<StateLock> {
    std::fs::create_dir_all(state_dir)
        .with_context(|| format!("creating {}", state_dir.display()))?;
    let path = state_dir.join(LOCK_FILE);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let who = if holder.is_empty() {
                "another nsight-controlplane".to_owned()
            } else {
                format!("another nsight-controlplane (pid {holder})")
            };
            bail!(
                "{who} is running with the state directory {}: stop it first, or give this one \
                 another --state-dir",
                state_dir.display()
            );
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("locking {}", path.display()));
        }
    }
    file.set_len(0)?;
    file.rewind()?;
    writeln!(file, "{}", std::process::id())?;
    Ok(StateLock { _file: file })
}

/// A process left running by an earlier platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survivor {
    pub pid: u32,
    /// Its program's file name, e.g. `nsight-coordinator`.
    pub program: String,
}

impl std::fmt::Display for Survivor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (pid {})", self.program, self.pid)
    }
}

/// The program of a command line (`argv`) when it is one of `programs` (file names) and one of
/// its arguments is, or lies under, one of `dirs`; `None` otherwise.
pub fn survivor_program(argv: &[String], programs: &[&str], dirs: &[String]) -> Option<String> {
    let program = Path::new(argv.first()?).file_name()?.to_str()?;
    if !programs.contains(&program) {
        return None;
    }
    let names_dir = |arg: &str| {
        let value = arg.split_once('=').map_or(arg, |(_, v)| v);
        dirs.iter().any(|d| {
            value == d
                || value
                    .strip_prefix(d.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        })
    };
    argv[1..]
        .iter()
        .any(|a| names_dir(a))
        .then(|| program.to_owned())
}

/// The state directory as given and as resolved (symbolic links, `..`), without a trailing `/`.
fn spellings(state_dir: &Path) -> Vec<String> {
    let mut dirs = vec![state_dir.display().to_string()];
    if let Ok(real) = state_dir.canonicalize() {
        dirs.push(real.display().to_string());
    }
    for d in &mut dirs {
        while d.len() > 1 && d.ends_with('/') {
            d.pop();
        }
    }
    dirs.dedup();
    dirs
}

/// Whether `pid` is running (a zombie, dead but not yet reaped, is not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // `pid (comm) S ...`: the state follows the last `)`.
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Processes of `programs` (file names) whose command line names `state_dir`, this one excluded.
pub fn find(state_dir: &Path, programs: &[&str]) -> Vec<Survivor> {
    let dirs = spellings(state_dir);
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found: Vec<Survivor> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me && alive(pid))
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let argv: Vec<String> = raw
                .split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let program = survivor_program(&argv, programs, &dirs)?;
            Some(Survivor { pid, program })
        })
        .collect();
    found.sort_by_key(|s| s.pid);
    found
}

/// Stops `survivors`: SIGTERM, then SIGKILL for those still running after `grace`. Fails,
/// naming them, if any is still running after that.
pub fn stop(survivors: &[Survivor], grace: Duration) -> Result<()> {
    use rustix::process::{kill_process, Pid, Signal};
    let send = |s: &Survivor, signal: Signal| {
        if let Some(pid) = i32::try_from(s.pid).ok().and_then(Pid::from_raw) {
            // Gone meanwhile (ESRCH) is what we want; anything else shows below as still alive.
            let _ = kill_process(pid, signal);
        }
    };
    let wait_gone = |limit: Duration| {
        let deadline = Instant::now() + limit;
        while survivors.iter().any(|s| alive(s.pid)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    survivors.iter().for_each(|s| send(s, Signal::TERM));
    wait_gone(grace);
    survivors
        .iter()
        .filter(|s| alive(s.pid))
        .for_each(|s| send(s, Signal::KILL));
    wait_gone(Duration::from_secs(2));
    let left: Vec<String> = survivors
        .iter()
        .filter(|s| alive(s.pid))
        .map(Survivor::to_string)
        .collect();
    if !left.is_empty() {
        bail!(
            "processes of an earlier platform on this state directory could not be stopped: {}",
            left.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_owned).collect()
    }

    const PROGRAMS: &[&str] = &["nsight-coordinator", "nsight-analysis", "envoy"];

    #[test]
    fn a_platform_program_naming_the_state_dir_is_a_survivor() {
        let dirs = vec!["/home/u/state".to_owned()];
        let found = |line: &str| survivor_program(&argv(line), PROGRAMS, &dirs);
        assert_eq!(
            found("/opt/bin/nsight-coordinator --state-dir /home/u/state/coordinator --listen x"),
            Some("nsight-coordinator".into())
        );
        assert_eq!(
            found("/venv/bin/envoy -c /home/u/state/envoy/envoy.yaml --disable-hot-restart"),
            Some("envoy".into())
        );
        assert_eq!(
            found("nsight-analysis --state-dir=/home/u/state/analysis"),
            Some("nsight-analysis".into())
        );
    }

    #[test]
    fn other_programs_and_other_state_dirs_are_left_alone() {
        let dirs = vec!["/home/u/state".to_owned()];
        let found = |line: &str| survivor_program(&argv(line), PROGRAMS, &dirs);
        // Another platform's state directory that only starts with the same text.
        assert_eq!(
            found("nsight-coordinator --state-dir /home/u/state2/coordinator"),
            None
        );
        // Not one of the platform's programs, even if it names the directory.
        assert_eq!(found("vim /home/u/state/local.json"), None);
        // The program's own path is not an argument naming the state directory.
        assert_eq!(found("/home/u/state/bin/envoy --version"), None);
        assert_eq!(survivor_program(&[], PROGRAMS, &dirs), None);
    }

    #[test]
    fn the_lock_is_exclusive_and_names_its_holder() {
        #![allow(clippy::unwrap_used, reason = "test")]
        let dir = std::env::temp_dir().join(format!("nsight-lock-{}", std::process::id()));
        let held = lock(&dir).unwrap();
        let err = lock(&dir).unwrap_err().to_string();
        assert!(
            err.contains(&format!("(pid {})", std::process::id())) && err.contains("--state-dir"),
            "{err}"
        );
        drop(held);
        let again = lock(&dir);
        assert!(again.is_ok(), "released on drop: {again:?}");
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn this_process_is_running_and_a_made_up_pid_is_not() {
        assert!(alive(std::process::id()));
        assert!(!alive(u32::MAX));
    }
}
