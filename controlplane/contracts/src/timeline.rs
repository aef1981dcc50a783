//! The timeline's wire contract (docs/timeline.md), paths below
//! [`crate::routes::ANALYSIS_V1`]: a report's track tree, its tiles (binary, immutable), one
//! event's details and the aggregates of a selected range.
//!
//! ```text
//!  GET /timeline?report=K                              -> Timeline (tracks, time range, levels)
//!  GET /timeline/tiles?report=K&track=T&level=L&index=I -> Tile bytes (Tile::encode), ETag
//!  GET /timeline/event?report=K&track=T&event=E        -> EventDetail (SQL on the report)
//!  GET /timeline/range?report=K&start=S&end=E[&tracks=] -> RangeSummary
//!  GET /timeline/search?report=K&q=Q[&from=T.E][&dir=prev]  -> SearchAnswer
//! ```
//!
//! Time is cut into tiles: at level `L` a bucket is `2^L` ns and a tile holds [`TILE_BUCKETS`]
//! buckets, so tile `I` covers `[start + I * span(L), start + (I + 1) * span(L))`, where `start`
//! is the timeline's `start_ns` (times in tiles are in the report's clock). A tile
//! gives, per row of the track, the events a pixel can show on their own (every event when few
//! overlap the tile, else those at least one bucket long) and, for the rest, one summary per
//! bucket: how many start there, the time they keep the row busy, and the longest of them.

use serde::{Deserialize, Serialize};

/// Buckets in one tile (one bucket is drawn at most one pixel wide).
pub const TILE_BUCKETS: u32 = 512;
/// The first bytes of an encoded tile.
pub const TILE_MAGIC: [u8; 4] = *b"NSTL";
/// The tile encoding's version.
pub const TILE_VERSION: u16 = 1;
/// The finest level: one nanosecond per bucket.
pub const MIN_LEVEL: u8 = 0;
/// The coarsest level any report needs (2^52 ns is 52 days per bucket).
pub const MAX_LEVEL: u8 = 52;

/// A bucket's width at `level`, in ns.
pub fn bucket_ns(level: u8) -> i64 {
    1i64 << level.min(MAX_LEVEL)
}

/// The time one tile at `level` covers, in ns.
pub fn tile_span_ns(level: u8) -> i64 {
    bucket_ns(level) * i64::from(TILE_BUCKETS)
}

/// The coarsest level worth asking for: the first whose single tile covers `duration_ns`.
pub fn top_level(duration_ns: i64) -> u8 {
    (MIN_LEVEL..=MAX_LEVEL)
        .find(|&l| tile_span_ns(l) >= duration_ns.max(1))
        .unwrap_or(MAX_LEVEL)
}

/// The finest level whose buckets are at least half a pixel wide at `ns_per_px` (finer would
/// send detail no pixel can show).
pub fn level_for(ns_per_px: f64) -> u8 {
    if ns_per_px.is_nan() || ns_per_px <= 1.0 {
        return MIN_LEVEL;
    }
    let level = ns_per_px.log2().floor();
    if level >= f64::from(MAX_LEVEL) {
        MAX_LEVEL
    } else {
        level as u8
    }
}

/// What a track shows; groups (process, thread, GPU) hold tracks and have no events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum TrackKind {
    Process,
    Thread,
    Gpu,
    /// NVTX push/pop and start/end ranges of one thread.
    Nvtx,
    /// CUDA runtime and driver API calls of one thread.
    CudaApi,
    /// OS runtime calls (OSRT_API) of one thread.
    OsRuntime,
    /// Kernels, memcpy and memset of one CUDA stream.
    Stream,
    /// NVTX ranges projected onto one GPU: each range over the GPU work its CUDA API calls
    /// launched.
    NvtxProjected,
}

impl TrackKind {
    /// Whether the track is a group of other tracks.
    pub fn is_group(self) -> bool {
        matches!(
            self,
            TrackKind::Process | TrackKind::Thread | TrackKind::Gpu
        )
    }
}

/// One row of the track tree, in display order (a parent before its children).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Track {
    pub id: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u32>,
    pub label: String,
    pub kind: TrackKind,
    /// Events on the track (0 for a group).
    pub events: u64,
    /// Rows the events need so that none overlaps another (nesting depth for NVTX).
    pub rows: u16,
}

/// `GET /timeline`: what a report holds, for laying out the view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    pub report: String,
    /// The first event's start and the last event's end (ns, the report's clock).
    pub start_ns: i64,
    pub end_ns: i64,
    /// The coarsest level; `0` is the finest.
    pub top_level: u8,
    pub tile_buckets: u32,
    pub tracks: Vec<Track>,
    /// What the report lacks or what was left out (a table missing, rows without a thread).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// The report a timeline request is about (its object key in storage).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TimelineQuery {
    pub report: String,
}

/// `GET /timeline/tiles`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TileQuery {
    pub report: String,
    pub track: u32,
    pub level: u8,
    pub index: u64,
}

