//! [`LocalStore`]: reports in a directory, for the local no-cluster mode and `storage_type:
//! local`. Object `a/b/c` is the file `<root>/a/b/c`.
//!
//! ```text
//! put: body --> <root>/.nsight-staging/<uuid>.part --fsync--> rename --> <root>/<key>, fsync dir
//! ```
//!
//! A half-written object is never listed: writes go to the staging directory on the same file
//! system and are renamed into place only once complete, synced, and as long on disk as the
//! bytes received. Every write, flush and sync error fails the put (a full disk as
//! [`Cause::NoSpace`]) and removes the staging file. Keys are validated
//! ([`crate::key::validate_key`]) and every resolved path is checked to stay under the root
//! (a symlink inside the root cannot lead out of it). It owns nothing outside its root.

use std::{
    io,
    path::{Path, PathBuf},
    time::{Duration, UNIX_EPOCH},
};

use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

use crate::{
    error::{Cause, StorageError},
    key::{validate_key, validate_prefix, RESERVED_STAGING_DIR},
    ByteRange, ObjectInfo, ObjectReader, PutOptions, PutOutcome, ReportStore,
};

/// Staging files older than this are left over from a crash and removed on open.
const STALE_STAGING: Duration = Duration::from_secs(24 * 3600);
const CHUNK: usize = 256 * 1024;

/// A directory of reports.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
    /// Signs download URLs for [`crate::object_server`]; without it there are none.
    signer: Option<std::sync::Arc<crate::signed_url::UrlSigner>>,
}

