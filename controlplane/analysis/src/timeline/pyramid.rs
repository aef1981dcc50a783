//! The level-of-detail pyramid of one row and the tiles cut from it (pure).
//!
//! At level `L` a bucket is `2^L` ns. An event at least one bucket long is drawn on its own;
//! shorter ones are summed into the bucket they start in: a count, their total duration (their
//! busy time: events of one row do not overlap) and the longest of them. The twelve coarsest
//! levels are kept per row (at most `512 * 2^11` buckets each, and never more entries than the
//! row has events); a finer tile covers at most 1/2048 of the report and is cut from the events
//! on request. A tile with few events in it sends them all, whatever the level.
//!
//! ```text
//!  level top:      [ 512 buckets over the whole report ]        kept
//!  level top-11:   [ 2^20 buckets ]                             kept
//!  finer:          cut from the row's events on request (a binary search, then a scan)
//! ```

use std::collections::HashMap;

use nsight_contracts::timeline::{bucket_ns, tile_span_ns, Tile, TileBucket, TileEvent, TileRow};

use super::index::TrackEvents;

/// Levels kept per row, counted down from the report's top level.
pub const KEPT_LEVELS: u8 = 12;
/// A row with at most this many events in a tile sends them all.
pub const RAW_LIMIT: usize = 1024;

/// One bucket's summary of the events shorter than a bucket that start in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bucket {
    /// The bucket's number from the timeline's start (a kept level has at most 2^20).
    at: u32,
    count: u32,
    busy: i64,
    /// The longest event (its number on the track).
    longest: u32,
}

/// One kept level of a row.
#[derive(Debug, Default)]
struct Level {
    buckets: Vec<Bucket>,
    /// The events at least one bucket long, by start (event numbers).
    long: Vec<u32>,
}

/// One row of a track: its events (numbers on the track, by start) and its kept levels.
#[derive(Debug)]
pub struct Row {
    events: Vec<u32>,
    max_dur: i64,
    /// The finest kept level; `levels[i]` is level `finest + i`.
    finest: u8,
    levels: Vec<Level>,
}

impl Row {
    /// The row's event numbers, in start order.
    pub fn members(&self) -> &[u32] {
        &self.events
    }

    /// `members` are event numbers in start order; the columns are the track's.
    pub fn build(members: Vec<u32>, start: &[i64], end: &[i64], origin: i64, top_level: u8) -> Row {
        let max_dur = members
            .iter()
            .map(|&e| end[e as usize] - start[e as usize])
            .max()
            .unwrap_or(0);
        let finest = top_level.saturating_sub(KEPT_LEVELS - 1);
        let levels = (finest..=top_level)
            .map(|level| summarize(members.iter().copied(), start, end, origin, level))
            .collect();
        Row {
            events: members,
            max_dur,
            finest,
            levels,
        }
    }

    pub fn heap_bytes(&self) -> usize {
        self.events.len() * 4
            + self
                .levels
                .iter()
                .map(|l| l.buckets.len() * size_of::<Bucket>() + l.long.len() * 4)
                .sum::<usize>()
    }

    /// Positions in `events` of the events that may overlap `[a, b)`.
    fn candidates(&self, ev: &TrackEvents, a: i64, b: i64) -> std::ops::Range<usize> {
        let from = a.saturating_sub(self.max_dur);
        let p0 = self
            .events
            .partition_point(|&e| ev.start[e as usize] < from);
        let p1 = self.events.partition_point(|&e| ev.start[e as usize] < b);
        p0..p1.max(p0)
    }

    /// The event numbers that overlap `[a, b)` (a zero-length event counts when inside).
    pub fn overlapping<'a>(
        &'a self,
        ev: &'a TrackEvents,
        a: i64,
        b: i64,
    ) -> impl Iterator<Item = usize> + 'a {
        self.events[self.candidates(ev, a, b)]
            .iter()
            .map(|&e| e as usize)
            .filter(move |&e| overlaps(ev.start[e], ev.end[e], a, b))
    }
}

fn overlaps(s: i64, e: i64, a: i64, b: i64) -> bool {
    if s == e {
        s >= a && s < b
    } else {
        s < b && e > a
    }
}

/// One level's buckets and long events over `events` (in start order).
fn summarize(
    events: impl Iterator<Item = u32>,
    start: &[i64],
    end: &[i64],
    origin: i64,
    level: u8,
) -> Level {
    let width = bucket_ns(level);
    let mut out = Level::default();
    for e in events {
        let (s, d) = (start[e as usize], end[e as usize] - start[e as usize]);
        if d >= width {
            out.long.push(e);
            continue;
        }
        if s < origin {
            // Starts before the range summarised: the previous range's bucket holds it.
            continue;
        }
        let at = ((s - origin) >> level) as u32;
        match out.buckets.last_mut() {
            Some(b) if b.at == at => {
                b.count += 1;
                b.busy += d;
                let l = b.longest as usize;
                if d > end[l] - start[l] {
                    b.longest = e;
                }
            }
            _ => out.buckets.push(Bucket {
                at,
                count: 1,
                busy: d,
                longest: e,
            }),
        }
    }
    out
}

