//! The timeline as a Perfetto trace (the protobuf `perfetto.protos.Trace`), for users who want
//! Perfetto's UI or its SQL over the same report. Pure: the index (and the CUDA correlation
//! flows) in, protobuf bytes out, in chunks, so a report of millions of events streams.
//!
//! ```text
//!  Track (group)      ──> TrackDescriptor{uuid, parent, name}        (explicit order, never merged)
//!  Track (events)     ──> one Perfetto track when its events nest (NVTX push/pop), else one
//!                         child track per packed row (their events never overlap)
//!  event              ──> TrackEvent SLICE_BEGIN (interned name) ... SLICE_END
//!  CUDA API call ↔ GPU work (same process and correlation id) ──> a flow (an arrow in Perfetto)
//! ```
//! Events leave in time order across all tracks (a k-way merge), each track's BEGIN/END as a
//! stack walk, so every slice closes on the track it opened on. JSON traces are not used: the
//! Chrome JSON importer drops overlapping slices, which GPU work produces all the time.

use std::{cmp::Reverse, collections::BinaryHeap};

use nsight_contracts::timeline::TrackKind;

use super::{
    flows::Flows,
    index::{Index, Source, TrackEvents},
};

/// Bytes per chunk handed to the writer.
pub const CHUNK: usize = 256 * 1024;
/// The one packet sequence the trace uses (interned names are scoped to it).
const SEQUENCE: u64 = 1;
/// Row tracks get uuids above every track id: `ROW_UUIDS | track << 8 | row`.
const ROW_UUIDS: u64 = 1 << 40;

/// Protobuf field numbers of the messages written (perfetto/protos/perfetto/trace/*.proto).
mod field {
    pub const TRACE_PACKET: u32 = 1;
    // TracePacket
    pub const TIMESTAMP: u32 = 8;
    pub const SEQUENCE_ID: u32 = 10;
    pub const TRACK_EVENT: u32 = 11;
    pub const INTERNED_DATA: u32 = 12;
    pub const SEQUENCE_FLAGS: u32 = 13;
    pub const TRACK_DESCRIPTOR: u32 = 60;
    // TrackDescriptor
    pub const UUID: u32 = 1;
    pub const NAME: u32 = 2;
    pub const PARENT_UUID: u32 = 5;
    pub const CHILD_ORDERING: u32 = 11;
    pub const SIBLING_ORDER_RANK: u32 = 12;
    pub const SIBLING_MERGE_BEHAVIOR: u32 = 15;
    // TrackEvent
    pub const TYPE: u32 = 9;
    pub const NAME_IID: u32 = 10;
    pub const TRACK_UUID: u32 = 11;
    pub const CATEGORIES: u32 = 22;
    pub const FLOW_IDS: u32 = 47;
    pub const TERMINATING_FLOW_IDS: u32 = 48;
    // InternedData / EventName
    pub const EVENT_NAMES: u32 = 2;
    pub const IID: u32 = 1;
    pub const EVENT_NAME: u32 = 2;
}

const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
const SLICE_BEGIN: u64 = 1;
const SLICE_END: u64 = 2;
const CHILD_ORDERING_EXPLICIT: u64 = 3;
const SIBLING_MERGE_NONE: u64 = 2;

/// Varint-level protobuf writing: just what the trace needs.
mod pb {
    pub fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    pub fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
        varint(out, u64::from(field) << 3);
        varint(out, v);
    }

    pub fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
        varint(out, u64::from(field) << 3 | 1);
        out.extend_from_slice(&v.to_le_bytes());
    }

    pub fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
        varint(out, u64::from(field) << 3 | 2);
        varint(out, b.len() as u64);
        out.extend_from_slice(b);
    }
}

/// One track's events in the order Perfetto needs them: BEGIN at a start, END at an end, the
/// innermost open slice closed first.
#[derive(Debug)]
struct Cursor<'a> {
    uuid: u64,
    events: &'a TrackEvents,
    members: Vec<u32>,
    next: usize,
    open: Vec<u32>,
}

/// What a cursor does next: open the event, or close the innermost open one.
#[derive(Debug, Clone, Copy)]
enum Step {
    Begin(u32),
    End,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<(i64, Step)> {
        let ev = self.events;
        let next = self.members.get(self.next).map(|&i| i as usize);
        match (self.open.last(), next) {
            (Some(&top), Some(n)) if ev.end[top as usize] > ev.start[n] => {
                Some((ev.start[n], Step::Begin(n as u32)))
            }
            (Some(&top), _) => Some((ev.end[top as usize], Step::End)),
            (None, Some(n)) => Some((ev.start[n], Step::Begin(n as u32))),
            (None, None) => None,
        }
    }

