//! The node's daemons as processes: started detached with a pid file and a log each,
//! supervised while `up` waits (an exit is recorded and the daemon started again, as a service
//! manager would), stopped with SIGTERM then SIGKILL, and containerd's leftover shims killed.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{ensure, Context, Result};

use super::last_lines;

pub(super) fn pid_file(state: &Path, daemon: &str) -> PathBuf {
    state.join("run").join(format!("{daemon}.pid"))
}

/// The daemon's pid when its pid file names a live process running that program.
pub(super) fn alive_pid(state: &Path, daemon: &str) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(pid_file(state, daemon))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // A zombie (state Z) is not running.
    let state_char = stat.rsplit(')').next()?.split_whitespace().next()?;
    // An empty command line is a process in the middle of `execve` (setsid becoming the
    // daemon): alive. CI once read it in that instant and took containerd for dead.
    let named = cmdline.is_empty() || String::from_utf8_lossy(&cmdline).contains(daemon);
    (state_char != "Z" && named).then_some(pid)
}

/// The daemons `up` started, kept while it waits so that one that dies is reported with its
/// exit status and started again, as a service manager would (at most [`RESTARTS`] times).
#[derive(Default)]
pub(super) struct Supervised {
    daemons: BTreeMap<&'static str, (std::process::Child, PathBuf, Vec<String>, u32)>,
}

/// The daemons a node runs beside the API server (restarted while `up` waits).
pub(super) const NODE_DAEMONS: [&str; 4] = [
    "kubelet",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",
];

/// How often `up` restarts a node daemon that exits while the node comes up.
const RESTARTS: u32 = 3;

impl Supervised {
    pub(super) fn start(
        &mut self,
        state: &Path,
        daemon: &'static str,
        bin: &Path,
        args: &[String],
    ) -> Result<()> {
        let child = spawn(state, daemon, bin, args)?;
        let restarts = self.daemons.get(daemon).map_or(0, |d| d.3);
        self.daemons
            .insert(daemon, (child, bin.to_path_buf(), args.to_vec(), restarts));
        Ok(())
    }

    /// Restarts each of `daemons` that has exited; an error once one has exited too often.
    pub(super) fn keep_up(&mut self, state: &Path, daemons: &[&'static str]) -> Result<()> {
        for d in daemons {
            let Some((child, bin, args, restarts)) = self.daemons.get_mut(d) else {
                continue;
            };
            let Ok(Some(status)) = child.try_wait() else {
                continue;
            };
            let log = std::fs::read_to_string(state.join("logs").join(format!("{d}.log")))
                .unwrap_or_default();
            let note = format!(
                "{d} exited ({status}); last lines:\n{}\n",
                last_lines(&log, 30)
            );
            let mut all = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(state.join("logs").join("exits.log"))?;
            std::io::Write::write_all(&mut all, note.as_bytes())?;
            ensure!(
                *restarts < RESTARTS,
                "{note}(restarted {RESTARTS} times already)"
            );
            eprintln!("{d} exited ({status}): starting it again");
            *restarts += 1;
            let (bin, args) = (bin.clone(), args.clone());
            let restarts = *restarts;
            let child = spawn(state, d, &bin, &args)?;
            self.daemons.insert(d, (child, bin, args, restarts));
        }
        Ok(())
    }

    /// Lets the daemons outlive this process (init reaps them).
    pub(super) fn release(self) {
        for (_, (child, ..)) in self.daemons {
            std::mem::forget(child);
        }
    }
}

/// Starts `bin args` detached (its own session), output to `logs/<daemon>.log`.
fn spawn(state: &Path, daemon: &str, bin: &Path, args: &[String]) -> Result<std::process::Child> {
    let log = std::fs::File::create(state.join("logs").join(format!("{daemon}.log")))?;
    let child = Command::new("setsid")
        .arg(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot start {daemon} ({})", bin.display()))?;
    std::fs::write(pid_file(state, daemon), child.id().to_string())?;
    // Until `setsid` has exec'd the daemon, /proc shows setsid (whose arguments name the
    // daemon too): wait until the process runs the daemon's own binary.
    let exe = format!("/proc/{}/exe", child.id());
    let want = std::fs::canonicalize(bin).unwrap_or_else(|_| bin.to_path_buf());
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read_link(&exe).ok().as_deref() != Some(want.as_path())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(child)
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

/// SIGTERM, then SIGKILL after `grace`.
pub(super) fn stop(state: &Path, daemon: &str, grace: Duration) {
    if let Some(pid) = alive_pid(state, daemon) {
        signal(pid, "-TERM");
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && alive_pid(state, daemon).is_some() {
            std::thread::sleep(Duration::from_millis(100));
        }
        if alive_pid(state, daemon).is_some() {
            signal(pid, "-KILL");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let _ = std::fs::remove_file(pid_file(state, daemon));
}

/// containerd's shims (and the containers under them) outlive containerd: kill those whose
/// command line names our state dir.
pub(super) fn kill_shims(state: &Path) {
    let needle = state.display().to_string();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd);
        if cmd.contains("containerd-shim") && cmd.contains(&needle) {
            signal(pid, "-KILL");
        }
    }
}
