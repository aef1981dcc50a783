//! Unit tests of the uploader against the local directory store: spooling, verification,
//! resuming after a restart, the spool lock, and the backoff bounds.

use std::time::Duration;

use super::*;
use crate::LocalStore;

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let p =
            std::env::temp_dir().join(format!("nsight-up-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn options() -> UploaderOptions {
    UploaderOptions {
        retry: RetryPolicy {
            max_attempts: 2,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
        },
        ..UploaderOptions::default()
    }
}

#[tokio::test]
async fn uploads_verify_and_leave_nothing_behind() {
    let dir = Dir::new("basic");
    let store = LocalStore::open(&dir.0.join("store")).unwrap();
    let up = Uploader::open(store.clone(), &dir.0.join("spool"), options()).unwrap();
    let report = dir.0.join("r.nsys-rep");
    std::fs::write(&report, vec![3u8; 100_000]).unwrap();
    let result = up.upload(&report, "t/s/c/p_t_i_s.nsys-rep").await.unwrap();
    assert_eq!(result.keys(), vec!["t/s/c/p_t_i_s.nsys-rep"]);
    assert!(result.is_complete());
    assert_eq!(result.uploaded[0].verification, Verification::Reread);
    assert_eq!(result.uploaded[0].attempts, 1);
    assert!(!report.exists(), "the report moved into the spool");
    assert!(up.pending().unwrap().is_empty(), "and left it once stored");
    let stored = store.head("t/s/c/p_t_i_s.nsys-rep").await.unwrap();
    assert_eq!(stored.size, 100_000);
}

#[tokio::test]
async fn a_bad_key_is_refused_before_the_report_moves() {
    let dir = Dir::new("badkey");
    let store = LocalStore::open(&dir.0.join("store")).unwrap();
    let up = Uploader::open(store, &dir.0.join("spool"), options()).unwrap();
    let report = dir.0.join("r");
    std::fs::write(&report, b"x").unwrap();
    let e = up.upload(&report, "../escape").await.unwrap_err();
    assert!(matches!(e, UploaderError::Key { .. }), "{e:?}");
    assert!(report.exists());
}

#[tokio::test]
async fn one_uploader_per_spool_and_a_restart_resumes() {
    let dir = Dir::new("resume");
    let spool = dir.0.join("spool");
    let store = LocalStore::open(&dir.0.join("store")).unwrap();
    {
        let up = Uploader::open(store.clone(), &spool, options()).unwrap();
        let second = Uploader::open(store.clone(), &spool, options());
        assert!(matches!(second, Err(UploaderError::SpoolLocked { .. })));
        for i in 0..3 {
            let f = dir.0.join(format!("r{i}"));
            std::fs::write(&f, format!("report {i}")).unwrap();
            up.spool(&f, &format!("t/s/c/r{i}")).await.unwrap();
        }
        assert_eq!(up.pending().unwrap().len(), 3);
        // The agent dies here, before draining.
    }
    // Leftovers of a spool interrupted half-way are cleaned, not uploaded.
    std::fs::write(spool.join("orphan.json"), b"{}").unwrap();
    std::fs::write(spool.join("x.json.tmp"), b"{").unwrap();
    let up = Uploader::open(store.clone(), &spool, options()).unwrap();
    assert!(!spool.join("orphan.json").exists());
    assert!(!spool.join("x.json.tmp").exists());
    let pending = up.pending().unwrap();
    assert_eq!(
        pending.iter().map(|p| p.key.as_str()).collect::<Vec<_>>(),
        vec!["t/s/c/r0", "t/s/c/r1", "t/s/c/r2"]
    );
    let result = up.drain().await.unwrap();
    assert_eq!(result.keys().len(), 3);
    assert_eq!(store.list("t/").await.unwrap().len(), 3);
    assert!(up.pending().unwrap().is_empty());
}

#[tokio::test]
async fn a_corrupted_spool_copy_is_kept_and_reported() {
    let dir = Dir::new("corrupt");
    let store = LocalStore::open(&dir.0.join("store")).unwrap();
    let up = Uploader::open(store, &dir.0.join("spool"), options()).unwrap();
    let f = dir.0.join("r");
    std::fs::write(&f, b"original").unwrap();
    up.spool(&f, "k").await.unwrap();
    let data = std::fs::read_dir(dir.0.join("spool"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "data"))
        .unwrap();
    std::fs::write(&data, b"bit rot!").unwrap();
    let result = up.drain().await.unwrap();
    assert_eq!(result.failed.len(), 1);
    assert!(matches!(
        result.failed[0].error,
        UploaderError::Corrupt { .. }
    ));
    assert_eq!(result.failed[0].attempts, 1, "not retried");
    assert_eq!(up.pending().unwrap().len(), 1, "kept for inspection");
}

#[test]
fn backoff_doubles_is_capped_and_jittered() {
    let p = RetryPolicy {
        max_attempts: 10,
        initial_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(1),
    };
    for (attempt, full) in [
        (1, 100),
        (2, 200),
        (3, 400),
        (4, 800),
        (5, 1000),
        (30, 1000),
    ] {
        let d = p.backoff(attempt).as_millis();
        assert!(d >= full / 2 && d <= full, "attempt {attempt}: {d} ms");
    }
}