    fn advance(&mut self, step: Step) {
        match step {
            Step::Begin(i) => {
                self.open.push(i);
                self.next += 1;
            }
            Step::End => {
                self.open.pop();
            }
        }
    }
}

/// Whether `members` (in start order, longer first on ties) nest: each starts after the open
/// one it is in and ends before it.
fn nests(ev: &TrackEvents, members: &[u32]) -> bool {
    let mut open: Vec<i64> = Vec::new();
    for &i in members {
        let (s, e) = (ev.start[i as usize], ev.end[i as usize]);
        while open.last().is_some_and(|&end| end <= s) {
            open.pop();
        }
        if open.last().is_some_and(|&end| e > end) {
            return false;
        }
        open.push(e);
    }
    true
}

fn category(kind: TrackKind) -> &'static str {
    match kind {
        TrackKind::Nvtx => "nvtx",
        TrackKind::CudaApi => "cuda_api",
        TrackKind::OsRuntime => "osrt",
        TrackKind::Stream => "gpu",
        TrackKind::NvtxProjected => "nvtx_gpu",
        TrackKind::Process | TrackKind::Thread | TrackKind::Gpu => "group",
    }
}

/// The trace, chunk by chunk (each at most about [`CHUNK`] bytes).
#[derive(Debug)]
pub struct Export<'a> {
    index: &'a Index,
    flows: &'a Flows,
    origin: i64,
    descriptors: Vec<Vec<u8>>,
    cursors: Vec<Cursor<'a>>,
    categories: Vec<&'static str>,
    heap: BinaryHeap<Reverse<(i64, usize)>>,
    interned: Vec<bool>,
    started: bool,
    packet: Vec<u8>,
    scratch: Vec<u8>,
}

impl<'a> Export<'a> {
    pub fn new(index: &'a Index, flows: &'a Flows) -> Export<'a> {
        let mut descriptors = Vec::new();
        let mut cursors = Vec::new();
        let mut categories = Vec::new();
        for (track, events) in index.tracks.iter().zip(&index.events) {
            let uuid = u64::from(track.id) + 1;
            descriptors.push(descriptor(
                uuid,
                track.parent.map(|p| u64::from(p) + 1),
                &track.label,
                i64::from(track.id),
            ));
            if events.is_empty() {
                continue;
            }
            let all: Vec<u32> = (0..events.len() as u32).collect();
            if nests(events, &all) {
                cursors.push(cursor(uuid, events, all));
                categories.push(category(track.kind));
                continue;
            }
            for (r, row) in events.rows.iter().enumerate() {
                let row_uuid = ROW_UUIDS | u64::from(track.id) << 8 | r as u64;
                let label = format!("{} {}", track.label, r + 1);
                descriptors.push(descriptor(row_uuid, Some(uuid), &label, r as i64));
                cursors.push(cursor(row_uuid, events, row.members().to_vec()));
                categories.push(category(track.kind));
            }
        }
        let mut heap = BinaryHeap::new();
        for (i, c) in cursors.iter().enumerate() {
            if let Some((ts, _)) = c.peek() {
                heap.push(Reverse((ts, i)));
            }
        }
        Export {
            index,
            flows,
            origin: index.start_ns.min(0),
            descriptors,
            cursors,
            categories,
            heap,
            interned: vec![false; index.names.len()],
            started: false,
            packet: Vec::new(),
            scratch: Vec::new(),
        }
    }

    fn push_packet(&mut self, out: &mut Vec<u8>) {
        pb::bytes(out, field::TRACE_PACKET, &self.packet);
        self.packet.clear();
    }

    /// The first chunk: the sequence's start and every track.
    fn header(&mut self, out: &mut Vec<u8>) {
        pb::uint(&mut self.packet, field::SEQUENCE_ID, SEQUENCE);
        pb::uint(
            &mut self.packet,
            field::SEQUENCE_FLAGS,
            SEQ_INCREMENTAL_STATE_CLEARED,
        );
        self.push_packet(out);
        for d in std::mem::take(&mut self.descriptors) {
            pb::uint(&mut self.packet, field::SEQUENCE_ID, SEQUENCE);
            pb::bytes(&mut self.packet, field::TRACK_DESCRIPTOR, &d);
            self.push_packet(out);
        }
    }

    fn event(&mut self, cursor: usize, ts: i64, step: Step, out: &mut Vec<u8>) {
        let c = &self.cursors[cursor];
        let (uuid, events) = (c.uuid, c.events);
        let ev = &mut self.scratch;
        ev.clear();
        match step {
            Step::Begin(i) => {
                let i = i as usize;
                pb::uint(ev, field::TYPE, SLICE_BEGIN);
                pb::uint(ev, field::TRACK_UUID, uuid);
                let name = events.name[i] as usize;
                pb::uint(ev, field::NAME_IID, name as u64 + 1);
                pb::bytes(ev, field::CATEGORIES, self.categories[cursor].as_bytes());
                if let Some(flow) = self.flows.of(events.source[i], events.rowid[i]) {
                    let f = if events.source[i] == Source::Runtime {
                        field::FLOW_IDS
                    } else {
                        field::TERMINATING_FLOW_IDS
                    };
                    pb::fixed64(ev, f, flow);
                }
                if !self.interned.get(name).copied().unwrap_or(true) {
                    self.interned[name] = true;
                    let mut entry = Vec::new();
                    pb::uint(&mut entry, field::IID, name as u64 + 1);
                    pb::bytes(
                        &mut entry,
                        field::EVENT_NAME,
                        self.index.names[name].as_bytes(),
                    );
                    let mut interned = Vec::new();
                    pb::bytes(&mut interned, field::EVENT_NAMES, &entry);
                    pb::bytes(&mut self.packet, field::INTERNED_DATA, &interned);
                }
            }
            Step::End => {
                pb::uint(ev, field::TYPE, SLICE_END);
                pb::uint(ev, field::TRACK_UUID, uuid);
            }
        }
        pb::uint(
            &mut self.packet,
            field::TIMESTAMP,
            (ts - self.origin) as u64,
        );
        pb::uint(&mut self.packet, field::SEQUENCE_ID, SEQUENCE);
        pb::uint(
            &mut self.packet,
            field::SEQUENCE_FLAGS,
            SEQ_NEEDS_INCREMENTAL_STATE,
        );
        pb::bytes(&mut self.packet, field::TRACK_EVENT, &self.scratch);
        self.push_packet(out);
    }
}

