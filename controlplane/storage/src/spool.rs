//! The uploader's spool directory: reports handed over for upload and not yet confirmed stored.
//!
//! ```text
//! <spool>/.lock          held (flock) by the one uploader using the directory
//! <spool>/<id>.json      manifest {key, size, sha256, spooled_unix_ms}: written first, fsynced
//! <spool>/<id>.data      the report, moved in (rename; copy+fsync across file systems)
//! ```
//!
//! A report is pending when both files exist. The manifest is written before the data moves in,
//! so a crash leaves either nothing of the report in the spool (the caller still has its file)
//! or a complete pending pair; a manifest without data is dropped on open. Removal deletes the
//! data first. Nothing here talks to storage.

use std::{
    io,
    path::{Path, PathBuf},
    time::{SystemTime, UNIX_EPOCH},
};

use serde::{Deserialize, Serialize};

use crate::digest;

const LOCK_FILE: &str = ".lock";

/// What the spool knows about one report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub key: String,
    pub size: u64,
    /// Hex SHA-256 of the data.
    pub sha256: String,
    pub spooled_unix_ms: u64,
}

/// A pending report: its manifest and where its files are.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub manifest: Manifest,
    pub data: PathBuf,
    pub manifest_path: PathBuf,
}

/// An open spool directory (exclusively locked for the value's lifetime).
#[derive(Debug)]
pub(crate) struct Spool {
    dir: PathBuf,
    _lock: std::fs::File,
}

/// Why a spool could not be opened.
#[derive(Debug)]
pub(crate) enum OpenError {
    Locked,
    Io(io::Error),
}

impl Spool {
    pub fn open(dir: &Path) -> Result<Self, OpenError> {
        crate::private::create_dir_all(dir).map_err(OpenError::Io)?;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))
            .map_err(OpenError::Io)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(OpenError::Locked),
            Err(std::fs::TryLockError::Error(e)) => return Err(OpenError::Io(e)),
        }
        let spool = Self {
            dir: dir.to_path_buf(),
            _lock: lock,
        };
        spool.clean().map_err(OpenError::Io)?;
        Ok(spool)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes leftovers of interrupted spooling: temp files and manifests without data.
    fn clean(&self) -> io::Result<()> {
        for entry in std::fs::read_dir(&self.dir)? {
            let path = entry?.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if name.ends_with(".tmp") {
                std::fs::remove_file(&path)?;
            } else if name.ends_with(".json") && !path.with_extension("data").exists() {
                tracing::info!(manifest = %path.display(), "dropping a manifest whose report never moved in");
                std::fs::remove_file(&path)?;
            }
        }
        Ok(())
    }

    /// Moves `src` into the spool under a manifest for `key`.
    pub async fn add(&self, src: &Path, key: &str) -> io::Result<Pending> {
        // Names sort in spooling order (nanoseconds first), so reports spooled within the same
        // millisecond are still uploaded oldest first.
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let id = format!("{nanos:024}-{}", uuid::Uuid::new_v4());
        let (size, sha256) = digest::hash_file(src).await?;
        let manifest = Manifest {
            key: key.to_owned(),
            size,
            sha256,
            spooled_unix_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        };
        let manifest_path = self.dir.join(format!("{id}.json"));
        let data = self.dir.join(format!("{id}.data"));
        let json = serde_json::to_vec_pretty(&manifest).map_err(io::Error::other)?;
        write_synced(&manifest_path, &json).await?;
        if let Err(e) = move_file(src, &data).await {
            let _ = tokio::fs::remove_file(&manifest_path).await;
            return Err(e);
        }
        sync_dir(&self.dir).await?;
        Ok(Pending {
            manifest,
            data,
            manifest_path,
        })
    }

    /// Pending reports, oldest first.
    pub fn pending(&self) -> io::Result<Vec<Pending>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let path = entry?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let data = path.with_extension("data");
            if !data.exists() {
                continue;
            }
            let text = std::fs::read(&path)?;
            match serde_json::from_slice::<Manifest>(&text) {
                Ok(manifest) => out.push(Pending {
                    manifest,
                    data,
                    manifest_path: path,
                }),
                Err(e) => {
                    tracing::warn!(manifest = %path.display(), error = %e, "unreadable spool manifest: left in place");
                }
            }
        }
        out.sort_by(|a, b| {
            (a.manifest.spooled_unix_ms, &a.manifest_path)
                .cmp(&(b.manifest.spooled_unix_ms, &b.manifest_path))
        });
        Ok(out)
    }

    /// Forgets a report once it is safely stored.
    pub async fn remove(&self, pending: &Pending) -> io::Result<()> {
        tokio::fs::remove_file(&pending.data).await?;
        tokio::fs::remove_file(&pending.manifest_path).await?;
        sync_dir(&self.dir).await
    }
}

async fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use tokio::io::AsyncWriteExt as _;
    let tmp = path.with_extension("json.tmp");
    let mut f = crate::private::create_file(&tmp).await?;
    f.write_all(bytes).await?;
    f.sync_all().await?;
    tokio::fs::rename(&tmp, path).await
}

/// rename, or copy + fsync + rename + delete the source when `src` is on another file system.
async fn move_file(src: &Path, dest: &Path) -> io::Result<()> {
    match tokio::fs::rename(src, dest).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::CrossesDevices => {
            let tmp = dest.with_extension("data.tmp");
            tokio::fs::copy(src, &tmp).await?;
            tokio::fs::File::open(&tmp).await?.sync_all().await?;
            tokio::fs::rename(&tmp, dest).await?;
            tokio::fs::remove_file(src).await
        }
        Err(e) => Err(e),
    }
}

async fn sync_dir(dir: &Path) -> io::Result<()> {
    tokio::fs::File::open(dir).await?.sync_all().await
}