/// Gives each name a number local to the tile.
#[derive(Default)]
struct Names<'a> {
    all: &'a [String],
    local: HashMap<u32, u32>,
    list: Vec<String>,
}

impl Names<'_> {
    fn id(&mut self, global: u32) -> u32 {
        *self.local.entry(global).or_insert_with(|| {
            self.list
                .push(self.all.get(global as usize).cloned().unwrap_or_default());
            (self.list.len() - 1) as u32
        })
    }
}

/// Tile `index` of a track at `level` (see the module's description).
pub fn tile(
    ev: &TrackEvents,
    names: &[String],
    origin: i64,
    top_level: u8,
    level: u8,
    index: u64,
) -> Tile {
    let span = tile_span_ns(level);
    let a = origin.saturating_add(span.saturating_mul(index.min(i64::MAX as u64) as i64));
    let b = a.saturating_add(span);
    let first_bucket = (a - origin) >> level;
    let mut names = Names {
        all: names,
        ..Names::default()
    };
    let mut rows = Vec::new();
    for (r, row) in ev.rows.iter().enumerate() {
        let candidates = row.candidates(ev, a, b);
        let mut out = TileRow {
            row: r as u16,
            ..TileRow::default()
        };
        let event = |e: usize, names: &mut Names<'_>| TileEvent {
            start_ns: ev.start[e],
            end_ns: ev.end[e],
            name: names.id(ev.name[e]),
            event: e as u32,
        };
        if candidates.len() <= RAW_LIMIT {
            for e in row.overlapping(ev, a, b) {
                out.events.push(event(e, &mut names));
            }
        } else {
            let kept = level
                .checked_sub(row.finest)
                .filter(|_| level <= top_level)
                .and_then(|i| row.levels.get(i as usize));
            // A kept level numbers buckets from the timeline's start; a level cut on request
            // numbers them from this tile's start (so they stay small).
            let scanned;
            let (summary, base) = match kept {
                Some(l) => (l, first_bucket),
                None => {
                    let members = row.events[candidates].iter().copied();
                    scanned = summarize(members, &ev.start, &ev.end, a, level);
                    (&scanned, 0)
                }
            };
            let from = summary
                .long
                .partition_point(|&e| ev.start[e as usize] < a.saturating_sub(row.max_dur));
            for &e in &summary.long[from..] {
                let e = e as usize;
                if ev.start[e] >= b {
                    break;
                }
                if overlaps(ev.start[e], ev.end[e], a, b) {
                    out.events.push(event(e, &mut names));
                }
            }
            let last = base + i64::from(nsight_contracts::timeline::TILE_BUCKETS);
            let from = summary.buckets.partition_point(|x| i64::from(x.at) < base);
            for x in summary.buckets[from..]
                .iter()
                .take_while(|x| i64::from(x.at) < last)
            {
                out.buckets.push(TileBucket {
                    bucket: (i64::from(x.at) - base) as u32,
                    count: x.count,
                    busy_ns: x.busy,
                    name: names.id(ev.name[x.longest as usize]),
                    event: x.longest,
                });
            }
        }
        if !out.events.is_empty() || !out.buckets.is_empty() {
            rows.push(out);
        }
    }
    Tile {
        level,
        index,
        names: names.list,
        rows,
    }
}

#[cfg(test)]
mod tests {
    use nsight_contracts::timeline::top_level;

    use super::super::index::{Index, RawEvent, Source, TrackSource};
    use super::*;
    use nsight_contracts::timeline::TrackKind;

    /// `n` events of 10 ns every 100 ns on one row, and one long event over all of them on a
    /// second row.
    fn dense(n: i64) -> Index {
        let mut events: Vec<RawEvent> = (0..n)
            .map(|i| RawEvent {
                start: 1000 + i * 100,
                end: 1000 + i * 100 + 10 + (i % 7),
                name: (i % 3) as u32,
                source: Source::Kernel,
                rowid: i,
            })
            .collect();
        events.push(RawEvent {
            start: 1000,
            end: 1000 + n * 100,
            name: 3,
            source: Source::Kernel,
            rowid: n,
        });
        Index::build(
            vec![TrackSource {
                kind: TrackKind::Stream,
                label: "Stream 7".into(),
                parent: None,
                events,
            }],
            vec!["a".into(), "b".into(), "c".into(), "long".into()],
            vec![],
        )
    }

