//! A storage outage loses nothing, against a real S3 server (s3s-fs): the server frozen and
//! killed in the middle of a multipart upload and restarted (the uploader retries and completes;
//! no partial object is ever listed), an agent restart that resumes what its spool holds, and a
//! wrong secret that keeps reports spooled with a message saying what to fix.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

mod common;

use std::{
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use common::{big_size, fixture, settings, sha256_file, write_random, Fixture, BUCKET, MIB};
use nsight_e2e::{
    free_port,
    s3::{S3Server, SECRET_KEY},
    TempDir,
};
use nsight_storage::{
    uploader::{UploaderOptions, Verification},
    ReportStore, RetryPolicy, S3Store, Uploader,
};

fn options(max_attempts: u32, initial_ms: u64, max_ms: u64) -> UploaderOptions {
    UploaderOptions {
        retry: RetryPolicy {
            max_attempts,
            initial_backoff: Duration::from_millis(initial_ms),
            max_backoff: Duration::from_millis(max_ms),
        },
        ..UploaderOptions::default()
    }
}

/// Whether s3s-fs is receiving a body right now: it streams each PUT and part into
/// `.tmp.<n>.internal.part` in its root and renames the file once the body is complete.
fn receiving_a_body(root: &Path) -> bool {
    std::fs::read_dir(root).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(".tmp.") && name.ends_with(".internal.part")
        })
    })
}

