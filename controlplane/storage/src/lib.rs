//! Report storage: where profiling reports land and how they are read back.
//!
//! Owns the [`ReportStore`] trait and its two backends ([`S3Store`] over any S3-compatible server,
//! [`LocalStore`] over a directory), the `storage-config.yaml` format ([`config`]), the key layout
//! of reports and session metadata ([`layout`], pure), and the agent's spooling uploader
//! ([`uploader`]). It must not know about sessions' state (the coordinator owns that) nor talk to
//! anything but the storage backend.
//!
//! ```text
//!  agent: report file --spool--> uploader --put (multipart)--> ReportStore --> S3 / directory
//!  cli/ui: ReportStore --list--> layout::plan_download --get (ranged)--> <out>/<ts>-<title>/...
//! ```

pub mod config;
mod digest;
pub mod download;
pub mod error;
pub mod key;
pub mod layout;
pub mod local;
pub mod object_server;
pub mod private;
pub mod resume;
pub mod s3;
mod s3_error;
pub mod signed_url;
mod spool;
pub mod uploader;

use std::{
    fmt,
    future::Future,
    io,
    path::Path,
    pin::Pin,
    task::{Context, Poll},
    time::{Duration, SystemTime},
};

use tokio::io::{AsyncRead, ReadBuf};

pub use crate::{
    config::{ConfigError, Secret, StorageConfig},
    error::{Cause, StorageError},
    local::LocalStore,
    s3::{S3Settings, S3Store},
    uploader::{RetryPolicy, UploadReport, Uploader, UploaderError},
};

/// One MiB.
pub const MIB: u64 = 1024 * 1024;
/// Default multipart part size and threshold: objects above it are uploaded in parts.
pub const DEFAULT_PART_SIZE: u64 = 8 * MIB;
/// Default number of multipart parts in flight at once (memory: about this many parts).
pub const DEFAULT_UPLOAD_CONCURRENCY: usize = 4;
/// User-metadata name under which a put stores the object's hex SHA-256 when it is known before
/// the upload (`x-amz-meta-sha256` on S3); downloads verify against it.
pub const SHA256_METADATA: &str = "sha256";
/// S3's smallest part (every part but the last must be at least this big).
pub const MIN_PART_SIZE: u64 = 5 * MIB;
/// S3's largest part.
pub const MAX_PART_SIZE: u64 = 5 * 1024 * MIB;

/// What a listing or a HEAD says about one stored object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub key: String,
    pub size: u64,
    pub last_modified: Option<SystemTime>,
    /// The server's entity tag (S3), or `<size>-<mtime>` in hex (local); quotes stripped.
    pub etag: Option<String>,
    /// `x-amz-checksum-sha256` as the server reports it on HEAD: base64 of the object's SHA-256,
    /// or `<base64>-<parts>` (composite) for a multipart upload. `None` when the server keeps no
    /// checksum (s3s-fs for multipart uploads, the local store) or on a listing.
    pub checksum_sha256: Option<String>,
    /// Hex SHA-256 of the whole object when the store knows it: the digest a put stored with the
    /// object ([`PutOptions::sha256`], S3 user metadata), or a whole-object (not composite)
    /// `checksum_sha256`. `None` on a listing. Downloads verify against it.
    pub sha256: Option<String>,
}

/// Options of a put.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PutOptions {
    /// Hex SHA-256 the body must have, known beforehand (the uploader hashes at spool time). A
    /// body that hashes differently is refused ([`Cause::ChecksumMismatch`]) before the object
    /// becomes visible, and S3 stores the digest as user metadata so downloads can verify it.
    pub sha256: Option<String>,
}

impl PutOptions {
    /// Options expecting the body to hash to `sha256_hex`.
    pub fn with_sha256(sha256_hex: &str) -> Self {
        Self {
            sha256: Some(sha256_hex.to_ascii_lowercase()),
        }
    }

    /// `Err` with [`Cause::ChecksumMismatch`] if an expected digest is set and differs.
    pub(crate) fn check(&self, size: u64, actual_hex: &str) -> Result<(), Cause> {
        match &self.sha256 {
            Some(expected) if !expected.eq_ignore_ascii_case(actual_hex) => {
                Err(Cause::ChecksumMismatch {
                    what: format!("the {size} bytes read for upload"),
                    expected: expected.clone(),
                    actual: actual_hex.to_owned(),
                })
            }
            _ => Ok(()),
        }
    }
}

/// A byte range `[start, end)` of an object; `end: None` reads to the end (resuming a download).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    start: u64,
    end: Option<u64>,
}

impl ByteRange {
    /// From `start` to the end of the object.
    pub fn from_offset(start: u64) -> Self {
        Self { start, end: None }
    }

