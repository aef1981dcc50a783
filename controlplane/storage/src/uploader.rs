//! The agent-side uploader: a report is first moved into a spool directory with a manifest (key,
//! size, SHA-256), then uploaded with bounded retries and exponential backoff, verified, and only
//! then removed locally. A storage outage loses nothing: what could not be uploaded stays in the
//! spool, and a new uploader on the same directory (after an agent restart) uploads it.
//!
//! ```text
//! report --spool()--> <spool>/<id>.{json,data} --drain()--> put --> verify --> remove local copy
//!                                                 ^ retry with backoff (transient errors) |
//! ```
//!
//! Verification after each upload: the size from HEAD must match; then the server's
//! `x-amz-checksum-sha256` (whole-object, or composite for multipart) when it reports one; else,
//! for objects up to [`UploaderOptions::reread_verify_max`], the object is read back and hashed;
//! larger objects on servers without checksums are verified by size only.
//! Owns the spool directory; never touches keys other than the ones it uploads.

use std::{
    path::{Path, PathBuf},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use tokio::sync::Mutex;

use crate::{
    digest,
    error::{Cause, StorageError},
    key::validate_key,
    spool::{self, Pending, Spool},
    PutOptions, ReportStore, MIB,
};

/// Bounded exponential backoff between upload attempts of one report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per report per drain (at least 1).
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// 6 attempts, 0.5 s doubling to at most 30 s: about 15 s of waiting before a report is left
    /// in the spool for the next drain.
    fn default() -> Self {
        Self {
            max_attempts: 6,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt `attempt` (1-based): `initial * 2^(attempt-1)`, capped, with
    /// jitter down to half so that many agents do not retry in step after an outage.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .initial_backoff
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
        let capped = exp.min(self.max_backoff);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let jitter = 0.5 + f64::from(nanos % 1000) / 2000.0;
        capped.mul_f64(jitter)
    }
}

/// Uploader settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploaderOptions {
    pub retry: RetryPolicy,
    /// Objects up to this size are read back and hashed when the server reports no checksum.
    pub reread_verify_max: u64,
}

impl Default for UploaderOptions {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::default(),
            reread_verify_max: 64 * MIB,
        }
    }
}

/// How an upload was verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verification {
    /// The server's stored SHA-256 equals ours.
    ServerChecksum,
    /// Read back and hashed.
    Reread,
    /// Size only (large object, server without checksums).
    SizeOnly,
}

/// One report stored and removed from the spool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    pub key: String,
    pub size: u64,
    pub sha256: String,
    pub attempts: u32,
    pub verification: Verification,
}

/// One report still in the spool after its attempts.
#[derive(Debug)]
pub struct FailedUpload {
    pub key: String,
    pub attempts: u32,
    pub error: UploaderError,
}

/// The result of a drain: what was stored and what is still waiting.
#[derive(Debug, Default)]
pub struct UploadReport {
    pub uploaded: Vec<Uploaded>,
    pub failed: Vec<FailedUpload>,
}

impl UploadReport {
    /// The keys stored by this drain.
    pub fn keys(&self) -> Vec<String> {
        self.uploaded.iter().map(|u| u.key.clone()).collect()
    }

    pub fn is_complete(&self) -> bool {
        self.failed.is_empty()
    }
}

/// A report waiting in the spool.
pub type SpooledReport = spool::Manifest;

/// Why spooling, uploading or verifying failed.
#[derive(Debug, thiserror::Error)]
pub enum UploaderError {
    #[error("opening the spool directory {}", dir.display())]
    OpenSpool {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the spool directory {} is in use by another uploader", dir.display())]
    SpoolLocked { dir: PathBuf },
    #[error("reading the spool directory {}", dir.display())]
    ReadSpool {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("moving {} into the spool as `{key}`", path.display())]
    Spool {
        path: PathBuf,
        key: String,
        #[source]
        source: std::io::Error,
    },
    #[error("refusing to spool `{key}`")]
    Key {
        key: String,
        #[source]
        source: Cause,
    },
    #[error("uploading `{key}`")]
    Upload {
        key: String,
        #[source]
        source: StorageError,
    },
    #[error("verifying `{key}` after upload: {problem}")]
    Verify { key: String, problem: String },
    #[error(
        "the spooled copy of `{key}` is not what was spooled (size {size}, sha256 {sha256}): \
         left in {} for inspection", path.display()
    )]
    Corrupt {
        key: String,
        size: u64,
        sha256: String,
        path: PathBuf,
    },
}

impl UploaderError {
    /// Whether another attempt may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Upload { source, .. } => source.is_transient(),
            Self::Verify { .. } => true,
            _ => false,
        }
    }
}

/// Uploads spooled reports to a [`ReportStore`]; one per spool directory (locked).
#[derive(Debug)]
pub struct Uploader<S> {
    store: S,
    spool: Spool,
    options: UploaderOptions,
    draining: Mutex<()>,
}