    #[test]
    fn a_tile_with_few_events_sends_them_all() {
        let idx = dense(10);
        let tile = idx.tile(0, idx.top_level, 0).unwrap();
        let total: usize = tile.rows.iter().map(|r| r.events.len()).sum();
        assert_eq!(total, 11);
        assert!(tile.rows.iter().all(|r| r.buckets.is_empty()));
        assert_eq!(tile.names.len(), 4);
    }

    /// Every event is in exactly one place of the tiles covering a level: drawn on its own in
    /// each tile it overlaps, or counted once in the bucket it starts in.
    fn check_level(idx: &Index, level: u8) {
        let span = tile_span_ns(level);
        let tiles = (idx.end_ns - idx.start_ns) / span + 1;
        let mut counted = 0u64;
        let mut drawn = std::collections::BTreeSet::new();
        let mut busy = 0i64;
        for index in 0..tiles as u64 {
            let tile = idx.tile(0, level, index).unwrap();
            for row in &tile.rows {
                for b in &row.buckets {
                    counted += u64::from(b.count);
                    busy += b.busy_ns;
                    assert!(b.bucket < 512);
                }
                for e in &row.events {
                    drawn.insert(e.event);
                }
            }
        }
        let ev = &idx.events[0];
        let small: Vec<usize> = (0..ev.len())
            .filter(|&e| ev.end[e] - ev.start[e] < bucket_ns(level) && !drawn.contains(&(e as u32)))
            .collect();
        assert_eq!(
            counted + drawn.len() as u64,
            ev.len() as u64,
            "level {level}"
        );
        assert_eq!(
            busy,
            small.iter().map(|&e| ev.end[e] - ev.start[e]).sum::<i64>()
        );
    }

    #[test]
    fn every_level_accounts_for_every_event_once() {
        let idx = dense(20_000);
        assert_eq!(idx.top_level, top_level(2_000_000));
        assert_eq!(idx.top_level, 12);
        for level in [0, 3, 6, 8, 10, 12] {
            check_level(&idx, level);
        }
        // The long event is drawn on its own at every level.
        let top = idx.tile(0, idx.top_level, 0).unwrap();
        assert!(top
            .rows
            .iter()
            .any(|r| r.events.iter().any(|e| e.end_ns - e.start_ns == 2_000_000)));
        assert!(top.rows.iter().any(|r| !r.buckets.is_empty()));
    }

    #[test]
    fn a_level_cut_on_request_counts_from_its_tile() {
        // 6,000 one-ns events 2 ns apart, far from the timeline's start; the row is built as
        // if the report were long (top level 40), so every level below 29 is cut on request.
        let events: Vec<RawEvent> = (0..6000)
            .map(|i| RawEvent {
                start: 10_000_000 + i * 2,
                end: 10_000_000 + i * 2 + 1,
                name: 0,
                source: Source::Kernel,
                rowid: i,
            })
            .collect();
        let mut idx = Index::build(
            vec![TrackSource {
                kind: TrackKind::Stream,
                label: "s".into(),
                parent: None,
                events,
            }],
            vec!["k".into()],
            vec![],
        );
        let origin = idx.start_ns - (1 << 39);
        let ev = &mut idx.events[0];
        let members = (0..ev.len() as u32).collect();
        ev.rows = vec![Row::build(members, &ev.start, &ev.end, origin, 40)];
        let ev = &idx.events[0];
        // Level 3: 8 ns buckets, 4,096 ns tiles of 2,048 events each (over the raw limit).
        let level = 3;
        let first = ((10_000_000 - origin) / tile_span_ns(level)) as u64;
        let (mut counted, mut busy) = (0u64, 0i64);
        for index in first..first + 4 {
            let t = tile(ev, &idx.names, origin, 40, level, index);
            for r in &t.rows {
                assert!(r.events.is_empty());
                counted += r.buckets.iter().map(|b| u64::from(b.count)).sum::<u64>();
                busy += r.buckets.iter().map(|b| b.busy_ns).sum::<i64>();
                assert!(r.buckets.iter().all(|b| b.bucket < 512 && b.count == 4));
            }
        }
        assert_eq!((counted, busy), (6000, 6000));
    }

    #[test]
    fn kept_and_cut_levels_agree() {
        // 40,000 events over 4 ms: top level 13; level 1 is cut on request, level 2 is kept.
        let idx = dense(40_000);
        let row = &idx.events[0].rows[0];
        assert_eq!(row.finest, idx.top_level - (KEPT_LEVELS - 1));
        let level = row.finest;
        let candidates = 0..row.events.len();
        let ev = &idx.events[0];
        let cut = summarize(
            row.events[candidates].iter().copied(),
            &ev.start,
            &ev.end,
            idx.start_ns,
            level,
        );
        assert_eq!(cut.buckets, row.levels[0].buckets);
        assert_eq!(cut.long, row.levels[0].long);
    }
}
