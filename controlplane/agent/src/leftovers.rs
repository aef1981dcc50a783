//! Work directories that agents killed mid-collection left behind
//! (`$TMPDIR/nsight-agent-<pid>`, the default `--work-dir`): an agent that starts finds those of
//! dead agents of its own user, uploads the reports still spooled in them, and removes them.
//! Where an upload fails the directory stays, for the next agent to try again.

use std::{
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
};

use nsight_storage::{Store, Uploader};

/// The default work directory's name for the agent with process id `pid`.
pub fn work_dir_name(pid: u32) -> String {
    format!("nsight-agent-{pid}")
}

/// Whether `pid` is running (a zombie is not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Directories in `tmp` named like a work directory whose agent is dead, owned by `uid`.
pub fn stale_work_dirs(tmp: &Path, uid: u32) -> Vec<(u32, PathBuf)> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e
                .file_name()
                .to_str()?
                .strip_prefix("nsight-agent-")?
                .parse()
                .ok()?;
            let meta = std::fs::symlink_metadata(e.path()).ok()?;
            (meta.is_dir() && meta.uid() == uid && pid != me && !alive(pid))
                .then(|| (pid, e.path()))
        })
        .collect();
    found.sort();
    found
}

/// What happened to one stale directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Removed after its spooled reports (these keys) were stored.
    Removed { pid: u32, uploaded: Vec<String> },
    /// Kept: its reports could not all be stored (why).
    Kept { pid: u32, reason: String },
}

/// Uploads what each stale directory in `tmp` still has spooled, then removes it.
pub async fn clean(tmp: &Path, uid: u32, store: &Store) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for (pid, dir) in stale_work_dirs(tmp, uid) {
        let spool = dir.join("spool");
        let mut uploaded = Vec::new();
        if spool.is_dir() {
            let drained = match Uploader::open(store.clone(), &spool, Default::default()) {
                Ok(uploader) => uploader.drain().await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match drained {
                Ok(report) if report.is_complete() => uploaded = report.keys(),
                Ok(report) => {
                    let reason = format!("{} report(s) not stored yet", report.failed.len());
                    outcomes.push(Outcome::Kept { pid, reason });
                    continue;
                }
                Err(reason) => {
                    outcomes.push(Outcome::Kept { pid, reason });
                    continue;
                }
            }
        }
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => outcomes.push(Outcome::Removed { pid, uploaded }),
            Err(e) => outcomes.push(Outcome::Kept {
                pid,
                reason: format!("removing {}: {e}", dir.display()),
            }),
        }
    }
    outcomes
}

/// The uid that owns this process's files.
pub fn own_uid() -> Option<u32> {
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test")]
    use nsight_storage::{local::LocalStore, uploader::Uploader, ReportStore as _, Store};

    use super::*;

    #[tokio::test]
    async fn a_dead_agents_directory_is_uploaded_and_removed_a_live_ones_kept() {
        let root = std::env::temp_dir().join(format!("nsight-leftovers-{}", std::process::id()));
        let tmp = root.join("tmp");
        let store = Store::Local(LocalStore::open(&root.join("store")).unwrap());
        // A dead agent (no such pid) with one report spooled and not uploaded.
        let dead = tmp.join(work_dir_name(u32::MAX));
        {
            let uploader =
                Uploader::open(store.clone(), &dead.join("spool"), Default::default()).unwrap();
            let report = dead.join("report.sqlite");
            std::fs::write(&report, b"captured before the kill").unwrap();
            uploader
                .spool(&report, "default/s/1/report.sqlite")
                .await
                .unwrap();
        }
        // Pid 1 runs: its directory is not touched. Nor is a file, nor another name.
        let live = tmp.join(work_dir_name(1));
        std::fs::create_dir_all(&live).unwrap();
        std::fs::write(tmp.join(work_dir_name(u32::MAX - 1)), b"a file").unwrap();
        std::fs::create_dir_all(tmp.join("nsight-agent-x")).unwrap();

        let uid = own_uid().unwrap();
        let outcomes = clean(&tmp, uid, &store).await;
        assert_eq!(
            outcomes,
            vec![Outcome::Removed {
                pid: u32::MAX,
                uploaded: vec!["default/s/1/report.sqlite".into()]
            }]
        );
        assert!(!dead.exists());
        assert!(live.exists());
        let stored = store.head("default/s/1/report.sqlite").await.unwrap();
        assert_eq!(stored.size, 24);
        // Another user's directories are never touched.
        std::fs::create_dir_all(&dead).unwrap();
        assert!(stale_work_dirs(&tmp, uid + 1).is_empty());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
