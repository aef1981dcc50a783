//! The timeline index of one report (pure): tracks with their events as columns, numbered by
//! start time, packed into rows that do not overlap, and a level-of-detail pyramid per row
//! ([`super::pyramid`]). Built once from [`TrackSource`]s (what `load` read from SQLite).
//!
//! ```text
//!  TrackSource{kind, label, parent, events: [RawEvent]} ──Index::build──> Index
//!     sort by (start, longest first) = event numbers │ greedy row packing │ pyramid per row
//!  Index::tile(track, level, index) ──> Tile     Index::range(start, end, tracks) ──> RangeSummary
//! ```

use std::collections::HashMap;

use nsight_contracts::timeline::{NameStats, RangeSummary, Tile, Track, TrackKind};

use super::pyramid::{self, Row};

/// Rows a track may use; events that would need more share the last row (drawn overlapping).
pub const MAX_ROWS: usize = 64;

/// Which table an event came from (for its details).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    Nvtx,
    Runtime,
    Osrt,
    Kernel,
    Memcpy,
    Memset,
}

impl Source {
    pub fn table(self) -> &'static str {
        match self {
            Source::Nvtx => "NVTX_EVENTS",
            Source::Runtime => "CUPTI_ACTIVITY_KIND_RUNTIME",
            Source::Osrt => "OSRT_API",
            Source::Kernel => "CUPTI_ACTIVITY_KIND_KERNEL",
            Source::Memcpy => "CUPTI_ACTIVITY_KIND_MEMCPY",
            Source::Memset => "CUPTI_ACTIVITY_KIND_MEMSET",
        }
    }
}

/// One event as read: `[start, end)` in ns, its name in the index's string table, and the
/// table and rowid it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawEvent {
    pub start: i64,
    pub end: i64,
    pub name: u32,
    pub source: Source,
    pub rowid: i64,
}

/// A track as `load` found it: `parent` indexes the list of sources given to [`Index::build`],
/// which lists a parent before its children.
#[derive(Debug, Clone)]
pub struct TrackSource {
    pub kind: TrackKind,
    pub label: String,
    pub parent: Option<usize>,
    pub events: Vec<RawEvent>,
}

/// One track's events, numbered by start time (ties: the longer first, so a parent range comes
/// before the child that starts with it).
#[derive(Debug, Default)]
pub struct TrackEvents {
    pub start: Vec<i64>,
    pub end: Vec<i64>,
    pub name: Vec<u32>,
    pub row: Vec<u16>,
    pub source: Vec<Source>,
    pub rowid: Vec<i64>,
    pub rows: Vec<Row>,
}

impl TrackEvents {
    pub fn len(&self) -> usize {
        self.start.len()
    }

    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }

    /// The event number of `(source, rowid)`, if this track holds it (found by its start).
    pub fn find(&self, source: Source, rowid: i64, start: i64) -> Option<u32> {
        let from = self.start.partition_point(|&s| s < start);
        (from..self.len())
            .take_while(|&i| self.start[i] == start)
            .find(|&i| self.rowid[i] == rowid && self.source[i] == source)
            .map(|i| i as u32)
    }
}

/// A report's timeline.
#[derive(Debug)]
pub struct Index {
    pub start_ns: i64,
    pub end_ns: i64,
    pub top_level: u8,
    pub tracks: Vec<Track>,
    pub events: Vec<TrackEvents>,
    pub names: Vec<String>,
    pub notes: Vec<String>,
}

impl Index {
    /// Sorts, numbers and packs each track's events and builds the pyramids.
    pub fn build(sources: Vec<TrackSource>, names: Vec<String>, notes: Vec<String>) -> Index {
        let start_ns = sources
            .iter()
            .flat_map(|s| s.events.iter().map(|e| e.start))
            .min()
            .unwrap_or(0);
        let end_ns = sources
            .iter()
            .flat_map(|s| s.events.iter().map(|e| e.end))
            .max()
            .unwrap_or(start_ns)
            .max(start_ns);
        let top_level = nsight_contracts::timeline::top_level(end_ns - start_ns);
        let mut tracks = Vec::with_capacity(sources.len());
        let mut events = Vec::with_capacity(sources.len());
        for (id, source) in sources.into_iter().enumerate() {
            let track_events = number_and_pack(source.events, start_ns, top_level);
            tracks.push(Track {
                id: id as u32,
                parent: source.parent.map(|p| p as u32),
                label: source.label,
                kind: source.kind,
                events: track_events.len() as u64,
                rows: track_events.rows.len() as u16,
            });
            events.push(track_events);
        }
        Index {
            start_ns,
            end_ns,
            top_level,
            tracks,
            events,
            names,
            notes,
        }
    }

