//! Resumable download of one object to a file with bounded memory: bytes stream into
//! `<dest>.part`; an interrupted download resumes with a ranged GET from the partial file's
//! length, provided the object's entity tag is unchanged (kept in `<dest>.part.etag`); the file
//! is renamed to `dest` only when complete and synced.
//!
//! Owns only the destination's partial files; choosing destinations is [`crate::layout`]'s job.

use std::{
    io,
    path::{Path, PathBuf},
};

use tokio::io::AsyncWriteExt;

use crate::{
    error::{Cause, StorageError},
    ByteRange, ReportStore,
};

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Downloads `key` to `dest` (creating parent directories), resuming a previous partial
/// download. Returns the bytes fetched by this call.
pub async fn download_to_file<S: ReportStore>(
    store: &S,
    key: &str,
    dest: &Path,
) -> Result<u64, StorageError> {
    let io_err = |path: &Path, source: io::Error| StorageError::Get {
        key: key.to_owned(),
        store: store.describe(),
        source: Box::new(Cause::Io {
            path: path.to_path_buf(),
            source,
        }),
    };
    let part = with_suffix(dest, ".part");
    let etag_file = with_suffix(dest, ".part.etag");
    let info = store.head(key).await?;
    let etag = info.etag.clone().unwrap_or_default();
    if let Some(parent) = dest.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| io_err(parent, e))?;
    }
    let same_object = tokio::fs::read_to_string(&etag_file)
        .await
        .is_ok_and(|saved| !etag.is_empty() && saved == etag);
    let mut have = match tokio::fs::metadata(&part).await {
        Ok(m) if same_object => m.len(),
        _ => 0,
    };
    if have > info.size {
        have = 0;
    }
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(have == 0)
        .append(have > 0)
        .open(&part)
        .await
        .map_err(|e| io_err(&part, e))?;
    tokio::fs::write(&etag_file, &etag)
        .await
        .map_err(|e| io_err(&etag_file, e))?;
    let mut fetched = 0;
    if have < info.size {
        let range = (have > 0).then(|| ByteRange::from_offset(have));
        let mut reader = store.get(key, range).await?;
        fetched = tokio::io::copy(&mut reader, &mut file)
            .await
            .map_err(|e| io_err(&part, e))?;
    }
    file.flush().await.map_err(|e| io_err(&part, e))?;
    file.sync_all().await.map_err(|e| io_err(&part, e))?;
    let len = file.metadata().await.map_err(|e| io_err(&part, e))?.len();
    if len != info.size {
        return Err(io_err(
            &part,
            io::Error::other(format!(
                "the download has {len} bytes, the object {}: run it again to resume",
                info.size
            )),
        ));
    }
    tokio::fs::rename(&part, dest)
        .await
        .map_err(|e| io_err(dest, e))?;
    let _ = tokio::fs::remove_file(&etag_file).await;
    Ok(fetched)
}