impl<S: ReportStore> Uploader<S> {
    /// Opens (creating) the spool directory and takes its lock. Reports left by a previous
    /// uploader are pending and go up with the next [`Uploader::drain`].
    pub fn open(
        store: S,
        spool_dir: &Path,
        options: UploaderOptions,
    ) -> Result<Self, UploaderError> {
        let spool = Spool::open(spool_dir).map_err(|e| match e {
            spool::OpenError::Locked => UploaderError::SpoolLocked {
                dir: spool_dir.to_path_buf(),
            },
            spool::OpenError::Io(source) => UploaderError::OpenSpool {
                dir: spool_dir.to_path_buf(),
                source,
            },
        })?;
        Ok(Self {
            store,
            spool,
            options,
            draining: Mutex::new(()),
        })
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    /// Reports waiting for upload, oldest first.
    pub fn pending(&self) -> Result<Vec<SpooledReport>, UploaderError> {
        Ok(self
            .read_pending()?
            .into_iter()
            .map(|p| p.manifest)
            .collect())
    }

    fn read_pending(&self) -> Result<Vec<Pending>, UploaderError> {
        self.spool
            .pending()
            .map_err(|source| UploaderError::ReadSpool {
                dir: self.spool.dir().to_path_buf(),
                source,
            })
    }

    /// Moves the finished report at `path` into the spool, to be stored under `key`.
    pub async fn spool(&self, path: &Path, key: &str) -> Result<SpooledReport, UploaderError> {
        validate_key(key).map_err(|source| UploaderError::Key {
            key: key.to_owned(),
            source,
        })?;
        self.spool
            .add(path, key)
            .await
            .map(|p| p.manifest)
            .map_err(|source| UploaderError::Spool {
                path: path.to_path_buf(),
                key: key.to_owned(),
                source,
            })
    }

    /// Spools `path` as `key`, then drains (this report and any still pending).
    pub async fn upload(&self, path: &Path, key: &str) -> Result<UploadReport, UploaderError> {
        self.spool(path, key).await?;
        self.drain().await
    }

    /// Uploads every pending report, each with up to `max_attempts` attempts. Reports that still
    /// fail stay spooled and are listed in [`UploadReport::failed`].
    pub async fn drain(&self) -> Result<UploadReport, UploaderError> {
        let _one_at_a_time = self.draining.lock().await;
        let mut report = UploadReport::default();
        for pending in self.read_pending()? {
            match self.upload_with_retries(&pending).await {
                Ok(uploaded) => {
                    if let Err(e) = self.spool.remove(&pending).await {
                        // Stored and verified: a leftover local copy is uploaded again, harmless.
                        tracing::warn!(key = %uploaded.key, error = %e, "uploaded, but the spooled copy could not be removed");
                    }
                    tracing::info!(key = %uploaded.key, size = uploaded.size, attempts = uploaded.attempts, "report uploaded");
                    report.uploaded.push(uploaded);
                }
                Err(failed) => {
                    tracing::warn!(key = %failed.key, attempts = failed.attempts, error = %chain(&failed.error), "report left in the spool");
                    report.failed.push(failed);
                }
            }
        }
        Ok(report)
    }

    async fn upload_with_retries(&self, pending: &Pending) -> Result<Uploaded, FailedUpload> {
        let max = self.options.retry.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            match self.attempt(pending).await {
                Ok(verification) => {
                    return Ok(Uploaded {
                        key: pending.manifest.key.clone(),
                        size: pending.manifest.size,
                        sha256: pending.manifest.sha256.clone(),
                        attempts: attempt,
                        verification,
                    })
                }
                Err(error) if attempt >= max || !error.is_transient() => {
                    return Err(FailedUpload {
                        key: pending.manifest.key.clone(),
                        attempts: attempt,
                        error,
                    })
                }
                Err(error) => {
                    let wait = self.options.retry.backoff(attempt);
                    tracing::warn!(key = %pending.manifest.key, attempt, ?wait, error = %chain(&error), "upload failed, retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
            }
        }
    }

    async fn attempt(&self, pending: &Pending) -> Result<Verification, UploaderError> {
        let m = &pending.manifest;
        let upload_err = |source| UploaderError::Upload {
            key: m.key.clone(),
            source,
        };
        let verify_err = |problem: String| UploaderError::Verify {
            key: m.key.clone(),
            problem,
        };
        let put = self
            .store
            .put_file_with(&m.key, &pending.data, &PutOptions::with_sha256(&m.sha256))
            .await;
        let outcome = match put {
            // The spooled bytes no longer hash to the manifest: refused before it was stored.
            Err(e) if matches!(e.cause(), Cause::ChecksumMismatch { .. }) => {
                let (size, sha256) = digest::hash_file(&pending.data)
                    .await
                    .unwrap_or((0, String::new()));
                return Err(UploaderError::Corrupt {
                    key: m.key.clone(),
                    size,
                    sha256,
                    path: pending.data.clone(),
                });
            }
            other => other.map_err(upload_err)?,
        };
        if outcome.size != m.size || outcome.sha256 != m.sha256 {
            return Err(UploaderError::Corrupt {
                key: m.key.clone(),
                size: outcome.size,
                sha256: outcome.sha256,
                path: pending.data.clone(),
            });
        }
        let info = self.store.head(&m.key).await.map_err(upload_err)?;
        if info.size != m.size {
            return Err(verify_err(format!(
                "the server has {} bytes, {} were sent",
                info.size, m.size
            )));
        }
        if let Some(server) = &info.checksum_sha256 {
            if outcome.checksum_matches(server) {
                return Ok(Verification::ServerChecksum);
            }
            return Err(verify_err(format!(
                "the server's sha256 {server} differs from the sent data's"
            )));
        }
        if m.size > self.options.reread_verify_max {
            return Ok(Verification::SizeOnly);
        }
        let reader = self.store.get(&m.key, None).await.map_err(upload_err)?;
        let (size, sha256) = digest::hash_reader(reader)
            .await
            .map_err(|e| verify_err(format!("reading the object back failed: {e}")))?;
        if size != m.size || sha256 != m.sha256 {
            return Err(verify_err(format!(
                "read back {size} bytes with sha256 {sha256}, expected {} bytes with {}",
                m.size, m.sha256
            )));
        }
        Ok(Verification::Reread)
    }
}

/// The error and its sources on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out.push_str(": ");
        out.push_str(&s.to_string());
        next = s.source();
    }
    out
}

#[cfg(test)]
mod tests;