fn io_cause(path: &Path, source: io::Error) -> Cause {
    if source.kind() == io::ErrorKind::NotFound {
        return Cause::NotFound;
    }
    Cause::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// An error while putting `key`: a full file system (or quota) is [`Cause::NoSpace`].
fn put_cause(key: &str, path: &Path, source: io::Error) -> Cause {
    if matches!(
        source.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    ) {
        return Cause::NoSpace {
            key: key.to_owned(),
            path: path.to_path_buf(),
            source,
        };
    }
    io_cause(path, source)
}

impl LocalStore {
    /// Download URLs signed by `signer`, served by [`crate::object_server`].
    pub fn with_url_signer(mut self, signer: std::sync::Arc<crate::signed_url::UrlSigner>) -> Self {
        self.signer = Some(signer);
        self
    }

    /// Opens (creating if needed) the store at `root`, and removes stale staging files.
    pub fn open(root: &Path) -> Result<Self, StorageError> {
        let open_err = |path: &Path, source| StorageError::Open {
            source: Box::new(Cause::Io {
                path: path.to_path_buf(),
                source,
            }),
        };
        crate::private::create_dir_all(&root.join(RESERVED_STAGING_DIR))
            .map_err(|e| open_err(root, e))?;
        let root = root.canonicalize().map_err(|e| open_err(root, e))?;
        let staging = root.join(RESERVED_STAGING_DIR);
        if let Ok(entries) = std::fs::read_dir(&staging) {
            for entry in entries.flatten() {
                let stale = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|m| m.elapsed().ok())
                    .is_some_and(|age| age > STALE_STAGING);
                if stale {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        Ok(Self { root, signer: None })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file of `key`, after checking the key and that its existing parent stays under root.
    fn path_of(&self, key: &str) -> Result<PathBuf, Cause> {
        validate_key(key)?;
        let path = self.root.join(key);
        let mut ancestor = path.parent();
        while let Some(dir) = ancestor {
            if let Ok(real) = dir.canonicalize() {
                if !real.starts_with(&self.root) {
                    return Err(Cause::InvalidKey {
                        reason: "the key leads outside the store's root through a symlink",
                    });
                }
                break;
            }
            ancestor = dir.parent();
        }
        Ok(path)
    }

    async fn put_inner<R>(
        &self,
        key: &str,
        mut body: R,
        options: &PutOptions,
    ) -> Result<PutOutcome, Cause>
    where
        R: AsyncRead + Unpin + Send,
    {
        let dest = self.path_of(key)?;
        let tmp = self
            .root
            .join(RESERVED_STAGING_DIR)
            .join(format!("{}.part", uuid::Uuid::new_v4()));
        let written = async {
            let mut file = crate::private::create_file(&tmp)
                .await
                .map_err(|e| put_cause(key, &tmp, e))?;
            let mut hasher = Sha256::new();
            let mut size = 0u64;
            let mut buf = vec![0u8; CHUNK];
            loop {
                let n = body.read(&mut buf).await.map_err(Cause::Source)?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                file.write_all(&buf[..n])
                    .await
                    .map_err(|e| put_cause(key, &tmp, e))?;
                size += n as u64;
            }
            let sha256 = hex::encode(hasher.finalize());
            options.check(size, &sha256)?;
            // tokio's File writes on a blocking thread and reports a write's error only at the
            // next write or flush; `sync_all` alone would drop the last one (a full disk then
            // published a short file).
            file.flush().await.map_err(|e| put_cause(key, &tmp, e))?;
            file.sync_all().await.map_err(|e| put_cause(key, &tmp, e))?;
            let on_disk = file
                .metadata()
                .await
                .map_err(|e| put_cause(key, &tmp, e))?
                .len();
            if on_disk != size {
                return Err(Cause::ShortWrite {
                    key: key.to_owned(),
                    path: tmp.clone(),
                    received: size,
                    on_disk,
                });
            }
            drop(file);
            let parent = dest.parent().unwrap_or(&self.root);
            crate::private::create_dir_all_async(parent)
                .await
                .map_err(|e| put_cause(key, parent, e))?;
            tokio::fs::rename(&tmp, &dest)
                .await
                .map_err(|e| put_cause(key, &dest, e))?;
            sync_dir(parent)
                .await
                .map_err(|e| put_cause(key, parent, e))?;
            Ok::<_, Cause>((size, sha256))
        }
        .await;
        let (size, sha256) = match written {
            Ok(v) => v,
            Err(e) => {
                let _ = tokio::fs::remove_file(&tmp).await;
                return Err(e);
            }
        };
        let info = self.head_inner(key).await?;
        Ok(PutOutcome {
            key: key.to_owned(),
            size,
            sha256,
            parts: 0,
            composite_sha256: None,
            etag: info.etag,
        })
    }

    async fn head_inner(&self, key: &str) -> Result<ObjectInfo, Cause> {
        let path = self.path_of(key)?;
        let meta = tokio::fs::symlink_metadata(&path)
            .await
            .map_err(|e| io_cause(&path, e))?;
        if !meta.is_file() {
            return Err(Cause::NotFound);
        }
        Ok(info(key.to_owned(), &meta))
    }

    async fn get_inner(&self, key: &str, range: Option<ByteRange>) -> Result<ObjectReader, Cause> {
        let path = self.path_of(key)?;
        // Objects are regular files; a symlink planted in the root is not followed.
        let link = tokio::fs::symlink_metadata(&path)
            .await
            .map_err(|e| io_cause(&path, e))?;
        if !link.is_file() {
            return Err(Cause::NotFound);
        }
        let mut file = tokio::fs::File::open(&path)
            .await
            .map_err(|e| io_cause(&path, e))?;
        let meta = file.metadata().await.map_err(|e| io_cause(&path, e))?;
        if !meta.is_file() {
            return Err(Cause::NotFound);
        }
        let size = meta.len();
        let (offset, len) = match range {
            None => (0, size),
            Some(r) if r.start() >= size && !(r.start() == 0 && size == 0) => {
                return Err(Cause::InvalidRange {
                    start: r.start(),
                    size,
                })
            }
            Some(r) => (r.start(), r.len_in(size)),
        };
        file.seek(io::SeekFrom::Start(offset))
            .await
            .map_err(|e| io_cause(&path, e))?;
        Ok(ObjectReader::new(
            offset,
            len,
            size,
            Box::pin(file.take(len)),
        ))
    }

    async fn delete_inner(&self, key: &str) -> Result<(), Cause> {
        let path = self.path_of(key)?;
        match tokio::fs::remove_file(&path).await {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_cause(&path, e)),
        }
        // Prune directories the delete emptied, up to (not including) the root.
        let mut dir = path.parent();
        while let Some(d) = dir {
            if d == self.root || tokio::fs::remove_dir(d).await.is_err() {
                break;
            }
            dir = d.parent();
        }
        Ok(())
    }

    fn list_blocking(&self, prefix: &str) -> Result<Vec<ObjectInfo>, Cause> {
        validate_prefix(prefix)?;
        // Start at the deepest directory the prefix names.
        let start_rel = prefix.rsplit_once('/').map_or("", |(dir, _)| dir);
        let start = self.root.join(start_rel);
        let mut out = Vec::new();
        let mut stack = vec![start];
        while let Some(dir) = stack.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_cause(&dir, e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| io_cause(&dir, e))?;
                let path = entry.path();
                let Ok(rel) = path.strip_prefix(&self.root) else {
                    continue;
                };
                let Some(key) = rel.to_str().map(str::to_owned) else {
                    continue; // not UTF-8: not an object this store wrote
                };
                let Ok(file_type) = entry.file_type() else {
                    continue;
                };
                if file_type.is_dir() {
                    if key != RESERVED_STAGING_DIR {
                        stack.push(path);
                    }
                } else if file_type.is_file() && key.starts_with(prefix) {
                    if let Ok(meta) = entry.metadata() {
                        out.push(info(key, &meta));
                    }
                }
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}

fn info(key: String, meta: &std::fs::Metadata) -> ObjectInfo {
    let modified = meta.modified().ok();
    let nanos = modified
        .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    ObjectInfo {
        key,
        size: meta.len(),
        last_modified: modified,
        etag: Some(format!("{:x}-{nanos:x}", meta.len())),
        checksum_sha256: None,
        sha256: None,
    }
}

/// fsync a directory so a rename in it survives a crash.
async fn sync_dir(dir: &Path) -> io::Result<()> {
    tokio::fs::File::open(dir).await?.sync_all().await
}

impl ReportStore for LocalStore {
    fn describe(&self) -> String {
        format!("local store {}", self.root.display())
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
        let this = self.clone();
        let owned = prefix.to_owned();
        let listed = tokio::task::spawn_blocking(move || this.list_blocking(&owned))
            .await
            .unwrap_or_else(|e| Err(Cause::Source(io::Error::other(e))));
        listed.map_err(|source| StorageError::List {
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
        if let Some(signer) = &self.signer {
            validate_key(key).map_err(|source| StorageError::Presign {
                key: key.to_owned(),
                store: self.describe(),
                source: Box::new(source),
            })?;
            return Ok(signer.sign(key, expires_in, std::time::SystemTime::now()));
        }
        Err(StorageError::Presign {
            key: key.to_owned(),
            store: self.describe(),
            source: Box::new(Cause::NoPresignedUrls {
                root: self.root.clone(),
            }),
        })
    }
}

#[cfg(test)]
mod tests;
