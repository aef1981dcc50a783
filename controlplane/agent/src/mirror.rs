//! NVTX mirroring, the pure part: what one process recorded in one collection (its [`Dump`]) as
//! OTLP trace export requests, with the attributes the OTLP converter reads
//! (`nsight_contracts::otlp`, docs/otlp.md), so a collector sees the ranges as spans and the
//! converter turns them back into the same NVTX rows.
//!
//! ```text
//!  Dump ──ranges with an end──> spans (name = range text, CLOCK_MONOTONIC -> Unix time)
//!       resource: nsight.session/collection/tag, process.pid/executable.name, k8s pod/namespace/container
//!       span: thread.id/name, nvtx.domain, nvtx.category(.name), nvtx.color, nvtx.payload
//!       parent: the innermost push/pop range of the same thread that contains it
//!       marks: events of the innermost push/pop range containing them (others are counted)
//!  ──> ExportTraceServiceRequest, at most BATCH_SPANS spans each
//! ```
//! Ranges still open at the dump are not spans (they have no end); they are counted too.

use std::collections::HashMap;

use nsight_contracts::otlp::{attributes as nsight, semconv};
use nsight_nvtx::dump::{Dump, Event, EventKind, Payload};

use crate::proto::otlp::{
    collector::ExportTraceServiceRequest,
    common::{any_value::Value, AnyValue, InstrumentationScope, KeyValue},
    resource::Resource,
    trace::{span::Event as SpanEvent, span::SpanKind, ResourceSpans, ScopeSpans, Span},
};

/// Spans per export request: well under the converter's and the collector's default body
/// limits (a span is a few hundred bytes).
pub const BATCH_SPANS: usize = 2_000;

/// Where the spans come from: the resource attributes that place them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub session: String,
    pub collection: String,
    pub tag: String,
    pub pod: String,
    pub namespace: String,
    pub container: String,
}

/// One dump as export requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Mirrored {
    pub requests: Vec<ExportTraceServiceRequest>,
    /// Spans in `requests`.
    pub spans: usize,
    /// Records that are not spans: marks outside any push/pop range, ranges still open.
    pub not_mirrored: usize,
}

/// The spans of `dump`. `ids` seeds the trace and span ids (random in the agent, fixed in
/// tests): the trace id is `ids` itself, span ids count up from its low half.
pub fn mirror(dump: &Dump, origin: &Origin, ids: u128) -> Mirrored {
    let texts: HashMap<u64, &str> = dump
        .strings
        .iter()
        .map(|s| (s.id, s.value.as_str()))
        .collect();
    let threads: HashMap<u32, &str> = dump
        .thread_names
        .iter()
        .map(|t| (t.tid, t.name.as_str()))
        .collect();
    let mut domains: HashMap<u64, String> = HashMap::new();
    let mut categories: HashMap<(u64, u32), String> = HashMap::new();
    for e in &dump.events {
        match e.kind {
            EventKind::DomainCreate => {
                domains.insert(e.domain, text_of(e, &texts));
            }
            EventKind::Category => {
                categories.insert((e.domain, e.category), text_of(e, &texts));
            }
            _ => {}
        }
    }
    let utc = |t: u64| {
        dump.window
            .utc_start_ns
            .saturating_add(t.saturating_sub(dump.window.start_ns))
    };

    // Ranges with an end and marks, in time order (on ties a range before a mark, and the
    // longer range first, so containers come before what they contain).
    let mut sweep: Vec<&Event> = dump
        .events
        .iter()
        .filter(|e| {
            e.kind == EventKind::Mark
                || (matches!(e.kind, EventKind::PushPop | EventKind::StartEnd) && e.end.is_some())
        })
        .collect();
    sweep.sort_by_key(|e| (e.start, e.kind == EventKind::Mark, std::cmp::Reverse(e.end)));
    let open = dump
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::PushPop | EventKind::StartEnd) && e.end.is_none())
        .count();

    let trace_id = ids.to_be_bytes().to_vec();
    let first_span = u64::try_from(ids & u128::from(u64::MAX)).unwrap_or_default();
    let span_id = |i: usize| {
        first_span
            .wrapping_add(u64::try_from(i).unwrap_or(u64::MAX))
            .wrapping_add(1)
            .to_be_bytes()
            .to_vec()
    };
    let mut spans: Vec<Span> = Vec::new();
    let mut stray_marks = 0;
    // Per thread, the push/pop ranges open at the sweep's point: (span index, end). Push/pop
    // ranges of one thread nest, so each stack is ordered outermost first.
    let mut stacks: HashMap<u32, Vec<(usize, u64)>> = HashMap::new();
    for e in sweep {
        let stack = stacks.entry(e.tid).or_default();
        while stack.last().is_some_and(|&(_, end)| end < e.start) {
            stack.pop();
        }
        if e.kind == EventKind::Mark {
            match stack.last() {
                Some(&(i, _)) => spans[i].events.push(SpanEvent {
                    time_unix_nano: utc(e.start),
                    name: text_of(e, &texts),
                    ..Default::default()
                }),
                None => stray_marks += 1,
            }
            continue;
        }
        let end = e.end.unwrap_or(e.start);
        let i = spans.len();
        let parent = stack
            .iter()
            .rev()
            .find(|&&(_, open_end)| open_end >= end)
            .map(|&(p, _)| span_id(p));
        if e.kind == EventKind::PushPop {
            stack.push((i, end));
        }
        spans.push(Span {
            trace_id: trace_id.clone(),
            span_id: span_id(i),
            parent_span_id: parent.unwrap_or_default(),
            name: text_of(e, &texts),
            kind: SpanKind::Internal.into(),
            start_time_unix_nano: utc(e.start),
            end_time_unix_nano: utc(end),
            attributes: span_attributes(e, &threads, &domains, &categories),
            ..Default::default()
        });
    }

    let resource = Resource {
        attributes: vec![
            text(nsight::SESSION, &origin.session),
            text(nsight::COLLECTION, &origin.collection),
            text(nsight::TAG, &origin.tag),
            int(semconv::PROCESS_PID, i64::from(dump.pid)),
            text(semconv::PROCESS_EXECUTABLE_NAME, &dump.process_name),
            text(semconv::SERVICE_NAME, &dump.process_name),
            text(semconv::K8S_POD_NAME, &origin.pod),
            text(semconv::K8S_NAMESPACE_NAME, &origin.namespace),
            text(semconv::K8S_CONTAINER_NAME, &origin.container),
        ],
        ..Default::default()
    };
    let count = spans.len();
    let mut requests = Vec::with_capacity(count.div_ceil(BATCH_SPANS));
    let mut rest = spans;
    while !rest.is_empty() {
        let tail = rest.split_off(rest.len().min(BATCH_SPANS));
        requests.push(ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(resource.clone()),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "nsight-agent".into(),
                        version: env!("CARGO_PKG_VERSION").into(),
                        ..Default::default()
                    }),
                    spans: rest,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        });
        rest = tail;
    }
    Mirrored {
        requests,
        spans: count,
        not_mirrored: stray_marks + open,
    }
}

