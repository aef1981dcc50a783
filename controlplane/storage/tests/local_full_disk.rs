//! A full disk never publishes a report: the local store's root is on a real 1 MiB tmpfs. A
//! 4 MiB put, and a small put on a nearly full disk (whose one buffered write fails only after
//! the write call returned), fail with an error naming the cause and the key; afterwards nothing
//! of them is listed, readable or left in staging, and a report that fits is still stored whole.
//!
//! Needs `mount` (root, or a user namespace that allows tmpfs); skipped with a message otherwise.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::{path::PathBuf, process::Command};

use nsight_e2e::TempDir;
use nsight_storage::{LocalStore, ReportStore};

/// A tmpfs of `size` mounted on a fresh directory; unmounted on drop, panics included.
struct Tmpfs {
    path: PathBuf,
    _dir: TempDir,
}

impl Tmpfs {
    /// `None` (with the reason on stderr) where mounting is not permitted.
    fn mount(name: &str, size: &str) -> Option<Self> {
        let dir = TempDir::new(name);
        let path = dir.path().join("fs");
        std::fs::create_dir_all(&path).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Self { path, _dir: dir }),
            Ok(o) => {
                eprintln!(
                    "SKIPPED: cannot mount a tmpfs ({}); run as root to test a full disk",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED: cannot run mount ({e}); run as root to test a full disk");
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

#[tokio::test]
async fn a_full_disk_publishes_nothing() {
    let Some(fs) = Tmpfs::mount("full-disk", "1m") else {
        return;
    };
    let root = fs.path.join("store");
    let store = LocalStore::open(&root).unwrap();

    // Outside the store: leaves about 64 KiB free, less than the one 200 KiB write of the put.
    let filler = fs.path.join("filler");
    std::fs::write(&filler, pattern((1 << 20) - (64 << 10))).unwrap();
    let small = "t/s/c/small.nsys-rep";
    let err = store.put_bytes(small, &pattern(200 << 10)).await;
    assert_refused_and_gone(&store, &root, small, err).await;
    std::fs::remove_file(&filler).unwrap();

    let big = "t/s/c/too-big.nsys-rep";
    let err = store.put_bytes(big, &pattern(4 << 20)).await;
    assert_refused_and_gone(&store, &root, big, err).await;

    // A report that fits is stored whole.
    let small = pattern(256 << 10);
    let out = store
        .put_bytes("t/s/c/fits.nsys-rep", &small)
        .await
        .unwrap();
    assert_eq!(out.size, small.len() as u64);
    let back = store
        .get("t/s/c/fits.nsys-rep", None)
        .await
        .unwrap()
        .read_to_vec()
        .await
        .unwrap();
    assert_eq!(back, small);
    assert_eq!(store.list("").await.unwrap().len(), 1);
}

async fn assert_refused_and_gone(
    store: &LocalStore,
    root: &std::path::Path,
    key: &str,
    put: Result<nsight_storage::PutOutcome, nsight_storage::StorageError>,
) {
    assert!(
        put.is_err(),
        "`{key}` was published on a full disk: {put:?}"
    );
    let chain = put.err().map(|e| e.chain()).unwrap_or_default();
    assert!(
        chain.contains(&format!("no space left on device while writing `{key}`")),
        "the error names the cause and the key: {chain}"
    );
    assert!(store.list("").await.unwrap().is_empty(), "nothing listed");
    assert!(store.head(key).await.is_err(), "nothing under `{key}`");
    assert!(store.get(key, None).await.is_err(), "nothing readable");
    let staging: Vec<_> = std::fs::read_dir(root.join(".nsight-staging"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(staging.is_empty(), "temp files left: {staging:?}");
}
