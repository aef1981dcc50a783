//! [`S3Store`]: reports in a bucket of any S3-compatible server (AWS S3, MinIO, Garage, s3s-fs),
//! through aws-sdk-s3 with static credentials, a custom endpoint and path-style addressing.
//!
//! ```text
//! put:  body --read up to threshold--> small? PutObject (x-amz-checksum-sha256)
//!                                      else   CreateMultipartUpload, UploadPart x N (a few
//!                                             parts in flight, each with its SHA-256),
//!                                             CompleteMultipartUpload (abort on failure)
//! ```
//!
//! Every PUT carries the SHA-256 the client computed, so a server that checks checksums refuses a
//! corrupted body; HEAD asks for the stored checksum so the uploader can verify. Plain-HTTP
//! endpoints work (loopback tests); HTTPS uses rustls with ring and the system's roots.

mod put;

use std::{fmt, sync::Arc, time::Duration};

use aws_sdk_s3::{
    config::{
        retry::RetryConfig, timeout::TimeoutConfig, BehaviorVersion, Credentials, Region,
        RequestChecksumCalculation, ResponseChecksumValidation,
    },
    presigning::PresigningConfig,
    types::{BucketLocationConstraint, ChecksumMode, CreateBucketConfiguration},
    Client,
};
use aws_smithy_http_client::tls;
use tokio::{io::AsyncRead, sync::OnceCell};

use crate::{
    config::{S3Config, Secret, DEFAULT_REGION},
    error::{Cause, StorageError},
    key::{validate_key, validate_prefix},
    s3_error::{classify, from_service, service_status, Context},
    ByteRange, ObjectInfo, ObjectReader, PutOptions, PutOutcome, ReportStore, DEFAULT_PART_SIZE,
    DEFAULT_UPLOAD_CONCURRENCY, MAX_PART_SIZE, MIN_PART_SIZE, SHA256_METADATA,
};

/// Everything an [`S3Store`] needs. `Debug` never shows the secret.
#[derive(Debug, Clone)]
pub struct S3Settings {
    pub bucket: String,
    pub region: String,
    /// `None`: AWS S3 itself.
    pub endpoint_url: Option<String>,
    pub access_key_id: String,
    pub secret_access_key: Secret,
    /// Path-style (`http://host/bucket/key`); needed by most S3-compatible servers.
    pub force_path_style: bool,
    /// Size of each multipart part (S3: 5 MiB to 5 GiB).
    pub part_size: u64,
    /// Multipart parts sent at once (at least 1); each holds a part in memory.
    pub upload_concurrency: usize,
    /// Bodies larger than this go up in parts (at most about
    /// `max(threshold + part_size, upload_concurrency * part_size)` bytes in memory).
    pub multipart_threshold: u64,
    pub connect_timeout: Duration,
    /// Attempts per request inside the SDK (transient errors only); the uploader retries on top.
    pub sdk_max_attempts: u32,
}

impl S3Settings {
    /// Settings with the defaults: 8 MiB parts and threshold, 4 parts in flight, path-style iff
    /// an endpoint is set.
    pub fn new(
        bucket: &str,
        endpoint_url: Option<&str>,
        access_key_id: &str,
        secret_access_key: Secret,
    ) -> Self {
        Self {
            bucket: bucket.to_owned(),
            region: DEFAULT_REGION.to_owned(),
            endpoint_url: endpoint_url.map(str::to_owned),
            access_key_id: access_key_id.to_owned(),
            secret_access_key,
            force_path_style: endpoint_url.is_some(),
            part_size: DEFAULT_PART_SIZE,
            upload_concurrency: DEFAULT_UPLOAD_CONCURRENCY,
            multipart_threshold: DEFAULT_PART_SIZE,
            connect_timeout: Duration::from_secs(10),
            sdk_max_attempts: 3,
        }
    }

    pub fn from_config(config: &S3Config) -> Self {
        Self {
            region: config.region.clone(),
            ..Self::new(
                &config.bucket,
                config.endpoint_url.as_deref(),
                &config.access_key_id,
                config.secret_access_key.clone(),
            )
        }
    }

    /// The server as messages name it.
    pub fn endpoint_label(&self) -> String {
        self.endpoint_url
            .clone()
            .unwrap_or_else(|| format!("https://s3.{}.amazonaws.com", self.region))
    }
}

