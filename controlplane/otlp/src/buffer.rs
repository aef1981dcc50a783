//! The on-disk span buffer: per (session, collection) a directory with an active log (appended
//! and fsynced before a request is acknowledged), sealed segments waiting for conversion, and a
//! small state file (stopped or not, the next segment number). Bounded per collection and in
//! total; [`admit`] is the pure decision. Survives restarts: [`Buffer::open`] finds everything
//! again and cuts torn tails. Owns files under its root only; it never converts nor uploads.
//!
//! ```text
//!  <root>/collections/<session>/<collection>/state.json     {session, collection, stopped, next_seq}
//!                                           /active.log     frames acknowledged since the last seal
//!                                           /sealed-<n>.log a stop's (or a late flush's) spans, until stored
//! ```
//! Directory names are the sanitised ids (`nsight_storage::layout::sanitize_component`), as in
//! storage keys, with a `.<n>` suffix when another collection's ids sanitise to the same names;
//! `state.json` keeps the raw ones.

use std::{
    collections::BTreeMap,
    fs, io,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

pub use nsight_contracts::otlp::CollectionStatus;
use nsight_storage::layout::sanitize_component;
use serde::{Deserialize, Serialize};

use crate::{group::CollectionId, log::Appender};

/// Size bounds, in bytes of log (framed OTLP protobuf).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_collection_bytes: u64,
    pub max_total_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_collection_bytes: 256 << 20,
            max_total_bytes: 1 << 30,
        }
    }
}

/// Why spans were refused (the buffer is full): the client should retry after a stop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "the span buffer of collection {id} holds {held} bytes; {incoming} more would pass its \
         bound of {max} bytes (--max-collection-bytes): stop the collection to convert and free it"
    )]
    Collection {
        id: CollectionId,
        held: u64,
        incoming: u64,
        max: u64,
    },
    #[error(
        "the converter's span buffer holds {held} bytes; {incoming} more would pass its bound of \
         {max} bytes (--max-total-bytes): stop collections to convert and free them"
    )]
    Total { held: u64, incoming: u64, max: u64 },
}

/// Whether appending `incoming` bytes (per collection: id, bytes held, bytes to add) fits.
pub fn admit(
    limits: &Limits,
    total_held: u64,
    incoming: &[(&CollectionId, u64, u64)],
) -> Result<(), Refusal> {
    for (id, held, add) in incoming {
        if held + add > limits.max_collection_bytes {
            return Err(Refusal::Collection {
                id: (*id).clone(),
                held: *held,
                incoming: *add,
                max: limits.max_collection_bytes,
            });
        }
    }
    let add: u64 = incoming.iter().map(|(_, _, a)| a).sum();
    if total_held + add > limits.max_total_bytes {
        return Err(Refusal::Total {
            held: total_held,
            incoming: add,
            max: limits.max_total_bytes,
        });
    }
    Ok(())
}

/// A buffer operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum BufferError {
    #[error(transparent)]
    Full(#[from] Refusal),
    #[error("reading the span buffer at {}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("writing the span buffer at {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn write_err(path: &Path) -> impl FnOnce(io::Error) -> BufferError + '_ {
    move |source| BufferError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// A collection's persisted state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub session: String,
    pub collection: String,
    /// Stop was asked: spans that arrive later are converted automatically.
    pub stopped: bool,
    /// The number of the next sealed segment.
    pub next_seq: u64,
}

#[derive(Debug)]
struct Entry {
    dir: PathBuf,
    state: State,
    active: Option<Appender>,
    sealed: BTreeMap<u64, u64>,
    last_append: Option<Instant>,
}

impl Entry {
    fn held(&self) -> u64 {
        self.active.as_ref().map_or(0, Appender::len) + self.sealed.values().sum::<u64>()
    }

    fn active_path(&self) -> PathBuf {
        self.dir.join("active.log")
    }

    fn sealed_path(&self, seq: u64) -> PathBuf {
        self.dir.join(format!("sealed-{seq}.log"))
    }

