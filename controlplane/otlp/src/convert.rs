//! Spans to report rows (pure): one [`Dump`] per process of a collection, the same plain data the
//! agent's injection library produces, so the agent's report writer (`nsight-report`) writes it.
//!
//! ```text
//!  ExportTraceServiceRequest* ──rows──> SpanRow (per span) ──group by process──> ProcessDump
//!      span            -> NVTX push/pop range on the span's thread (start/end when it would
//!                         break the thread's push/pop nesting: overlapping async spans)
//!      span event      -> NVTX mark on the same thread
//!      nvtx.domain     -> a domain (created once per report), nvtx.category(.name) -> category
//! ```
//! Times stay in OTLP's clock (nanoseconds since the Unix epoch); the report's window starts at
//! the earliest span, and its session start time is that instant (so UTC and "system clock"
//! agree). Nesting on a thread is time containment, as NVTX push/pop ranges have it; a span's
//! parent only matters through its time.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use nsight_nvtx::dump::{Dump, Event, EventKind, Payload, ThreadName, Window};

use crate::{
    attributes::{
        self, semconv, NVTX_CATEGORY, NVTX_CATEGORY_NAME, NVTX_DOMAIN, NVTX_PAYLOAD, TAG,
    },
    proto::{collector::ExportTraceServiceRequest, common::any_value::Value, common::KeyValue},
};

/// The process a report is for: the report key's fields and the dump's process.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ProcessKey {
    pub tag: String,
    /// The pod (or host) the process ran in.
    pub instance: String,
    pub process: String,
    pub pid: u32,
}

/// One span, reduced to what the report needs.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRow {
    /// Shared by the rows of one resource.
    pub process: Arc<ProcessKey>,
    pub tid: u32,
    pub thread_name: Option<String>,
    pub name: String,
    pub start: u64,
    pub end: u64,
    pub domain: Option<String>,
    pub category: Option<(u32, Option<String>)>,
    pub color: Option<u32>,
    pub payload: Option<Payload>,
    /// Span events: (time, name), written as marks.
    pub marks: Vec<(u64, String)>,
}

/// One process's report content.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessDump {
    pub key: ProcessKey,
    pub dump: Dump,
    pub spans: u64,
}

fn payload(attrs: &[KeyValue]) -> Option<Payload> {
    match attributes::find(attrs, NVTX_PAYLOAD)? {
        Value::IntValue(i) => Some(Payload::I64(*i)),
        Value::DoubleValue(d) => Some(Payload::F64(*d)),
        _ => None,
    }
}

/// The rows of every span in `requests`, in order.
pub fn rows(requests: &[ExportTraceServiceRequest]) -> Vec<SpanRow> {
    let mut out = Vec::new();
    for r in requests {
        append_rows(r, &mut out);
    }
    out
}

/// Appends the rows of `request`'s spans to `out` (a segment is read one request at a time, so
/// only rows stay in memory, not the decoded requests).
pub fn append_rows(request: &ExportTraceServiceRequest, out: &mut Vec<SpanRow>) {
    let empty = Vec::new();
    let mut processes: BTreeMap<ProcessKey, Arc<ProcessKey>> = BTreeMap::new();
    for rs in &request.resource_spans {
        let res = rs.resource.as_ref().map_or(&empty, |r| &r.attributes);
        let pid = attributes::int(res, semconv::PROCESS_PID)
            .and_then(|p| u32::try_from(p).ok())
            .unwrap_or(0);
        let process = attributes::text(res, semconv::PROCESS_EXECUTABLE_NAME)
            .or_else(|| attributes::text(res, semconv::SERVICE_NAME))
            .unwrap_or_else(|| "otlp".into());
        let instance = attributes::text(res, semconv::K8S_POD_NAME)
            .or_else(|| attributes::text(res, semconv::HOST_NAME))
            .unwrap_or_else(|| "otlp".into());
        for span in rs.scope_spans.iter().flat_map(|s| &s.spans) {
            let a = &span.attributes;
            let tag = attributes::text_of(a, res, TAG).unwrap_or_else(|| "default".into());
            let tid = attributes::int(a, semconv::THREAD_ID)
                .and_then(|t| u32::try_from(t).ok())
                .unwrap_or(pid);
            let category = attributes::int(a, NVTX_CATEGORY)
                .and_then(|c| u32::try_from(c).ok())
                .filter(|c| *c != 0)
                .map(|c| (c, attributes::text(a, NVTX_CATEGORY_NAME)));
            let start = span.start_time_unix_nano;
            let key = ProcessKey {
                tag,
                instance: instance.clone(),
                process: process.clone(),
                pid,
            };
            let key = Arc::clone(
                processes
                    .entry(key.clone())
                    .or_insert_with(|| Arc::new(key)),
            );
            out.push(SpanRow {
                process: key,
                tid,
                thread_name: attributes::text(a, semconv::THREAD_NAME),
                name: span.name.clone(),
                start,
                end: span.end_time_unix_nano.max(start),
                domain: attributes::text(a, NVTX_DOMAIN),
                category,
                color: attributes::color(a),
                payload: payload(a),
                marks: span
                    .events
                    .iter()
                    .map(|e| (e.time_unix_nano, e.name.clone()))
                    .collect(),
            });
        }
    }
}