/// A bucket on an S3-compatible server. Cheap to clone (the SDK client is shared).
#[derive(Clone)]
pub struct S3Store {
    client: Client,
    settings: Arc<S3Settings>,
    ctx: Arc<Context>,
    /// Set once the bucket answered a listing: checked before the first write, because some
    /// servers (s3s-fs) create a missing bucket on PUT instead of refusing it.
    bucket_checked: Arc<OnceCell<()>>,
}

impl fmt::Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Store")
            .field("bucket", &self.settings.bucket)
            .field("endpoint", &self.ctx.endpoint)
            .field("access_key_id", &self.settings.access_key_id)
            .finish_non_exhaustive()
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// The object's hex SHA-256: our user metadata if it is a digest, else a whole-object (not
/// composite `...-N`) `x-amz-checksum-sha256`.
fn whole_sha256(metadata: Option<&str>, checksum: Option<&str>) -> Option<String> {
    let from_meta = metadata
        .filter(|m| m.len() == 64 && m.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_ascii_lowercase);
    from_meta.or_else(|| {
        use base64::{engine::general_purpose::STANDARD, Engine as _};
        let raw = STANDARD.decode(checksum?).ok()?;
        (raw.len() == 32).then(|| hex::encode(raw))
    })
}

/// Whether the platform's CA certificates load (at least one).
fn has_native_roots() -> bool {
    !rustls_native_certs::load_native_certs().certs.is_empty()
}

fn strip_quotes(etag: &str) -> String {
    etag.trim_matches('"').to_owned()
}

