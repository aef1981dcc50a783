//! Shared fixtures of the storage tests: a real s3s-fs with a bucket, stores pointed at it, and
//! big files of pseudo-random bytes with their SHA-256.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::{io::Write, path::Path};

use nsight_e2e::{
    s3::{S3Server, ACCESS_KEY, SECRET_KEY},
    TempDir,
};
use nsight_storage::{S3Settings, S3Store, Secret};
use sha2::{Digest, Sha256};

pub const BUCKET: &str = "reports";
pub const MIB: u64 = 1024 * 1024;

/// A test directory, an s3s-fs on it and a store on bucket `reports` (created through the S3 API).
pub struct Fixture {
    pub dir: TempDir,
    pub server: S3Server,
    pub store: S3Store,
}

pub fn settings(endpoint: &str, bucket: &str, secret: &str) -> S3Settings {
    S3Settings::new(bucket, Some(endpoint), ACCESS_KEY, Secret::new(secret))
}

pub async fn fixture(name: &str) -> Fixture {
    let dir = TempDir::new(name);
    let server = S3Server::start(&dir.path().join("s3"));
    let store = S3Store::new(settings(&server.endpoint(), BUCKET, SECRET_KEY)).unwrap();
    store.create_bucket().await.unwrap();
    let again = store.create_bucket().await;
    assert!(
        again.is_ok(),
        "creating the bucket twice must succeed: {}",
        again.err().map(|e| e.chain()).unwrap_or_default()
    );
    Fixture { dir, server, store }
}

/// The size of the "large file" tests: 64 MiB, or 1 GiB with `NSIGHT_BIG_TESTS=1`.
pub fn big_size() -> u64 {
    if std::env::var("NSIGHT_BIG_TESTS").is_ok_and(|v| v == "1") {
        1024 * MIB
    } else {
        64 * MIB
    }
}

/// Writes `size` pseudo-random bytes (xorshift, so that no layer can compress or dedupe them)
/// and returns their hex SHA-256.
pub fn write_random(path: &Path, size: u64, seed: u64) -> String {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut hasher = Sha256::new();
    let mut state = seed | 1;
    let mut chunk = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        for word in chunk.chunks_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            word.copy_from_slice(&state.to_le_bytes()[..word.len()]);
        }
        let n = left.min(chunk.len() as u64) as usize;
        hasher.update(&chunk[..n]);
        file.write_all(&chunk[..n]).unwrap();
        left -= n as u64;
    }
    file.flush().unwrap();
    hex::encode(hasher.finalize())
}

pub fn sha256_file(path: &Path) -> String {
    let mut f = std::fs::File::open(path).unwrap();
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).unwrap();
    hex::encode(h.finalize())
}