/// For each range (indices into `ranges`, all on one thread): whether it nests as a push/pop
/// range. Ranges are taken by start time, longest first; one that starts inside an open range
/// but ends after it would break the stack and becomes a start/end range instead.
pub fn push_pop_nesting(ranges: &[(u64, u64)]) -> Vec<bool> {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| (ranges[i].0, std::cmp::Reverse(ranges[i].1)));
    let mut nests = vec![false; ranges.len()];
    let mut open: Vec<u64> = Vec::new();
    for i in order {
        let (start, end) = ranges[i];
        while open.last().is_some_and(|&top| top <= start) {
            open.pop();
        }
        if open.last().is_none_or(|&top| end <= top) {
            nests[i] = true;
            open.push(end);
        }
    }
    nests
}

/// Groups `rows` by process and builds each process's dump.
pub fn dumps(rows: Vec<SpanRow>) -> Vec<ProcessDump> {
    let mut by: BTreeMap<Arc<ProcessKey>, Vec<SpanRow>> = BTreeMap::new();
    for r in rows {
        by.entry(Arc::clone(&r.process)).or_default().push(r);
    }
    by.into_iter()
        .map(|(key, rows)| dump((*key).clone(), rows))
        .collect()
}

fn dump(key: ProcessKey, mut rows: Vec<SpanRow>) -> ProcessDump {
    // The window holds every range and mark (a span event may lie outside its span).
    let marks = || rows.iter().flat_map(|r| r.marks.iter().map(|m| m.0));
    let start = rows
        .iter()
        .map(|r| r.start)
        .chain(marks())
        .min()
        .unwrap_or(0);
    let end = rows
        .iter()
        .map(|r| r.end)
        .chain(marks())
        .max()
        .unwrap_or(start);
    let domains: BTreeMap<String, u64> = rows
        .iter()
        .filter_map(|r| r.domain.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .zip(1..)
        .collect();
    let domain_of = |r: &SpanRow| r.domain.as_deref().map_or(0, |d| domains[d]);
    let blank = |kind, start, tid| Event {
        kind,
        start,
        end: None,
        tid,
        end_tid: None,
        domain: 0,
        category: 0,
        color: None,
        text: None,
        text_id: None,
        payload: None,
        range_id: None,
    };
    let mut events = Vec::new();
    for (name, id) in &domains {
        events.push(Event {
            domain: *id,
            text: Some(name.clone()),
            ..blank(EventKind::DomainCreate, start, key.pid)
        });
    }
    let mut categories = BTreeSet::new();
    for r in &rows {
        if let Some((id, Some(name))) = &r.category {
            if categories.insert((domain_of(r), *id)) {
                events.push(Event {
                    domain: domain_of(r),
                    category: *id,
                    text: Some(name.clone()),
                    ..blank(EventKind::Category, start, r.tid)
                });
            }
        }
    }
    let mut threads: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        threads.entry(r.tid).or_default().push(i);
    }
    let mut range_id = 0u64;
    let mut thread_names = Vec::new();
    for (tid, idx) in &threads {
        if let Some(name) = idx.iter().find_map(|&i| rows[i].thread_name.clone()) {
            thread_names.push(ThreadName { tid: *tid, name });
        }
        let spans: Vec<(u64, u64)> = idx.iter().map(|&i| (rows[i].start, rows[i].end)).collect();
        for (&i, nests) in idx.iter().zip(push_pop_nesting(&spans)) {
            let r = &mut rows[i];
            let domain = domain_of(r);
            let kind = if nests {
                EventKind::PushPop
            } else {
                range_id += 1;
                EventKind::StartEnd
            };
            events.push(Event {
                end: Some(r.end),
                end_tid: (!nests).then_some(r.tid),
                domain,
                category: r.category.as_ref().map_or(0, |c| c.0),
                color: r.color,
                text: Some(std::mem::take(&mut r.name)),
                payload: r.payload,
                range_id: (!nests).then_some(range_id),
                ..blank(kind, r.start, r.tid)
            });
            for (at, name) in std::mem::take(&mut r.marks) {
                events.push(Event {
                    domain,
                    text: Some(name),
                    ..blank(EventKind::Mark, at, r.tid)
                });
            }
        }
    }
    let spans = rows.len() as u64;
    ProcessDump {
        dump: Dump {
            pid: key.pid,
            process_name: key.process.clone(),
            window: Window {
                start_ns: start,
                end_ns: end,
                utc_start_ns: start,
            },
            strings: Vec::new(),
            thread_names,
            events,
            cuda: None,
        },
        key,
        spans,
    }
}

#[cfg(test)]
mod tests;