impl S3Store {
    /// Builds the client (no request is sent: a wrong endpoint shows on first use).
    pub fn new(settings: S3Settings) -> Result<Self, StorageError> {
        let invalid = |msg: String| StorageError::Open {
            source: Box::new(Cause::InvalidArgument(msg)),
        };
        if !(MIN_PART_SIZE..=MAX_PART_SIZE).contains(&settings.part_size) {
            return Err(invalid(format!(
                "part_size {} is outside S3's 5 MiB..5 GiB",
                settings.part_size
            )));
        }
        if settings.upload_concurrency == 0 {
            return Err(invalid("upload_concurrency must be at least 1".into()));
        }
        if settings.multipart_threshold > MAX_PART_SIZE {
            return Err(invalid("multipart_threshold is above 5 GiB".into()));
        }
        // A plain-HTTP endpoint (the in-cluster server) needs no roots: a container without
        // CA certificates must not be asked for them.
        let plain_http = settings
            .endpoint_url
            .as_deref()
            .is_some_and(|u| u.starts_with("http://"));
        // The native roots only when there are some: the S3 client panics on an empty set
        // (a container image without CA certificates, e.g. a distroless workload the agent
        // runs in); then an https endpoint fails its handshake with a clear error instead.
        let native = !plain_http && has_native_roots();
        if !plain_http && !native {
            tracing::warn!(
                "no CA certificates on this machine (/etc/ssl/certs): the https storage \
                 endpoint cannot be verified; add CA certificates to the image"
            );
        }
        let trust = tls::TrustStore::empty().with_native_roots(native);
        let tls_context = tls::TlsContext::builder()
            .with_trust_store(trust)
            .build()
            .map_err(|e| invalid(format!("TLS settings: {e}")))?;
        let http_client = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(
                tls::rustls_provider::CryptoMode::Ring,
            ))
            .tls_context(tls_context)
            .build_https();
        let credentials = Credentials::new(
            &settings.access_key_id,
            settings.secret_access_key.expose(),
            None,
            None,
            "nsight-storage-config",
        );
        let mut builder = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(settings.region.clone()))
            .credentials_provider(credentials)
            .http_client(http_client)
            .force_path_style(settings.force_path_style)
            // We send our own SHA-256 with every PUT; no CRC32 trailers on top.
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .retry_config(RetryConfig::standard().with_max_attempts(settings.sdk_max_attempts))
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(settings.connect_timeout)
                    .build(),
            );
        if let Some(endpoint) = &settings.endpoint_url {
            builder = builder.endpoint_url(endpoint);
        }
        let ctx = Context {
            endpoint: settings.endpoint_label(),
            bucket: settings.bucket.clone(),
            access_key_id: settings.access_key_id.clone(),
        };
        Ok(Self {
            client: Client::from_conf(builder.build()),
            settings: Arc::new(settings),
            ctx: Arc::new(ctx),
            bucket_checked: Arc::new(OnceCell::new()),
        })
    }

    pub fn bucket(&self) -> &str {
        &self.settings.bucket
    }

    pub fn settings(&self) -> &S3Settings {
        &self.settings
    }

    /// Creates the bucket (for tests and local setups; a cluster's bucket is provisioned).
    /// Succeeds if the bucket exists and this key can list it.
    pub async fn create_bucket(&self) -> Result<(), StorageError> {
        let mut req = self.client.create_bucket().bucket(self.bucket());
        if self.settings.region != DEFAULT_REGION {
            req = req.create_bucket_configuration(
                CreateBucketConfiguration::builder()
                    .location_constraint(BucketLocationConstraint::from(
                        self.settings.region.as_str(),
                    ))
                    .build(),
            );
        }
        match req.send().await {
            Ok(_) => Ok(()),
            Err(e) if matches!(service_status(&e), Some((_, Some(c))) if c == "BucketAlreadyOwnedByYou") => {
                Ok(())
            }
            // s3s-fs says this for its own buckets; on AWS it means someone else's bucket, which
            // the probe then reports as access denied.
            Err(e) if matches!(service_status(&e), Some((_, Some(c))) if c == "BucketAlreadyExists") => {
                self.probe()
                    .await
                    .map_err(|source| StorageError::CreateBucket {
                        bucket: self.bucket().to_owned(),
                        endpoint: self.ctx.endpoint.clone(),
                        source: source.into(),
                    })
            }
            Err(e) => Err(StorageError::CreateBucket {
                bucket: self.bucket().to_owned(),
                endpoint: self.ctx.endpoint.clone(),
                source: Box::new(classify(&self.ctx, e)),
            }),
        }
    }

    /// Checks the bucket answers to this key (`ListObjectsV2` of one key): the clearest way to
    /// tell a missing bucket from rejected credentials.
    pub async fn check_access(&self) -> Result<(), StorageError> {
        self.probe().await.map_err(|source| StorageError::List {
            prefix: String::new(),
            store: self.describe(),
            source: source.into(),
        })
    }

    async fn probe(&self) -> Result<(), Cause> {
        self.client
            .list_objects_v2()
            .bucket(self.bucket())
            .max_keys(1)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| classify(&self.ctx, e))
    }

    async fn list_inner(&self, prefix: &str) -> Result<Vec<ObjectInfo>, Cause> {
        validate_prefix(prefix)?;
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(self.bucket())
            .prefix(prefix)
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| classify(&self.ctx, e))?;
            for object in page.contents() {
                let Some(key) = object.key() else { continue };
                out.push(ObjectInfo {
                    key: key.to_owned(),
                    size: object
                        .size()
                        .and_then(|s| u64::try_from(s).ok())
                        .unwrap_or(0),
                    last_modified: object
                        .last_modified()
                        .and_then(|t| std::time::SystemTime::try_from(*t).ok()),
                    etag: object.e_tag().map(strip_quotes),
                    checksum_sha256: None,
                    sha256: None,
                });
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    async fn head_inner(&self, key: &str) -> Result<ObjectInfo, Cause> {
        validate_key(key)?;
        let result = self
            .client
            .head_object()
            .bucket(self.bucket())
            .key(key)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await;
        match result {
            Ok(out) => Ok(ObjectInfo {
                sha256: whole_sha256(
                    out.metadata()
                        .and_then(|m| m.get(SHA256_METADATA))
                        .map(String::as_str),
                    out.checksum_sha256(),
                ),
                key: key.to_owned(),
                size: out
                    .content_length()
                    .and_then(|s| u64::try_from(s).ok())
                    .unwrap_or(0),
                last_modified: out
                    .last_modified()
                    .and_then(|t| std::time::SystemTime::try_from(*t).ok()),
                etag: out.e_tag().map(strip_quotes),
                checksum_sha256: out.checksum_sha256().map(str::to_owned),
            }),
            Err(e) => match service_status(&e) {
                // A HEAD answer has no body, so no real error code (the SDK names any 404
                // `NotFound`): ask the bucket whether it is the bucket or the object.
                Some((status @ (403 | 404), _)) => {
                    self.probe().await?;
                    Err(if status == 404 {
                        Cause::NotFound
                    } else {
                        from_service(&self.ctx, status, Some("AccessDenied"), "")
                    })
                }
                _ => Err(classify(&self.ctx, e)),
            },
        }
    }

    async fn get_inner(&self, key: &str, range: Option<ByteRange>) -> Result<ObjectReader, Cause> {
        validate_key(key)?;
        let mut req = self.client.get_object().bucket(self.bucket()).key(key);
        if let Some(r) = range {
            req = req.range(r.http_header());
        }
        let out = match req.send().await {
            Ok(out) => out,
            Err(e) => {
                if let (Some(r), Some((416, _))) = (range, service_status(&e)) {
                    let size = self.head_inner(key).await?.size;
                    return Err(Cause::InvalidRange {
                        start: r.start(),
                        size,
                    });
                }
                return match classify(&self.ctx, e) {
                    // Some servers (s3s-fs) say NoSuchKey for a missing bucket too.
                    Cause::NotFound => {
                        self.probe().await?;
                        Err(Cause::NotFound)
                    }
                    other => Err(other),
                };
            }
        };
        let len = out
            .content_length()
            .and_then(|s| u64::try_from(s).ok())
            .unwrap_or(0);
        // `bytes <first>-<last>/<total>` on a ranged answer.
        let ranged = out.content_range().and_then(|cr| {
            let (span, total) = cr.strip_prefix("bytes ")?.split_once('/')?;
            let first = span.split_once('-')?.0.parse::<u64>().ok()?;
            Some((first, total.parse::<u64>().ok()?))
        });
        let (offset, total) = ranged.unwrap_or((0, len));
        Ok(ObjectReader::new(
            offset,
            len,
            total,
            Box::pin(out.body.into_async_read()),
        ))
    }

    async fn delete_inner(&self, key: &str) -> Result<(), Cause> {
        validate_key(key)?;
        self.client
            .delete_object()
            .bucket(self.bucket())
            .key(key)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| classify(&self.ctx, e))
    }

    async fn presign_inner(&self, key: &str, expires_in: Duration) -> Result<String, Cause> {
        validate_key(key)?;
        let config = PresigningConfig::expires_in(expires_in)
            .map_err(|e| Cause::InvalidArgument(format!("presigned URL lifetime: {e}")))?;
        let req = self
            .client
            .get_object()
            .bucket(self.bucket())
            .key(key)
            .presigned(config)
            .await
            .map_err(|e| classify(&self.ctx, e))?;
        Ok(req.uri().to_owned())
    }
}

