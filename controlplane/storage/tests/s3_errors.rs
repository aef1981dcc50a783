//! What a person sees when the S3 configuration is wrong, against a real S3 server (s3s-fs):
//! a wrong secret, an unknown access key, a missing bucket and a server that is not there each
//! give a message that names the thing to fix, for every operation, and never the secret.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

mod common;

use std::time::Duration;

use common::{fixture, settings, BUCKET};
use nsight_e2e::{free_port, s3::SECRET_KEY};
use nsight_storage::{Cause, ReportStore, S3Store, StorageError};

/// Every operation of `store`, each expected to fail.
async fn all_errors(store: &S3Store) -> Vec<StorageError> {
    vec![
        store.put_bytes("t/s/c/x", b"data").await.unwrap_err(),
        store.list("t/").await.unwrap_err(),
        store.head("t/s/c/existing").await.unwrap_err(),
        store.get("t/s/c/existing", None).await.unwrap_err(),
        store.delete("t/s/c/existing").await.unwrap_err(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_is_named_as_such() {
    let f = fixture("s3-wrong-secret").await;
    f.store.put_bytes("t/s/c/existing", b"x").await.unwrap();
    let bad = S3Store::new(settings(&f.server.endpoint(), BUCKET, "not-the-secret")).unwrap();
    for e in all_errors(&bad).await {
        let msg = e.chain();
        assert!(matches!(e.cause(), Cause::Credentials { .. }), "{msg}");
        assert!(!e.is_transient(), "{msg}");
        assert!(
            msg.contains(&format!("{} rejected the credentials", f.server.endpoint())),
            "{msg}"
        );
        assert!(msg.contains("access key `nsight-test-access-key`"), "{msg}");
        assert!(
            msg.contains("fix aws_access_key_id / aws_secret_access_key"),
            "{msg}"
        );
        assert!(
            !msg.contains("not-the-secret") && !msg.contains(SECRET_KEY),
            "{msg}"
        );
    }
    // Nothing was written by the rejected put.
    assert_eq!(f.store.list("t/").await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_access_key_is_named_as_such() {
    let f = fixture("s3-unknown-key").await;
    let mut s = settings(&f.server.endpoint(), BUCKET, SECRET_KEY);
    s.access_key_id = "nobody".into();
    let bad = S3Store::new(s).unwrap();
    let e = bad.list("").await.unwrap_err();
    let msg = e.chain();
    assert!(matches!(e.cause(), Cause::Credentials { .. }), "{msg}");
    assert!(msg.contains("access key `nobody`"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bucket_is_named_with_the_fix() {
    let f = fixture("s3-no-bucket").await;
    let missing =
        S3Store::new(settings(&f.server.endpoint(), "no-such-bucket", SECRET_KEY)).unwrap();
    let expected = format!(
        "bucket `no-such-bucket` does not exist at {}: create it or fix bucket_name",
        f.server.endpoint()
    );
    for e in all_errors(&missing).await {
        let msg = e.chain();
        assert!(matches!(e.cause(), Cause::NoSuchBucket { .. }), "{msg}");
        assert!(msg.contains(&expected), "{msg}");
        assert!(!e.is_transient());
    }
    let e = missing.check_access().await.unwrap_err();
    assert!(e.chain().contains(&expected), "{}", e.chain());
    // A multipart upload to a missing bucket fails the same way.
    let big = vec![0u8; 17 * 1024 * 1024];
    let e = missing.put_bytes("t/big", &big).await.unwrap_err();
    assert!(e.chain().contains(&expected), "{}", e.chain());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_not_there_is_unreachable_and_transient() {
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let mut s = settings(&endpoint, BUCKET, SECRET_KEY);
    s.sdk_max_attempts = 1;
    s.connect_timeout = Duration::from_secs(2);
    let store = S3Store::new(s).unwrap();
    for e in all_errors(&store).await {
        let msg = e.chain();
        assert!(matches!(e.cause(), Cause::Unreachable { .. }), "{msg}");
        assert!(e.is_transient(), "{msg}");
        assert!(
            msg.contains(&format!("cannot reach the storage server at {endpoint}")),
            "{msg}"
        );
    }
    let e = store.presign_get("k", Duration::from_secs(60)).await;
    assert!(e.is_ok(), "presigning needs no server");
}
