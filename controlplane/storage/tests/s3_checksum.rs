//! SHA-256 end to end against a real S3 server (s3s-fs on loopback): a put told the digest
//! stores it with the object and refuses a body that hashes otherwise (nothing is listed); a
//! download verifies it, and an object damaged inside the server's store (s3s-fs keeps objects as
//! plain files) fails with an error naming the file, leaving nothing at the destination.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

mod common;

use std::os::unix::fs::FileExt;

use common::{fixture, write_random, BUCKET, MIB};
use nsight_storage::{download::download_to_file, Cause, PutOptions, ReportStore};

/// Flips one byte of the object's file in the server's store (same size, other content).
fn corrupt(f: &common::Fixture, key: &str, at: u64) {
    let path = f.server.bucket_dir(BUCKET).join(key);
    assert!(
        path.is_file(),
        "the object should be the file {}",
        path.display()
    );
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[byte[0] ^ 0xff], at).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_object_fails_verification_and_leaves_no_file() {
    let f = fixture("s3-checksum").await;
    let out_dir = f.dir.path().join("out");
    // A multipart upload (20 MiB: 3 parts of 8 MiB) and a single PUT.
    let big = f.dir.path().join("big.bin");
    let big_sha = write_random(&big, 20 * MIB, 7);
    let big_key = "t/s1/c1/big_t_p_1.nsys-rep";
    f.store
        .put_file_with(big_key, &big, &PutOptions::with_sha256(&big_sha))
        .await
        .unwrap();
    let small_key = "t/s1/c1/small_t_p_1.sqlite";
    let small = f
        .store
        .put_bytes(small_key, b"0123456789abcdef")
        .await
        .unwrap();

    for (key, sha, at) in [
        (big_key, big_sha.as_str(), 17 * MIB + 3),
        (small_key, small.sha256.as_str(), 5),
    ] {
        assert_eq!(
            f.store.head(key).await.unwrap().sha256.as_deref(),
            Some(sha)
        );
        // Intact: downloads and verifies.
        let good = out_dir.join(format!("good-{}", key.replace('/', "-")));
        download_to_file(&f.store, key, &good).await.unwrap();
        assert_eq!(common::sha256_file(&good), sha);

        corrupt(&f, key, at);
        let dest = out_dir.join(key.rsplit('/').next().unwrap());
        let e = download_to_file(&f.store, key, &dest).await.unwrap_err();
        let msg = e.chain();
        assert!(
            matches!(e.cause(), Cause::ChecksumMismatch { expected, .. } if expected == sha),
            "{msg}"
        );
        assert!(msg.contains(&dest.display().to_string()), "{msg}");
        assert!(msg.contains(sha), "{msg}");
        assert!(
            !dest.exists(),
            "a damaged download must not take the final name"
        );
        let mut part = dest.as_os_str().to_owned();
        part.push(".part");
        assert!(
            !std::path::Path::new(&part).exists(),
            "the damaged partial file is removed"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_does_not_hash_to_the_expected_digest_is_never_stored() {
    let f = fixture("s3-put-digest").await;
    let wrong = "0".repeat(64);
    let big = f.dir.path().join("big.bin");
    let big_sha = write_random(&big, 12 * MIB, 9);
    for (key, multipart) in [("t/s/c/multi", true), ("t/s/c/single", false)] {
        let e = if multipart {
            f.store
                .put_file_with(key, &big, &PutOptions::with_sha256(&wrong))
                .await
                .unwrap_err()
        } else {
            f.store
                .put_with(key, &b"abc"[..], &PutOptions::with_sha256(&wrong))
                .await
                .unwrap_err()
        };
        assert!(
            matches!(e.cause(), Cause::ChecksumMismatch { actual, .. } if actual != &wrong),
            "{}",
            e.chain()
        );
        assert!(!e.is_transient(), "retrying the same bytes cannot help");
    }
    assert!(
        f.store.list("t/").await.unwrap().is_empty(),
        "nothing may be listed after a refused put"
    );
    // The same file with its real digest goes up.
    f.store
        .put_file_with("t/s/c/multi", &big, &PutOptions::with_sha256(&big_sha))
        .await
        .unwrap();
    assert_eq!(f.store.list("t/").await.unwrap().len(), 1);
}