fn cursor(uuid: u64, events: &TrackEvents, members: Vec<u32>) -> Cursor<'_> {
    Cursor {
        uuid,
        events,
        members,
        next: 0,
        open: Vec::new(),
    }
}

fn descriptor(uuid: u64, parent: Option<u64>, name: &str, rank: i64) -> Vec<u8> {
    let mut d = Vec::new();
    pb::uint(&mut d, field::UUID, uuid);
    pb::bytes(&mut d, field::NAME, name.as_bytes());
    if let Some(p) = parent {
        pb::uint(&mut d, field::PARENT_UUID, p);
    }
    pb::uint(&mut d, field::CHILD_ORDERING, CHILD_ORDERING_EXPLICIT);
    // int32 on the wire: a negative rank would be ten bytes; ranks here are never negative.
    pb::uint(&mut d, field::SIBLING_ORDER_RANK, rank.max(0) as u64);
    pb::uint(&mut d, field::SIBLING_MERGE_BEHAVIOR, SIBLING_MERGE_NONE);
    d
}

impl Iterator for Export<'_> {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(CHUNK + 1024);
        if !self.started {
            self.started = true;
            self.header(&mut out);
        }
        while out.len() < CHUNK {
            let Some(Reverse((_, c))) = self.heap.pop() else {
                break;
            };
            let Some((ts, step)) = self.cursors[c].peek() else {
                continue;
            };
            self.event(c, ts, step, &mut out);
            self.cursors[c].advance(step);
            if let Some((next, _)) = self.cursors[c].peek() {
                self.heap.push(Reverse((next, c)));
            }
        }
        (!out.is_empty()).then_some(out)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::timeline::index::{RawEvent, TrackSource};

    /// An NVTX event whose rowid is its start (also the search tests').
    pub(crate) fn ev(start: i64, end: i64, name: u32) -> RawEvent {
        RawEvent {
            start,
            end,
            name,
            source: Source::Nvtx,
            rowid: start,
        }
    }

    fn index(events: Vec<RawEvent>) -> Index {
        Index::build(
            vec![
                TrackSource {
                    kind: TrackKind::Thread,
                    label: "thread".into(),
                    parent: None,
                    events: vec![],
                },
                TrackSource {
                    kind: TrackKind::Nvtx,
                    label: "NVTX".into(),
                    parent: Some(0),
                    events,
                },
            ],
            vec!["a".into(), "b".into()],
            vec![],
        )
    }

    /// `(type, ts)` of every TrackEvent, read back with a minimal decoder.
    fn steps(bytes: &[u8]) -> Vec<(u64, u64, u64)> {
        fn varint(b: &[u8], at: &mut usize) -> u64 {
            let (mut v, mut shift) = (0u64, 0);
            loop {
                let byte = b[*at];
                *at += 1;
                v |= u64::from(byte & 0x7f) << shift;
                if byte < 0x80 {
                    return v;
                }
                shift += 7;
            }
        }
        fn fields(b: &[u8]) -> Vec<(u32, Result<u64, &[u8]>)> {
            let mut at = 0;
            let mut out = Vec::new();
            while at < b.len() {
                let key = varint(b, &mut at);
                let (f, wire) = ((key >> 3) as u32, key & 7);
                match wire {
                    0 => out.push((f, Ok(varint(b, &mut at)))),
                    1 => {
                        let v = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
                        at += 8;
                        out.push((f, Ok(v)));
                    }
                    2 => {
                        let n = varint(b, &mut at) as usize;
                        out.push((f, Err(&b[at..at + n])));
                        at += n;
                    }
                    _ => panic!("wire type {wire}"),
                }
            }
            out
        }
        let mut out = Vec::new();
        for (_, packet) in fields(bytes) {
            let packet = fields(packet.unwrap_err());
            let ts = packet.iter().find(|f| f.0 == field::TIMESTAMP);
            let te = packet.iter().find(|f| f.0 == field::TRACK_EVENT);
            if let (Some((_, Ok(ts))), Some((_, Err(te)))) = (ts, te) {
                let te = fields(te);
                let get = |n| te.iter().find(|f| f.0 == n).and_then(|f| f.1.ok());
                out.push((
                    get(field::TYPE).unwrap(),
                    *ts,
                    get(field::TRACK_UUID).unwrap(),
                ));
            }
        }
        out
    }

    #[test]
    fn nested_ranges_stay_on_one_track_and_close_innermost_first() {
        let idx = index(vec![
            ev(0, 100, 0),
            ev(10, 20, 1),
            ev(20, 30, 1),
            ev(100, 100, 0),
        ]);
        let flows = Flows::default();
        let bytes: Vec<u8> = Export::new(&idx, &flows).flatten().collect();
        let got = steps(&bytes);
        let track = 2; // the NVTX track (id 1) + 1
        assert_eq!(
            got,
            vec![
                (SLICE_BEGIN, 0, track),
                (SLICE_BEGIN, 10, track),
                (SLICE_END, 20, track),
                (SLICE_BEGIN, 20, track),
                (SLICE_END, 30, track),
                (SLICE_END, 100, track),
                (SLICE_BEGIN, 100, track),
                (SLICE_END, 100, track),
            ]
        );
    }

    #[test]
    fn overlapping_events_go_to_one_track_per_row() {
        // [0,50) and [10,60) overlap without nesting: two rows, two Perfetto tracks.
        let idx = index(vec![ev(0, 50, 0), ev(10, 60, 1)]);
        let flows = Flows::default();
        let got = steps(&Export::new(&idx, &flows).flatten().collect::<Vec<u8>>());
        let row = |r: u64| ROW_UUIDS | 1 << 8 | r;
        assert_eq!(
            got,
            vec![
                (SLICE_BEGIN, 0, row(0)),
                (SLICE_BEGIN, 10, row(1)),
                (SLICE_END, 50, row(0)),
                (SLICE_END, 60, row(1)),
            ]
        );
    }

    #[test]
    fn a_large_trace_comes_in_bounded_chunks() {
        let events = (0..200_000)
            .map(|i| ev(i * 10, i * 10 + 5, (i % 2) as u32))
            .collect();
        let idx = index(events);
        let flows = Flows::default();
        let chunks: Vec<Vec<u8>> = Export::new(&idx, &flows).collect();
        assert!(chunks.len() > 1);
        assert!(chunks.iter().all(|c| c.len() < CHUNK + 1024));
        let all: Vec<u8> = chunks.concat();
        assert_eq!(steps(&all).len(), 400_000);
    }
}
