//! Errors of the storage backends: one variant per operation (what was being done, to which
//! key), with the reason as a [`Cause`] in `#[source]`.
//!
//! The causes a person can act on (a missing bucket, rejected credentials, an unreachable server)
//! are their own variants whose message says what to fix; [`StorageError::is_transient`] tells
//! the uploader which failures are worth retrying. No message ever contains a secret.

use std::{io, path::PathBuf};

/// A boxed error from a lower layer (the S3 SDK, the HTTP client).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A storage operation that failed, named after the operation.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("storing `{key}` in {store}")]
    Put {
        key: String,
        store: String,
        #[source]
        source: Box<Cause>,
    },
    #[error("listing `{prefix}` in {store}")]
    List {
        prefix: String,
        store: String,
        #[source]
        source: Box<Cause>,
    },
    #[error("reading the attributes of `{key}` in {store}")]
    Head {
        key: String,
        store: String,
        #[source]
        source: Box<Cause>,
    },
    #[error("reading `{key}` from {store}")]
    Get {
        key: String,
        store: String,
        #[source]
        source: Box<Cause>,
    },
    #[error("deleting `{key}` from {store}")]
    Delete {
        key: String,
        store: String,
        #[source]
        source: Box<Cause>,
    },
    #[error("presigning a GET of `{key}` in {store}")]
    Presign {
        key: String,
        store: String,
        #[source]
        source: Box<Cause>,
    },
    #[error("creating bucket `{bucket}` at {endpoint}")]
    CreateBucket {
        bucket: String,
        endpoint: String,
        #[source]
        source: Box<Cause>,
    },
    #[error("opening the store")]
    Open {
        #[source]
        source: Box<Cause>,
    },
}

impl StorageError {
    /// The reason, whatever the operation.
    pub fn cause(&self) -> &Cause {
        match self {
            Self::Put { source, .. }
            | Self::List { source, .. }
            | Self::Head { source, .. }
            | Self::Get { source, .. }
            | Self::Delete { source, .. }
            | Self::Presign { source, .. }
            | Self::CreateBucket { source, .. }
            | Self::Open { source } => source,
        }
    }

    /// Whether trying again later may succeed (an outage, a timeout, a 5xx), as opposed to a
    /// configuration problem that needs a person (credentials, bucket name, a bad key).
    pub fn is_transient(&self) -> bool {
        self.cause().is_transient()
    }

    /// The whole chain on one line, `operation: cause: cause...`, for logs and CLI output.
    pub fn chain(&self) -> String {
        let mut out = self.to_string();
        let mut next = std::error::Error::source(self);
        while let Some(e) = next {
            out.push_str(": ");
            out.push_str(&e.to_string());
            next = e.source();
        }
        out
    }
}

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Cause {
    #[error("bucket `{bucket}` does not exist at {endpoint}: create it or fix bucket_name")]
    NoSuchBucket { bucket: String, endpoint: String },
    #[error(
        "{endpoint} rejected the credentials of access key `{access_key_id}` ({code}): fix \
         aws_access_key_id / aws_secret_access_key in the storage config"
    )]
    Credentials {
        endpoint: String,
        access_key_id: String,
        code: String,
    },
    #[error(
        "{endpoint} denied access key `{access_key_id}` access to bucket `{bucket}` ({code}): \
         grant the key access to the bucket or fix bucket_name"
    )]
    AccessDenied {
        endpoint: String,
        access_key_id: String,
        bucket: String,
        code: String,
    },
    #[error("no such object")]
    NotFound,
    #[error("the range starts at byte {start} but the object has {size} bytes")]
    InvalidRange { start: u64, size: u64 },
    #[error(
        "cannot reach the storage server at {endpoint}: is it running and is endpoint_url right?"
    )]
    Unreachable {
        endpoint: String,
        #[source]
        source: BoxError,
    },
    #[error("the storage server at {endpoint} answered HTTP {status} {code}: {message}")]
    Server {
        endpoint: String,
        status: u16,
        code: String,
        message: String,
    },
    #[error("the storage server at {endpoint} sent a response that could not be read")]
    Response {
        endpoint: String,
        #[source]
        source: BoxError,
    },
    #[error("invalid object key: {reason}")]
    InvalidKey { reason: &'static str },
    #[error("reading the data to upload")]
    Source(#[source] io::Error),
    #[error("file system operation on {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "no space left on device while writing `{key}` ({}): free space on that file system \
         or move the store",
        path.display()
    )]
    NoSpace {
        key: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "`{key}` has {on_disk} bytes on disk at {} after writing the {received} bytes received",
        path.display()
    )]
    ShortWrite {
        key: String,
        path: PathBuf,
        received: u64,
        on_disk: u64,
    },
    #[error("a local directory store has no presigned URLs: read the file under {} directly", root.display())]
    NoPresignedUrls { root: PathBuf },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("{what} hash to SHA-256 {actual}, but {expected} was expected")]
    ChecksumMismatch {
        what: String,
        expected: String,
        actual: String,
    },
    #[error("the S3 client failed before sending the request")]
    Client(#[source] BoxError),
}

impl Cause {
    /// See [`StorageError::is_transient`].
    pub fn is_transient(&self) -> bool {
        match self {
            // Space may be freed; a short write has no known cause to fix.
            Self::Unreachable { .. }
            | Self::Response { .. }
            | Self::NoSpace { .. }
            | Self::ShortWrite { .. } => true,
            Self::Server { status, .. } => *status >= 500 || *status == 408 || *status == 429,
            Self::Io { source, .. } | Self::Source(source) => !matches!(
                source.kind(),
                io::ErrorKind::NotFound
                    | io::ErrorKind::PermissionDenied
                    | io::ErrorKind::InvalidInput
            ),
            Self::NoSuchBucket { .. }
            | Self::Credentials { .. }
            | Self::AccessDenied { .. }
            | Self::NotFound
            | Self::InvalidRange { .. }
            | Self::InvalidKey { .. }
            | Self::NoPresignedUrls { .. }
            | Self::InvalidArgument(_)
            | Self::ChecksumMismatch { .. }
            | Self::Client(_) => false,
        }
    }
}
