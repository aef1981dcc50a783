//! Resumable ranged downloads, the pure part shared by the storage crate's downloader and the
//! CLI's: the `<dest>.part.state` record (etag, size, bytes done from the start, one per line),
//! the ranges still to fetch, and how far the finished prefix reaches.

use std::collections::BTreeSet;

/// Where an interrupted download stopped (the contents of `<dest>.part.state`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// The object's entity tag when the download began: a changed object starts over.
    pub etag: String,
    pub size: u64,
    /// Bytes finished contiguously from the start.
    pub done: u64,
}

impl State {
    pub fn render(&self) -> String {
        format!("{}\n{}\n{}\n", self.etag, self.size, self.done)
    }

    pub fn parse(text: &str) -> Option<Self> {
        let mut lines = text.lines();
        let etag = lines.next()?.to_owned();
        let size = lines.next()?.parse().ok()?;
        let done = lines.next()?.parse().ok()?;
        Some(Self { etag, size, done })
    }
}

/// The ranges still to fetch: `[done, size)` in chunks of `chunk` bytes.
pub fn plan(done: u64, size: u64, chunk: u64) -> Vec<(u64, u64)> {
    let chunk = chunk.max(1);
    let mut out = Vec::new();
    let mut start = done;
    while start < size {
        let end = size.min(start.saturating_add(chunk));
        out.push((start, end));
        start = end;
    }
    out
}

/// The first byte not yet covered by finished ranges, given the ranges finished so far (by start
/// offset) and the ranges' ends.
pub fn advance(mut prefix: u64, finished: &mut BTreeSet<(u64, u64)>) -> u64 {
    while let Some(&(start, end)) = finished.first() {
        if start != prefix {
            break;
        }
        finished.pop_first();
        prefix = end;
    }
    prefix
}
