//! The timeline cache (I/O shell around `crate::timeline`): a report is fetched from storage
//! and indexed once per version (its key and ETag), by the first request that needs it; others
//! wait for that one. The newest indexes are kept in memory up to a count and a byte budget;
//! each is also saved beside its fetched report (`<state>/timeline/`), so a restarted service
//! reads the saved index instead of the report.
//!
//! ```text
//!  GET /timeline?report=K ──head K (ETag)──> cache[K@etag] ── hit ──> Arc<Loaded>
//!                                                  └─ miss: <hash>.index saved? load it
//!                                                     else download <hash>.sqlite, index, save
//!                                                     (spawn_blocking); evict the oldest
//! ```

use std::{
    collections::VecDeque,
    path::PathBuf,
    sync::{Arc, Mutex, PoisonError},
};

use nsight_storage::{
    download::download_to_file,
    layout::{ReportKey, ReportKind},
    Cause, ReportStore, Store,
};
use tokio::sync::OnceCell;

use crate::timeline::{self, load, Index};

use super::jobs::ServiceError;

/// Indexes kept at most.
pub const MAX_ENTRIES: usize = 8;
/// Bytes of indexes kept at most (the newest is always kept).
pub const MAX_BYTES: usize = 2 << 30;

/// One indexed report and the file it was read from (event details query it).
#[derive(Debug)]
pub struct Loaded {
    pub key: String,
    pub etag: String,
    pub path: PathBuf,
    pub index: Index,
}

type Slot = Arc<OnceCell<Arc<Loaded>>>;

/// The cache; one per service.
#[derive(Debug)]
pub struct Timelines {
    dir: PathBuf,
    /// Oldest first: `(key@etag, slot)`.
    entries: Mutex<VecDeque<(String, Slot)>>,
}

fn file_name(id: &str) -> String {
    // Keys are checked report keys; a digest keeps the file name short and flat.
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    id.hash(&mut h);
    format!("{:016x}.sqlite", h.finish())
}

impl Timelines {
    /// The cache over `dir`, where files of earlier runs beyond the newest
    /// [`MAX_ENTRIES`] reports are deleted.
    pub fn new(dir: PathBuf) -> Self {
        prune(&dir);
        Timelines {
            dir,
            entries: Mutex::new(VecDeque::new()),
        }
    }

    fn slot(&self, id: &str) -> Slot {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pos) = entries.iter().position(|(k, _)| k == id) {
            // Newest last.
            if let Some(entry) = entries.remove(pos) {
                let slot = entry.1.clone();
                entries.push_back(entry);
                return slot;
            }
        }
        let slot = Slot::default();
        entries.push_back((id.to_owned(), slot.clone()));
        slot
    }

    /// Drops the oldest indexes beyond the count and byte budgets, and a slot whose build
    /// failed (so that a later request tries again).
    fn evict(&self) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut bytes = 0usize;
        let mut keep = VecDeque::new();
        while let Some((id, slot)) = entries.pop_back() {
            let size = slot.get().map_or(0, |l| l.index.heap_bytes());
            let building = slot.get().is_none() && Arc::strong_count(&slot) > 1;
            let first = keep.is_empty();
            if building
                || (slot.get().is_some()
                    && (first || (keep.len() < MAX_ENTRIES && bytes + size <= MAX_BYTES)))
            {
                bytes += size;
                keep.push_front((id, slot));
            } else if let Some(l) = slot.get() {
                let _ = std::fs::remove_file(&l.path);
                let _ = std::fs::remove_file(l.path.with_extension("index"));
            }
        }
        *entries = keep;
    }

    /// The index of report `key`, built if needed.
    pub async fn get(&self, store: &Store, key: &str) -> Result<Arc<Loaded>, ServiceError> {
        let parsed = ReportKey::parse(key).map_err(|e| {
            ServiceError::Invalid(format!(
                "`{key}` is not a report key (<tag>/<session>/<collection>/<file>.sqlite): {e}"
            ))
        })?;
        if parsed.kind != ReportKind::Sqlite {
            return Err(ServiceError::Invalid(format!(
                "`{key}` is not an SQLite export; the timeline reads the .sqlite report beside it"
            )));
        }
        let info = store.head(key).await.map_err(|e| match e.cause() {
            Cause::NotFound => ServiceError::NotFound(format!("no report `{key}` in storage")),
            _ => ServiceError::Unavailable(format!("cannot read storage: {}", e.chain())),
        })?;
        let etag = info.etag.unwrap_or_else(|| format!("size-{}", info.size));
        let id = format!("{key}@{etag}");
        let slot = self.slot(&id);
        let path = self.dir.join(file_name(&id));
        let loaded = slot
            .get_or_try_init(|| async {
                let saved = path.with_extension("index");
                if path.exists() && saved.exists() {
                    let file = saved.clone();
                    match tokio::task::spawn_blocking(move || timeline::saved::load(&file)).await {
                        Ok(Ok(index)) => {
                            tracing::info!(report = %key, "timeline index read from disk");
                            return Ok(Arc::new(Loaded {
                                key: key.to_owned(),
                                etag: etag.clone(),
                                path: path.clone(),
                                index,
                            }));
                        }
                        Ok(Err(e)) => {
                            tracing::warn!(report = %key, error = %e, "saved timeline index unreadable; indexing again");
                        }
                        Err(e) => tracing::warn!(error = %e, "reading the saved index stopped"),
                    }
                }
                download_to_file(store, key, &path).await.map_err(|e| {
                    ServiceError::Unavailable(format!("cannot fetch the report: {}", e.chain()))
                })?;
                // Indexed and saved in one blocking task; a failed save only costs a re-index
                // after a restart.
                let (file, saved_to) = (path.clone(), saved.clone());
                let (index, written) = tokio::task::spawn_blocking(move || {
                    load::load(&file).map(|index| {
                        let written = timeline::saved::save(&index, &saved_to);
                        (index, written)
                    })
                })
                .await
                .map_err(|e| ServiceError::Unavailable(format!("indexing stopped: {e}")))?
                .map_err(|e| ServiceError::Invalid(format!("`{key}`: {e}")))?;
                tracing::info!(report = %key, tracks = index.tracks.len(), "timeline indexed");
                if let Err(e) = written {
                    tracing::warn!(report = %key, error = %e, "the timeline index was not saved; a restart indexes again");
                }
                Ok::<_, ServiceError>(Arc::new(Loaded {
                    key: key.to_owned(),
                    etag: etag.clone(),
                    path: path.clone(),
                    index,
                }))
            })
            .await
            .cloned();
        drop(slot);
        self.evict();
        loaded
    }
}

/// Deletes the oldest files of `dir` beyond two per kept report (its `.sqlite` and `.index`).
fn prune(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    for (_, path) in files.into_iter().skip(2 * MAX_ENTRIES) {
        let _ = std::fs::remove_file(path);
    }
}