/// Whether s3s-fs has started a multipart upload (it keeps `.upload-<id>.json` in its root).
fn multipart_started(root: &Path) -> bool {
    std::fs::read_dir(root).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(".upload-") && name.ends_with(".json")
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_killed_mid_upload_then_restarted_loses_nothing() {
    let Fixture { dir, server, store } = fixture("s3-kill").await;
    let size = big_size();
    let src = dir.path().join("report.nsys-rep");
    let sha = write_random(&src, size, 7);
    let key = "train/s1/c1/big_train_p_1.nsys-rep";
    // No retries inside the SDK: the uploader's own retries must carry the upload through.
    let mut no_sdk_retries = settings(&server.endpoint(), BUCKET, SECRET_KEY);
    no_sdk_retries.sdk_max_attempts = 1;
    let up_store = S3Store::new(no_sdk_retries).unwrap();
    let up = Arc::new(
        Uploader::open(up_store, &dir.path().join("spool"), options(10, 1000, 2000)).unwrap(),
    );
    up.spool(&src, key).await.unwrap();
    let drain = tokio::spawn({
        let up = up.clone();
        async move { up.drain().await }
    });

    // Freeze the server while it receives a part of the multipart upload, then kill it: the
    // request in flight fails, whatever the client's connection pool would otherwise retry.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(
            Instant::now() < deadline && !drain.is_finished(),
            "the upload was never caught mid-part; log:\n{}",
            server.log()
        );
        if multipart_started(&server.root) && receiving_a_body(&server.root) {
            server.pause();
            if receiving_a_body(&server.root) {
                break;
            }
            server.resume();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(
        !server.bucket_dir(BUCKET).join(key).exists(),
        "the upload must be caught before it completes"
    );
    let server = {
        let mut s = server;
        s.kill();
        tokio::time::sleep(Duration::from_millis(300)).await;
        s.restart()
    };

    // While the uploader recovers, every listing shows the report complete or not at all.
    let mut listings = 0;
    while !drain.is_finished() {
        assert!(
            Instant::now() < deadline,
            "the upload did not finish; log:\n{}",
            server.log()
        );
        for object in store.list("train/").await.unwrap() {
            assert_eq!(object.key, key);
            assert_eq!(object.size, size, "a partial object was listed");
        }
        listings += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(listings > 0);
    let report = drain.await.unwrap().unwrap();
    assert_eq!(report.keys(), vec![key.to_owned()], "{report:?}");
    eprintln!("recovered after {listings} listings: {:?}", report.uploaded);
    assert!(
        report.uploaded[0].attempts >= 2,
        "the uploader retried: {report:?}"
    );
    assert!(
        up.pending().unwrap().is_empty(),
        "the spool is empty once stored"
    );

    let listed = store.list("").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].size, size);
    let dest = dir.path().join("back.nsys-rep");
    nsight_storage::download::download_to_file(&store, key, &dest)
        .await
        .unwrap();
    assert_eq!(sha256_file(&dest), sha);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_restart_resumes_the_spooled_reports() {
    let dir = TempDir::new("s3-resume");
    let port = free_port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let spool = dir.path().join("spool");
    let keys = [
        "train/s1/c1/a_train_p_1.nsys-rep",
        "train/s1/c1/a_train_p_1.sqlite",
        "train/s1/c1/big_train_p_1.nsys-rep",
    ];
    let sizes = [1000, 50_000, 20 * MIB];
    {
        // Storage is down while the agent stops its collection.
        let mut s = settings(&endpoint, BUCKET, SECRET_KEY);
        s.sdk_max_attempts = 1;
        let up = Uploader::open(S3Store::new(s).unwrap(), &spool, options(3, 10, 50)).unwrap();
        for (i, (key, size)) in keys.iter().zip(sizes).enumerate() {
            let f = dir.path().join(format!("r{i}"));
            write_random(&f, size, i as u64);
            up.spool(&f, key).await.unwrap();
            assert!(!f.exists());
        }
        let report = up.drain().await.unwrap();
        assert!(report.uploaded.is_empty());
        assert_eq!(report.failed.len(), 3);
        for failed in &report.failed {
            assert_eq!(failed.attempts, 3, "bounded retries");
            assert!(failed.error.is_transient());
            let msg = format!("{:?}", failed.error);
            assert!(msg.contains("Unreachable"), "{msg}");
        }
        assert_eq!(up.pending().unwrap().len(), 3, "nothing is lost");
        // The agent process ends here.
    }

    let server = S3Server::start_on(port, &dir.path().join("s3"));
    let store = S3Store::new(settings(&server.endpoint(), BUCKET, SECRET_KEY)).unwrap();
    store.create_bucket().await.unwrap();
    let up = Uploader::open(store.clone(), &spool, options(3, 10, 50)).unwrap();
    assert_eq!(
        up.pending().unwrap().len(),
        3,
        "the new uploader finds them"
    );
    let report = up.drain().await.unwrap();
    assert_eq!(report.keys(), keys.to_vec(), "{report:?}");
    let verification: Vec<Verification> = report.uploaded.iter().map(|u| u.verification).collect();
    // s3s-fs keeps the SHA-256 of single PUTs but none for multipart uploads: those are read back.
    assert_eq!(
        verification,
        vec![
            Verification::ServerChecksum,
            Verification::ServerChecksum,
            Verification::Reread
        ]
    );
    assert!(up.pending().unwrap().is_empty());
    let listed = store.list("train/").await.unwrap();
    let mut expected: Vec<(&str, u64)> = keys.iter().copied().zip(sizes).collect();
    expected.sort();
    assert_eq!(
        listed
            .iter()
            .map(|o| (o.key.as_str(), o.size))
            .collect::<Vec<_>>(),
        expected
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_keeps_reports_spooled_and_says_why() {
    let f = fixture("s3-up-secret").await;
    let bad = S3Store::new(settings(&f.server.endpoint(), BUCKET, "wrong")).unwrap();
    let up = Uploader::open(bad, &f.dir.path().join("spool"), options(5, 10, 50)).unwrap();
    let src = f.dir.path().join("r");
    std::fs::write(&src, b"report").unwrap();
    let report = up.upload(&src, "t/s/c/p_t_i_s.nsys-rep").await.unwrap();
    assert_eq!(report.failed.len(), 1);
    let failed = &report.failed[0];
    assert_eq!(failed.attempts, 1, "a configuration error is not retried");
    let mut msg = failed.error.to_string();
    let mut source = std::error::Error::source(&failed.error);
    while let Some(s) = source {
        msg.push_str(&format!(": {s}"));
        source = s.source();
    }
    assert!(
        msg.contains("fix aws_access_key_id / aws_secret_access_key"),
        "{msg}"
    );
    assert_eq!(up.pending().unwrap().len(), 1);
    assert!(f.store.list("").await.unwrap().is_empty());
}