    fn save_state(&self) -> Result<(), BufferError> {
        let path = self.dir.join("state.json");
        let tmp = self.dir.join("state.json.tmp");
        let bytes = serde_json::to_vec(&self.state).map_err(io::Error::other);
        let write = || -> io::Result<()> {
            let mut f = fs::File::create(&tmp)?;
            io::Write::write_all(&mut f, &bytes?)?;
            f.sync_all()?;
            fs::rename(&tmp, &path)?;
            sync_dir(&self.dir)
        };
        write().map_err(write_err(&path))
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// All collections' buffers under one root.
#[derive(Debug)]
pub struct Buffer {
    root: PathBuf,
    limits: Limits,
    entries: BTreeMap<CollectionId, Entry>,
}

impl Buffer {
    /// Opens the buffer at `root` (creating it), finding every collection left there.
    pub fn open(root: &Path, limits: Limits) -> Result<Self, BufferError> {
        let open_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| BufferError::Open { path, source }
        };
        let base = root.join("collections");
        fs::create_dir_all(&base).map_err(open_err(&base))?;
        let mut entries = BTreeMap::new();
        for session in fs::read_dir(&base).map_err(open_err(&base))? {
            let session = session.map_err(open_err(&base))?.path();
            if !session.is_dir() {
                continue;
            }
            for coll in fs::read_dir(&session).map_err(open_err(&session))? {
                let dir = coll.map_err(open_err(&session))?.path();
                let state_path = dir.join("state.json");
                let Ok(bytes) = fs::read(&state_path) else {
                    continue;
                };
                let state: State = serde_json::from_slice(&bytes)
                    .map_err(|e| open_err(&state_path)(io::Error::other(e)))?;
                let mut entry = Entry {
                    dir: dir.clone(),
                    state,
                    active: None,
                    sealed: BTreeMap::new(),
                    last_append: None,
                };
                for file in fs::read_dir(&dir).map_err(open_err(&dir))? {
                    let file = file.map_err(open_err(&dir))?;
                    let name = file.file_name().to_string_lossy().into_owned();
                    let seq = name
                        .strip_prefix("sealed-")
                        .and_then(|n| n.strip_suffix(".log"))
                        .and_then(|n| n.parse::<u64>().ok());
                    if let Some(seq) = seq {
                        let len = file.metadata().map_err(open_err(&dir))?.len();
                        entry.sealed.insert(seq, len);
                    }
                }
                let active = entry.active_path();
                if active.exists() {
                    let (log, scanned) = Appender::open(&active).map_err(open_err(&active))?;
                    if scanned.torn > 0 {
                        tracing::warn!(path = %active.display(), torn = scanned.torn, "cut a torn tail (never acknowledged)");
                    }
                    entry.active = Some(log);
                }
                let id = CollectionId {
                    session: entry.state.session.clone(),
                    collection: entry.state.collection.clone(),
                };
                entries.insert(id, entry);
            }
        }
        Ok(Self {
            root: root.to_path_buf(),
            limits,
            entries,
        })
    }

    /// Bytes held in total.
    pub fn held(&self) -> u64 {
        self.entries.values().map(Entry::held).sum()
    }

    fn entry(&mut self, id: &CollectionId) -> Result<&mut Entry, BufferError> {
        if !self.entries.contains_key(id) {
            // Two ids may sanitise to the same names ("a b", "a-b"): the second gets a suffix,
            // so no two collections ever share a log.
            let base = self
                .root
                .join("collections")
                .join(sanitize_component(&id.session));
            let name = sanitize_component(&id.collection);
            let dir = (0u64..)
                .map(|n| match n {
                    0 => base.join(&name),
                    n => base.join(format!("{name}.{n}")),
                })
                .find(|d| !self.entries.values().any(|e| &e.dir == d))
                .unwrap_or_else(|| base.join(&name));
            fs::create_dir_all(&dir).map_err(write_err(&dir))?;
            let entry = Entry {
                dir,
                state: State {
                    session: id.session.clone(),
                    collection: id.collection.clone(),
                    stopped: false,
                    next_seq: 0,
                },
                active: None,
                sealed: BTreeMap::new(),
                last_append: None,
            };
            entry.save_state()?;
            self.entries.insert(id.clone(), entry);
        }
        self.entries
            .get_mut(id)
            .ok_or_else(|| write_err(Path::new("collections"))(io::Error::other("vanished")))
    }

    /// Appends each collection's payload and makes all of them durable; nothing is appended when
    /// one does not fit. On a write error the logs are cut back to where they were.
    pub fn append(&mut self, parts: &[(CollectionId, Vec<u8>)]) -> Result<(), BufferError> {
        let incoming: Vec<(&CollectionId, u64, u64)> = parts
            .iter()
            .map(|(id, bytes)| {
                let held = self.entries.get(id).map_or(0, Entry::held);
                (id, held, (bytes.len() + crate::log::HEADER) as u64)
            })
            .collect();
        admit(&self.limits, self.held(), &incoming)?;
        let mut done: Vec<(CollectionId, u64)> = Vec::new();
        let result = (|| {
            for (id, bytes) in parts {
                let entry = self.entry(id)?;
                if entry.active.is_none() {
                    let path = entry.active_path();
                    let (log, _) = Appender::open(&path).map_err(write_err(&path))?;
                    entry.active = Some(log);
                }
                let path = entry.active_path();
                let Some(log) = entry.active.as_mut() else {
                    continue;
                };
                done.push((id.clone(), log.len()));
                log.append(bytes).map_err(write_err(&path))?;
                log.sync().map_err(write_err(&path))?;
                entry.last_append = Some(Instant::now());
            }
            Ok(())
        })();
        if result.is_err() {
            for (id, len) in done {
                if let Some(log) = self.entries.get_mut(&id).and_then(|e| e.active.as_mut()) {
                    log.rollback(len);
                }
            }
        }
        result
    }

    /// Marks the collection stopped (creating it when no span came yet).
    pub fn stop(&mut self, id: &CollectionId) -> Result<(), BufferError> {
        let entry = self.entry(id)?;
        if !entry.state.stopped {
            entry.state.stopped = true;
            entry.save_state()?;
        }
        Ok(())
    }

    /// Whether the collection is known (spans came, or a stop).
    pub fn contains(&self, id: &CollectionId) -> bool {
        self.entries.contains_key(id)
    }

    /// Seals the active log (when it holds anything) as the next segment; returns every sealed
    /// segment waiting, oldest first: (number, path).
    pub fn seal(&mut self, id: &CollectionId) -> Result<Vec<(u64, PathBuf)>, BufferError> {
        let Some(entry) = self.entries.get_mut(id) else {
            return Ok(Vec::new());
        };
        if entry.active.as_ref().is_some_and(|l| !l.is_empty()) {
            let seq = entry.state.next_seq;
            // The number is taken before the rename: a crash in between leaves a gap, never a
            // reused number (which would overwrite a stored report).
            entry.state.next_seq += 1;
            entry.save_state()?;
            let (from, to) = (entry.active_path(), entry.sealed_path(seq));
            let len = entry.active.take().map_or(0, |l| l.len());
            fs::rename(&from, &to).map_err(write_err(&to))?;
            sync_dir(&entry.dir).map_err(write_err(&entry.dir))?;
            entry.sealed.insert(seq, len);
        }
        Ok(entry
            .sealed
            .keys()
            .map(|&seq| (seq, entry.sealed_path(seq)))
            .collect())
    }

    /// Forgets a sealed segment once its reports are spooled for upload.
    pub fn remove_sealed(&mut self, id: &CollectionId, seq: u64) -> Result<(), BufferError> {
        if let Some(entry) = self.entries.get_mut(id) {
            let path = entry.sealed_path(seq);
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(write_err(&path)(e)),
            }
            entry.sealed.remove(&seq);
        }
        Ok(())
    }

    /// Collections with spans to convert now: sealed segments (a stop interrupted by a restart),
    /// or a stopped collection whose late spans have been quiet for `linger`.
    pub fn due(&self, linger: Duration) -> Vec<CollectionId> {
        self.entries
            .iter()
            .filter(|(_, e)| {
                !e.sealed.is_empty()
                    || (e.state.stopped
                        && e.active.as_ref().is_some_and(|l| !l.is_empty())
                        && e.last_append.is_none_or(|t| t.elapsed() >= linger))
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Every collection's state.
    pub fn list(&self) -> Vec<CollectionStatus> {
        self.entries
            .values()
            .map(|e| CollectionStatus {
                session: e.state.session.clone(),
                collection: e.state.collection.clone(),
                stopped: e.state.stopped,
                active_bytes: e.active.as_ref().map_or(0, Appender::len),
                sealed_bytes: e.sealed.values().sum(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