    /// The text of string `name` of the index's table (empty for an id it does not hold).
    pub fn name_of(&self, name: u32) -> String {
        self.names.get(name as usize).cloned().unwrap_or_default()
    }

    pub fn track(&self, id: u32) -> Option<(&Track, &TrackEvents)> {
        let i = id as usize;
        Some((self.tracks.get(i)?, self.events.get(i)?))
    }

    /// The tile `index` of `track` at `level`; `None` when the track does not exist.
    pub fn tile(&self, track: u32, level: u8, index: u64) -> Option<Tile> {
        let (_, events) = self.track(track)?;
        Some(pyramid::tile(
            events,
            &self.names,
            self.start_ns,
            self.top_level,
            level,
            index,
        ))
    }

    /// Per name, the events of `tracks` that overlap `[start, end)` (see [`NameStats`]).
    pub fn range(&self, start: i64, end: i64, tracks: &[u32]) -> RangeSummary {
        let mut by_name: HashMap<u32, Vec<(i64, i64, i64)>> = HashMap::new();
        for &id in tracks {
            let Some((_, ev)) = self.track(id) else {
                continue;
            };
            for row in &ev.rows {
                for i in row.overlapping(ev, start, end) {
                    let (s, e) = (ev.start[i], ev.end[i]);
                    by_name
                        .entry(ev.name[i])
                        .or_default()
                        .push((s.max(start), e.min(end), e - s));
                }
            }
        }
        let mut names: Vec<NameStats> = by_name
            .into_iter()
            .map(|(name, mut spans)| {
                let count = spans.len() as u64;
                let total_ns = spans.iter().map(|&(s, e, _)| e - s).sum();
                let mut durations: Vec<i64> = spans.iter().map(|&(_, _, d)| d).collect();
                durations.sort_unstable();
                spans.sort_unstable();
                NameStats {
                    name: self.names.get(name as usize).cloned().unwrap_or_default(),
                    count,
                    total_ns,
                    busy_ns: union_length(&spans),
                    p50_ns: nearest_rank(&durations, 50),
                    p95_ns: nearest_rank(&durations, 95),
                }
            })
            .collect();
        names.sort_by(|a, b| {
            b.total_ns
                .cmp(&a.total_ns)
                .then_with(|| a.name.cmp(&b.name))
        });
        RangeSummary {
            start_ns: start,
            end_ns: end,
            tracks: tracks.to_vec(),
            names,
        }
    }

    /// Every track with events (for a range over "all tracks").
    pub fn event_tracks(&self) -> Vec<u32> {
        self.tracks
            .iter()
            .filter(|t| !t.kind.is_group())
            .map(|t| t.id)
            .collect()
    }

    /// Bytes held by the event columns and pyramids (for the cache's bound).
    pub fn heap_bytes(&self) -> usize {
        self.events
            .iter()
            .map(|e| e.len() * 32 + e.rows.iter().map(Row::heap_bytes).sum::<usize>())
            .sum::<usize>()
            + self.names.iter().map(|n| n.len() + 24).sum::<usize>()
    }
}