/// `GET /timeline/event`: one event of a track, by its number on the track (events are
/// numbered by start time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EventQuery {
    pub report: String,
    pub track: u32,
    pub event: u32,
}

/// One labelled value of an event (grid size, bytes, stream...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Field {
    pub name: String,
    pub value: String,
}

/// Another event this one is tied to: the API call that launched a kernel, the kernels an API
/// call launched (the CUDA correlation id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EventLink {
    pub track: u32,
    pub event: u32,
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
    /// How it is tied, for people: "launched by", "launched".
    pub relation: String,
}

/// `GET /timeline/event`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EventDetail {
    pub track: u32,
    pub event: u32,
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
    pub row: u16,
    pub fields: Vec<Field>,
    pub related: Vec<EventLink>,
}

/// `GET /timeline/range`: the selected time range, and the tracks (comma-separated ids; all
/// tracks when absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RangeQuery {
    pub report: String,
    pub start: i64,
    pub end: i64,
    #[serde(default)]
    pub tracks: Option<String>,
}

/// The events of one name that overlap a selected range. Durations are clipped to the range;
/// the percentiles are of the whole events' durations (nearest rank).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NameStats {
    pub name: String,
    pub count: u64,
    /// Sum of the clipped durations.
    pub total_ns: i64,
    /// The union of the clipped intervals: time at least one of them ran.
    pub busy_ns: i64,
    pub p50_ns: i64,
    pub p95_ns: i64,
}

/// `GET /timeline/range`'s answer, names by total time, longest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RangeSummary {
    pub start_ns: i64,
    pub end_ns: i64,
    pub tracks: Vec<u32>,
    pub names: Vec<NameStats>,
}

/// The most characters of a search text (`GET /timeline/search`'s `q`).
pub const SEARCH_MAX: usize = 256;

/// `GET /timeline/search`'s answer: the next event (or the previous, `dir=prev`) after the given
/// one (`from=<track>.<event>`; none: from the report's start, or its end backwards) whose name
/// contains `q`, ignoring case, in the order of `(start, track, event)`; `hit` is null when
/// there is none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SearchAnswer {
    pub hit: Option<SearchHit>,
}

/// One matching event: where it is (for `GET /timeline/event`) and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    pub track: u32,
    pub event: u32,
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
}

/// An event drawn on its own. `name` indexes the tile's `names`; `event` is its number on the
/// track (for [`EventQuery`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileEvent {
    pub start_ns: i64,
    pub end_ns: i64,
    pub name: u32,
    pub event: u32,
}

/// The events shorter than a bucket that start in bucket `bucket` (0-based within the tile):
/// how many, the time they keep the row busy, and the longest of them (its name and number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileBucket {
    pub bucket: u32,
    pub count: u32,
    pub busy_ns: i64,
    pub name: u32,
    pub event: u32,
}

/// One row of a track within a tile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TileRow {
    pub row: u16,
    pub events: Vec<TileEvent>,
    pub buckets: Vec<TileBucket>,
}

/// One tile of one track: what is drawn from [`Tile::offset_ns`] after the timeline's start, for
/// [`tile_span_ns`]`(level)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tile {
    pub level: u8,
    pub index: u64,
    /// The names the rows refer to.
    pub names: Vec<String>,
    /// Rows with nothing in the tile are left out.
    pub rows: Vec<TileRow>,
}

/// Why bytes are not a tile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TileError {
    #[error("not a timeline tile (bad magic)")]
    Magic,
    #[error("tile version {0} is not supported (this build reads {TILE_VERSION})")]
    Version(u16),
    #[error("the tile ends early at byte {0}")]
    Truncated(usize),
    #[error("a name in the tile is not UTF-8")]
    Utf8,
}

impl Tile {
    /// Where the tile starts, from the timeline's `start_ns`.
    pub fn offset_ns(&self) -> i64 {
        tile_span_ns(self.level).saturating_mul(self.index as i64)
    }

