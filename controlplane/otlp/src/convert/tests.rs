//! Spans become the ranges, marks, domains and categories NVTX would have recorded.

#![allow(clippy::unwrap_used, reason = "tests")]

use super::*;
use crate::proto::{
    common::{AnyValue, KeyValue},
    resource::Resource,
    trace::{span::Event as SpanEvent, ResourceSpans, ScopeSpans, Span},
};

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn s(v: &str) -> Value {
    Value::StringValue(v.into())
}

fn span(name: &str, start: u64, end: u64, attrs: Vec<KeyValue>) -> Span {
    Span {
        name: name.into(),
        start_time_unix_nano: start,
        end_time_unix_nano: end,
        attributes: attrs,
        ..Default::default()
    }
}

fn request(pid: i64, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    kv(semconv::PROCESS_PID, Value::IntValue(pid)),
                    kv(semconv::SERVICE_NAME, s("trainer")),
                    kv(semconv::K8S_POD_NAME, s("pod-a")),
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[test]
fn nesting_is_time_containment_and_overlaps_become_start_end_ranges() {
    // outer [0,100) holds a [10,20) and b [30,90); b holds c [40,50); d [80,120) overlaps b.
    let nests = push_pop_nesting(&[(0, 100), (10, 20), (30, 90), (40, 50), (80, 120)]);
    assert_eq!(nests, [true, true, true, true, false]);
    // Back-to-back ranges both nest (a range ending at t is closed before one starting at t).
    assert_eq!(push_pop_nesting(&[(0, 10), (10, 20)]), [true, true]);
}

#[test]
fn spans_become_one_dump_per_process_with_their_nvtx_attributes() {
    let mut step = span(
        "step",
        1_000,
        1_500,
        vec![
            kv(NVTX_DOMAIN, s("train")),
            kv(NVTX_CATEGORY, Value::IntValue(3)),
            kv(NVTX_CATEGORY_NAME, s("compute")),
            kv(attributes::NVTX_COLOR, s("#ff0000")),
            kv(NVTX_PAYLOAD, Value::DoubleValue(0.5)),
            kv(semconv::THREAD_ID, Value::IntValue(12)),
            kv(semconv::THREAD_NAME, s("worker")),
        ],
    );
    step.events.push(SpanEvent {
        time_unix_nano: 1_200,
        name: "checkpoint".into(),
        ..Default::default()
    });
    let requests = [
        request(10, vec![span("epoch", 900, 2_000, vec![]), step]),
        request(11, vec![span("load", 5_000, 6_000, vec![])]),
    ];
    let out = dumps(rows(&requests));
    assert_eq!(out.len(), 2);
    let (a, b) = (&out[0], &out[1]);
    assert_eq!(
        (
            a.key.process.as_str(),
            a.key.instance.as_str(),
            a.key.pid,
            a.key.tag.as_str()
        ),
        ("trainer", "pod-a", 10, "default")
    );
    assert_eq!((a.spans, b.spans), (2, 1));
    assert_eq!(a.dump.window.start_ns, 900);
    assert_eq!(a.dump.window.end_ns, 2_000);
    let kinds: Vec<(EventKind, Option<&str>, u32)> = a
        .dump
        .events
        .iter()
        .map(|e| (e.kind, e.text.as_deref(), e.tid))
        .collect();
    assert_eq!(
        kinds,
        [
            (EventKind::DomainCreate, Some("train"), 10),
            (EventKind::Category, Some("compute"), 12),
            (EventKind::PushPop, Some("epoch"), 10),
            (EventKind::PushPop, Some("step"), 12),
            (EventKind::Mark, Some("checkpoint"), 12),
        ]
    );
    let step = &a.dump.events[3];
    assert_eq!((step.domain, step.category), (1, 3));
    assert_eq!(step.color, Some(0xffff_0000));
    assert_eq!(step.payload, Some(Payload::F64(0.5)));
    assert_eq!(step.end, Some(1_500));
    assert_eq!(
        a.dump.thread_names,
        [ThreadName {
            tid: 12,
            name: "worker".into()
        }]
    );
}