    /// `[start, end)`; `None` when the range is empty.
    pub fn new(start: u64, end: u64) -> Option<Self> {
        (start < end).then_some(Self {
            start,
            end: Some(end),
        })
    }

    pub fn start(&self) -> u64 {
        self.start
    }

    /// Exclusive end, if bounded.
    pub fn end(&self) -> Option<u64> {
        self.end
    }

    /// The HTTP `Range` header value (inclusive last byte).
    pub fn http_header(&self) -> String {
        match self.end {
            Some(end) => format!("bytes={}-{}", self.start, end.saturating_sub(1)),
            None => format!("bytes={}-", self.start),
        }
    }

    /// The length this range selects in an object of `size` bytes (clamped to the object).
    pub fn len_in(&self, size: u64) -> u64 {
        self.end
            .unwrap_or(size)
            .min(size)
            .saturating_sub(self.start)
    }
}

/// The result of a successful put: what was sent, and how to check it arrived intact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutOutcome {
    pub key: String,
    pub size: u64,
    /// Hex SHA-256 of every byte sent.
    pub sha256: String,
    /// Number of multipart parts, or 0 for a single PUT.
    pub parts: u32,
    /// For multipart uploads, the composite checksum S3 computes from the parts' SHA-256
    /// (`base64(sha256(digest1 || digest2 || ...))-<parts>`).
    pub composite_sha256: Option<String>,
    pub etag: Option<String>,
}

impl PutOutcome {
    /// Whether `server` (an [`ObjectInfo::checksum_sha256`]) matches what was sent.
    pub fn checksum_matches(&self, server: &str) -> bool {
        digest::hex_to_base64(&self.sha256).is_some_and(|whole| whole == server)
            || self.composite_sha256.as_deref() == Some(server)
    }
}

/// A streaming read of an object (or of a range of it). Reads through [`AsyncRead`].
pub struct ObjectReader {
    /// Offset of the first byte of this body in the object.
    pub offset: u64,
    /// Bytes this body will yield.
    pub len: u64,
    /// Size of the whole object.
    pub total_size: u64,
    body: Pin<Box<dyn AsyncRead + Send>>,
}

impl ObjectReader {
    pub(crate) fn new(
        offset: u64,
        len: u64,
        total_size: u64,
        body: Pin<Box<dyn AsyncRead + Send>>,
    ) -> Self {
        Self {
            offset,
            len,
            total_size,
            body,
        }
    }

    /// Reads the whole body into memory (for small objects such as `session.json`).
    pub async fn read_to_vec(mut self) -> io::Result<Vec<u8>> {
        use tokio::io::AsyncReadExt as _;
        let mut out = Vec::with_capacity(usize::try_from(self.len).unwrap_or(0).min(1 << 24));
        self.body.read_to_end(&mut out).await?;
        Ok(out)
    }
}

impl fmt::Debug for ObjectReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectReader")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .field("total_size", &self.total_size)
            .finish_non_exhaustive()
    }
}

impl AsyncRead for ObjectReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.body.as_mut().poll_read(cx, buf)
    }
}

/// Where reports are stored. Keys follow [`key::validate_key`]; every method checks them.
///
/// Invariant of every backend: an object is listed only once it is complete (a single PUT is
/// atomic, multipart parts are invisible until the upload completes, the local store renames a
/// fsynced temp file into place).
pub trait ReportStore: Send + Sync {
    /// A short description for messages, e.g. "s3 bucket `reports` at http://127.0.0.1:9000".
    fn describe(&self) -> String;

    /// Streams `body` to `key`, replacing any object there, with `options`. Large bodies go up
    /// in parts with bounded memory (a few parts in flight).
    fn put_with<R>(
        &self,
        key: &str,
        body: R,
        options: &PutOptions,
    ) -> impl Future<Output = Result<PutOutcome, StorageError>> + Send
    where
        R: AsyncRead + Unpin + Send;

    /// [`ReportStore::put_with`] with default options.
    fn put<R>(
        &self,
        key: &str,
        body: R,
    ) -> impl Future<Output = Result<PutOutcome, StorageError>> + Send
    where
        R: AsyncRead + Unpin + Send,
    {
        async move { self.put_with(key, body, &PutOptions::default()).await }
    }

    /// [`ReportStore::put`] from a file.
    fn put_file(
        &self,
        key: &str,
        path: &Path,
    ) -> impl Future<Output = Result<PutOutcome, StorageError>> + Send {
        async move { self.put_file_with(key, path, &PutOptions::default()).await }
    }