    /// Little-endian: magic, version, level, index, names (count, then length and UTF-8 each),
    /// rows (count; each: row, events, buckets).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.rows.len() * 64);
        out.extend_from_slice(&TILE_MAGIC);
        out.extend_from_slice(&TILE_VERSION.to_le_bytes());
        out.push(self.level);
        out.extend_from_slice(&self.index.to_le_bytes());
        out.extend_from_slice(&(self.names.len() as u32).to_le_bytes());
        for name in &self.names {
            out.extend_from_slice(&(name.len() as u32).to_le_bytes());
            out.extend_from_slice(name.as_bytes());
        }
        out.extend_from_slice(&(self.rows.len() as u32).to_le_bytes());
        for row in &self.rows {
            out.extend_from_slice(&row.row.to_le_bytes());
            out.extend_from_slice(&(row.events.len() as u32).to_le_bytes());
            for e in &row.events {
                out.extend_from_slice(&e.start_ns.to_le_bytes());
                out.extend_from_slice(&e.end_ns.to_le_bytes());
                out.extend_from_slice(&e.name.to_le_bytes());
                out.extend_from_slice(&e.event.to_le_bytes());
            }
            out.extend_from_slice(&(row.buckets.len() as u32).to_le_bytes());
            for b in &row.buckets {
                out.extend_from_slice(&b.bucket.to_le_bytes());
                out.extend_from_slice(&b.count.to_le_bytes());
                out.extend_from_slice(&b.busy_ns.to_le_bytes());
                out.extend_from_slice(&b.name.to_le_bytes());
                out.extend_from_slice(&b.event.to_le_bytes());
            }
        }
        out
    }

    /// Reads what [`Tile::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Result<Tile, TileError> {
        let mut r = Reader { bytes, at: 0 };
        if r.take(4)? != TILE_MAGIC {
            return Err(TileError::Magic);
        }
        let version = r.u16()?;
        if version != TILE_VERSION {
            return Err(TileError::Version(version));
        }
        let level = r.take(1)?[0];
        let index = r.u64()?;
        let count = r.len(4)?;
        let mut names = Vec::with_capacity(count);
        for _ in 0..count {
            let len = r.len(1)?;
            let raw = r.take(len)?;
            names.push(
                std::str::from_utf8(raw)
                    .map_err(|_| TileError::Utf8)?
                    .to_owned(),
            );
        }
        let count = r.len(6)?;
        let mut rows = Vec::with_capacity(count);
        for _ in 0..count {
            let row = r.u16()?;
            let n = r.len(24)?;
            let mut events = Vec::with_capacity(n);
            for _ in 0..n {
                events.push(TileEvent {
                    start_ns: r.i64()?,
                    end_ns: r.i64()?,
                    name: r.u32()?,
                    event: r.u32()?,
                });
            }
            let n = r.len(24)?;
            let mut buckets = Vec::with_capacity(n);
            for _ in 0..n {
                buckets.push(TileBucket {
                    bucket: r.u32()?,
                    count: r.u32()?,
                    busy_ns: r.i64()?,
                    name: r.u32()?,
                    event: r.u32()?,
                });
            }
            rows.push(TileRow {
                row,
                events,
                buckets,
            });
        }
        Ok(Tile {
            level,
            index,
            names,
            rows,
        })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], TileError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or(TileError::Truncated(self.at))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], TileError> {
        let at = self.at;
        self.take(N)?
            .try_into()
            .map_err(|_| TileError::Truncated(at))
    }

    fn u16(&mut self) -> Result<u16, TileError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, TileError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, TileError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, TileError> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    /// A count of items at least `item` bytes each: refused when the rest cannot hold them, so a
    /// corrupt count cannot make a huge allocation.
    fn len(&mut self, item: usize) -> Result<usize, TileError> {
        let at = self.at;
        let n = self.u32()? as usize;
        if n.saturating_mul(item) > self.bytes.len() - self.at {
            return Err(TileError::Truncated(at));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Tile {
        Tile {
            level: 10,
            index: 3,
            names: vec!["gemm".into(), "[CUDA memcpy Host-to-Device]".into()],
            rows: vec![
                TileRow {
                    row: 0,
                    events: vec![TileEvent {
                        start_ns: 1_572_864,
                        end_ns: 1_600_000,
                        name: 0,
                        event: 7,
                    }],
                    buckets: vec![TileBucket {
                        bucket: 511,
                        count: 4,
                        busy_ns: 900,
                        name: 1,
                        event: 9,
                    }],
                },
                TileRow {
                    row: 2,
                    ..TileRow::default()
                },
            ],
        }
    }

    #[test]
    fn a_tile_reads_back_as_written() {
        let tile = sample();
        assert_eq!(Tile::decode(&tile.encode()), Ok(tile));
    }

    #[test]
    fn every_cut_of_a_tile_is_refused_without_panicking() {
        let bytes = sample().encode();
        for end in 0..bytes.len() {
            assert!(
                Tile::decode(&bytes[..end]).is_err(),
                "cut at {end} accepted"
            );
        }
        let mut wrong = bytes.clone();
        wrong[0] = b'X';
        assert_eq!(Tile::decode(&wrong), Err(TileError::Magic));
        let mut huge = bytes;
        // The name count claims four billion names.
        huge[15..19].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(Tile::decode(&huge), Err(TileError::Truncated(15))));
    }

    #[test]
    fn levels_follow_the_zoom() {
        assert_eq!(bucket_ns(0), 1);
        assert_eq!(tile_span_ns(10), 1024 * 512);
        assert_eq!(level_for(0.5), 0);
        assert_eq!(level_for(1000.0), 9);
        assert_eq!(level_for(1024.0), 10);
        // A one-second report fits one tile at level 21 (2^21 * 512 ns = 1.07 s).
        assert_eq!(top_level(1_000_000_000), 21);
        assert_eq!(top_level(0), 0);
        assert_eq!(sample().offset_ns(), 3 * 1024 * 512);
    }
}