/// Sorted `(start, end, _)` spans' union length.
fn union_length(spans: &[(i64, i64, i64)]) -> i64 {
    let mut total = 0;
    let mut current: Option<(i64, i64)> = None;
    for &(s, e, _) in spans {
        current = match current {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    total + current.map_or(0, |(s, e)| e - s)
}

/// The nearest-rank percentile of sorted values.
fn nearest_rank(sorted: &[i64], p: usize) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

fn number_and_pack(mut raw: Vec<RawEvent>, origin: i64, top_level: u8) -> TrackEvents {
    // In place (a stable sort would borrow half the list again); the rowid makes it total.
    raw.sort_unstable_by(|a, b| {
        a.start
            .cmp(&b.start)
            .then(b.end.cmp(&a.end))
            .then(a.rowid.cmp(&b.rowid))
    });
    // Exact capacities: the columns of a track with millions of events are its largest memory.
    let n = raw.len();
    let mut ev = TrackEvents {
        start: Vec::with_capacity(n),
        end: Vec::with_capacity(n),
        name: Vec::with_capacity(n),
        row: Vec::with_capacity(n),
        source: Vec::with_capacity(n),
        rowid: Vec::with_capacity(n),
        rows: Vec::new(),
    };
    let mut row_ends: Vec<i64> = Vec::new();
    for e in &raw {
        let end = e.end.max(e.start);
        let row = match row_ends.iter().position(|&re| re <= e.start) {
            Some(r) => r,
            None if row_ends.len() < MAX_ROWS => {
                row_ends.push(i64::MIN);
                row_ends.len() - 1
            }
            None => MAX_ROWS - 1,
        };
        row_ends[row] = row_ends[row].max(end);
        ev.start.push(e.start);
        ev.end.push(end);
        ev.name.push(e.name);
        ev.row.push(row as u16);
        ev.source.push(e.source);
        ev.rowid.push(e.rowid);
    }
    drop(raw);
    ev.rows = rows_of(&ev, origin, top_level);
    ev
}

/// The rows of a track whose events know their row: each row's events in start order, with
/// its pyramid.
pub fn rows_of(ev: &TrackEvents, origin: i64, top_level: u8) -> Vec<Row> {
    let count = ev
        .row
        .iter()
        .map(|&r| usize::from(r) + 1)
        .max()
        .unwrap_or(0);
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); count];
    for (i, &r) in ev.row.iter().enumerate() {
        members[usize::from(r)].push(i as u32);
    }
    members
        .into_iter()
        .map(|m| Row::build(m, &ev.start, &ev.end, origin, top_level))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(start: i64, end: i64, name: u32, rowid: i64) -> RawEvent {
        RawEvent {
            start,
            end,
            name,
            source: Source::Nvtx,
            rowid,
        }
    }

    fn index(events: Vec<RawEvent>) -> Index {
        let names = vec!["outer".to_owned(), "inner".to_owned(), "next".to_owned()];
        Index::build(
            vec![TrackSource {
                kind: TrackKind::Nvtx,
                label: "NVTX".into(),
                parent: None,
                events,
            }],
            names,
            vec![],
        )
    }

    #[test]
    fn nested_ranges_take_one_row_per_depth() {
        let idx = index(vec![
            raw(100, 200, 2, 3),
            raw(0, 100, 0, 1),
            raw(10, 50, 1, 2),
        ]);
        let ev = &idx.events[0];
        assert_eq!(ev.start, vec![0, 10, 100]);
        assert_eq!(ev.row, vec![0, 1, 0]);
        assert_eq!(idx.tracks[0].rows, 2);
        assert_eq!((idx.start_ns, idx.end_ns), (0, 200));
        assert_eq!(ev.find(Source::Nvtx, 2, 10), Some(1));
        assert_eq!(ev.find(Source::Kernel, 2, 10), None);
    }

    #[test]
    fn a_range_is_clipped_and_its_busy_time_is_a_union() {
        // Two overlapping "inner" on different rows of a second track, and one outer.
        let idx = Index::build(
            vec![
                TrackSource {
                    kind: TrackKind::Stream,
                    label: "a".into(),
                    parent: None,
                    events: vec![raw(0, 100, 0, 1), raw(20, 60, 1, 2)],
                },
                TrackSource {
                    kind: TrackKind::Stream,
                    label: "b".into(),
                    parent: None,
                    events: vec![raw(40, 80, 1, 3)],
                },
            ],
            vec!["outer".into(), "inner".into()],
            vec![],
        );
        let r = idx.range(50, 150, &[0, 1]);
        let inner = r.names.iter().find(|n| n.name == "inner").unwrap();
        // Clipped to [50,150): [50,60) and [50,80).
        assert_eq!((inner.count, inner.total_ns, inner.busy_ns), (2, 40, 30));
        assert_eq!((inner.p50_ns, inner.p95_ns), (40, 40));
        let outer = &r.names[0];
        assert_eq!((outer.name.as_str(), outer.total_ns), ("outer", 50));
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 50), 2);
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 95), 4);
    }
}