/// An event's text: its message, its registered string, or empty (NVTX allows no message).
fn text_of(e: &Event, texts: &HashMap<u64, &str>) -> String {
    e.text
        .clone()
        .or_else(|| {
            e.text_id
                .and_then(|id| texts.get(&id))
                .map(|s| (*s).to_owned())
        })
        .unwrap_or_default()
}

fn span_attributes(
    e: &Event,
    threads: &HashMap<u32, &str>,
    domains: &HashMap<u64, String>,
    categories: &HashMap<(u64, u32), String>,
) -> Vec<KeyValue> {
    let mut out = vec![int(semconv::THREAD_ID, i64::from(e.tid))];
    if let Some(name) = threads.get(&e.tid) {
        out.push(text(semconv::THREAD_NAME, name));
    }
    if let Some(domain) = domains.get(&e.domain).filter(|_| e.domain != 0) {
        out.push(text(nsight::NVTX_DOMAIN, domain));
    }
    if e.category != 0 {
        out.push(int(nsight::NVTX_CATEGORY, i64::from(e.category)));
        if let Some(name) = categories.get(&(e.domain, e.category)) {
            out.push(text(nsight::NVTX_CATEGORY_NAME, name));
        }
    }
    if let Some(color) = e.color {
        out.push(int(nsight::NVTX_COLOR, i64::from(color)));
    }
    if let Some(p) = e.payload {
        out.push(payload(p));
    }
    out
}

fn payload(p: Payload) -> KeyValue {
    let key = nsight::NVTX_PAYLOAD;
    match p {
        Payload::U64(v) => match i64::try_from(v) {
            Ok(i) => int(key, i),
            #[allow(clippy::cast_precision_loss, reason = "beyond i64, as a double")]
            Err(_) => double(key, v as f64),
        },
        Payload::I64(v) => int(key, v),
        Payload::U32(v) => int(key, i64::from(v)),
        Payload::I32(v) => int(key, i64::from(v)),
        Payload::F64(v) => double(key, v),
        Payload::F32(v) => double(key, f64::from(v)),
    }
}

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn text(key: &str, value: &str) -> KeyValue {
    kv(key, Value::StringValue(value.to_owned()))
}

fn int(key: &str, value: i64) -> KeyValue {
    kv(key, Value::IntValue(value))
}

fn double(key: &str, value: f64) -> KeyValue {
    kv(key, Value::DoubleValue(value))
}

#[cfg(test)]
#[path = "mirror_tests.rs"]
mod tests;