impl ReportStore for S3Store {
    fn describe(&self) -> String {
        format!("s3 bucket `{}` at {}", self.bucket(), self.ctx.endpoint)
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
        self.put_inner(key, body, options)
            .await
            .map_err(|source| StorageError::Put {
                key: key.to_owned(),
                store: self.describe(),
                source: source.into(),
            })
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StorageError> {
        self.list_inner(prefix)
            .await
            .map_err(|source| StorageError::List {
                prefix: prefix.to_owned(),
                store: self.describe(),
                source: source.into(),
            })
    }

    async fn head(&self, key: &str) -> Result<ObjectInfo, StorageError> {
        self.head_inner(key)
            .await
            .map_err(|source| StorageError::Head {
                key: key.to_owned(),
                store: self.describe(),
                source: source.into(),
            })
    }

    async fn get(&self, key: &str, range: Option<ByteRange>) -> Result<ObjectReader, StorageError> {
        self.get_inner(key, range)
            .await
            .map_err(|source| StorageError::Get {
                key: key.to_owned(),
                store: self.describe(),
                source: source.into(),
            })
    }

    async fn delete(&self, key: &str) -> Result<(), StorageError> {
        self.delete_inner(key)
            .await
            .map_err(|source| StorageError::Delete {
                key: key.to_owned(),
                store: self.describe(),
                source: source.into(),
            })
    }

    async fn presign_get(&self, key: &str, expires_in: Duration) -> Result<String, StorageError> {
        self.presign_inner(key, expires_in)
            .await
            .map_err(|source| StorageError::Presign {
                key: key.to_owned(),
                store: self.describe(),
                source: source.into(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::whole_sha256;

    #[test]
    fn the_whole_digest_comes_from_metadata_or_a_whole_checksum_never_a_composite() {
        let hex = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let b64 = "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=";
        assert_eq!(whole_sha256(Some(hex), None).as_deref(), Some(hex));
        assert_eq!(whole_sha256(None, Some(b64)).as_deref(), Some(hex));
        assert_eq!(
            whole_sha256(Some("not a digest"), Some(b64)).as_deref(),
            Some(hex)
        );
        assert_eq!(whole_sha256(None, Some("AAAA-3")), None);
        assert_eq!(whole_sha256(None, None), None);
    }
}