    /// [`ReportStore::put_with`] from a file.
    fn put_file_with(
        &self,
        key: &str,
        path: &Path,
        options: &PutOptions,
    ) -> impl Future<Output = Result<PutOutcome, StorageError>> + Send {
        async move {
            let file = tokio::fs::File::open(path)
                .await
                .map_err(|source| StorageError::Put {
                    key: key.to_owned(),
                    store: self.describe(),
                    source: Box::new(Cause::Io {
                        path: path.to_path_buf(),
                        source,
                    }),
                })?;
            self.put_with(key, file, options).await
        }
    }

    /// [`ReportStore::put`] from memory (small objects such as `session.json`).
    fn put_bytes(
        &self,
        key: &str,
        bytes: &[u8],
    ) -> impl Future<Output = Result<PutOutcome, StorageError>> + Send {
        self.put(key, bytes)
    }

    /// Every complete object whose key starts with `prefix`, sorted by key.
    fn list(
        &self,
        prefix: &str,
    ) -> impl Future<Output = Result<Vec<ObjectInfo>, StorageError>> + Send;

    /// One object's size, times and checksum; [`Cause::NotFound`] if it does not exist.
    fn head(&self, key: &str) -> impl Future<Output = Result<ObjectInfo, StorageError>> + Send;

    /// Streams the object, or `range` of it.
    fn get(
        &self,
        key: &str,
        range: Option<ByteRange>,
    ) -> impl Future<Output = Result<ObjectReader, StorageError>> + Send;

    /// Deletes the object; deleting a missing object succeeds (as on S3).
    fn delete(&self, key: &str) -> impl Future<Output = Result<(), StorageError>> + Send;

    /// A URL anyone can GET for `expires_in` without credentials (S3 only).
    fn presign_get(
        &self,
        key: &str,
        expires_in: Duration,
    ) -> impl Future<Output = Result<String, StorageError>> + Send;
}

/// The backend chosen by a [`StorageConfig`]: dispatch by kind without trait objects.
#[derive(Debug, Clone)]
pub enum Store {
    S3(S3Store),
    Local(LocalStore),
}

impl Store {
    /// Opens the backend `config` names.
    pub fn from_config(config: &StorageConfig) -> Result<Self, StorageError> {
        match config {
            StorageConfig::S3(s3) => Ok(Self::S3(S3Store::new(S3Settings::from_config(s3))?)),
            StorageConfig::Local(local) => Ok(Self::Local(LocalStore::open(&local.root)?)),
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $store:ident => $call:expr) => {
        match $self {
            Store::S3($store) => $call,
            Store::Local($store) => $call,
        }
    };
}

impl ReportStore for Store {
    fn describe(&self) -> String {
        dispatch!(self, s => s.describe())
    }

    async fn put_with<R>(
        &self,
        key: &str,
        body: R,
        options: &PutOptions,
    ) -> Result<PutOutcome, StorageError>
    where
        R: AsyncRead + Unpin + Send,
    {
        dispatch!(self, s => s.put_with(key, body, options).await)
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StorageError> {
        dispatch!(self, s => s.list(prefix).await)
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo, StorageError> {
        dispatch!(self, s => s.head(key).await)
    }

    async fn get(&self, key: &str, range: Option<ByteRange>) -> Result<ObjectReader, StorageError> {
        dispatch!(self, s => s.get(key, range).await)
    }

    async fn delete(&self, key: &str) -> Result<(), StorageError> {
        dispatch!(self, s => s.delete(key).await)
    }

    async fn presign_get(&self, key: &str, expires_in: Duration) -> Result<String, StorageError> {
        dispatch!(self, s => s.presign_get(key, expires_in).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_ranges_render_as_http_headers() {
        assert_eq!(ByteRange::from_offset(10).http_header(), "bytes=10-");
        assert_eq!(
            ByteRange::new(0, 100).map(|r| r.http_header()).as_deref(),
            Some("bytes=0-99")
        );
        assert_eq!(ByteRange::new(5, 5), None);
        assert_eq!(ByteRange::from_offset(10).len_in(25), 15);
        assert_eq!(ByteRange::new(10, 100).map(|r| r.len_in(25)), Some(15));
        assert_eq!(ByteRange::from_offset(30).len_in(25), 0);
    }

    #[test]
    fn put_outcome_matches_whole_or_composite_checksums() {
        let outcome = PutOutcome {
            key: "k".into(),
            size: 3,
            sha256: digest::sha256_hex(b"abc"),
            parts: 0,
            composite_sha256: Some("AAAA-2".into()),
            etag: None,
        };
        assert!(outcome.checksum_matches("ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="));
        assert!(outcome.checksum_matches("AAAA-2"));
        assert!(!outcome.checksum_matches("AAAA-3"));
    }
}
