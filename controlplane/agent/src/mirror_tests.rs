//! What a dump becomes as spans: times in Unix nanoseconds, parents from nesting, marks as span
//! events, the converter's attributes, batches.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use nsight_nvtx::dump::{RegisteredString, ThreadName, Window};

use super::*;

const START: u64 = 1_000;
const UTC: u64 = 1_700_000_000_000_000_000;

fn event(kind: EventKind, tid: u32, start: u64, end: Option<u64>, text: &str) -> Event {
    Event {
        kind,
        start,
        end,
        tid,
        end_tid: None,
        domain: 0,
        category: 0,
        color: None,
        text: Some(text.into()),
        text_id: None,
        payload: None,
        range_id: None,
    }
}

fn dump(events: Vec<Event>) -> Dump {
    Dump {
        pid: 4242,
        process_name: "trainer".into(),
        window: Window {
            start_ns: START,
            end_ns: 100_000,
            utc_start_ns: UTC,
        },
        strings: vec![RegisteredString {
            id: 9,
            domain: 3,
            value: "registered-step".into(),
        }],
        thread_names: vec![ThreadName {
            tid: 11,
            name: "worker".into(),
        }],
        events,
        cuda: None,
    }
}

fn origin() -> Origin {
    Origin {
        session: "s-1".into(),
        collection: "2".into(),
        tag: "train".into(),
        pod: "pod-a".into(),
        namespace: "research".into(),
        container: "main".into(),
    }
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn spans(m: &Mirrored) -> Vec<&Span> {
    m.requests
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|rs| &rs.scope_spans)
        .flat_map(|ss| &ss.spans)
        .collect()
}

#[test]
fn ranges_become_spans_in_unix_time_with_parents_from_nesting() {
    let d = dump(vec![
        event(EventKind::PushPop, 10, 2_000, Some(9_000), "outer"),
        event(EventKind::PushPop, 10, 3_000, Some(4_000), "inner"),
        event(EventKind::PushPop, 10, 5_000, Some(6_000), "inner"),
        event(EventKind::StartEnd, 10, 8_000, Some(20_000), "async"),
        event(EventKind::PushPop, 11, 3_500, Some(3_600), "other-thread"),
    ]);
    let m = mirror(&d, &origin(), 0xabc_u128 << 64 | 100);
    assert_eq!(m.spans, 5);
    assert_eq!(m.not_mirrored, 0);
    let all = spans(&m);
    let by_name = |n: &str| all.iter().filter(|s| s.name == n).collect::<Vec<_>>();
    let outer = by_name("outer")[0];
    assert_eq!(outer.start_time_unix_nano, UTC + 1_000);
    assert_eq!(outer.end_time_unix_nano, UTC + 8_000);
    assert!(outer.parent_span_id.is_empty());
    assert_eq!(
        outer.trace_id,
        (0xabc_u128 << 64 | 100).to_be_bytes().to_vec()
    );
    for inner in by_name("inner") {
        assert_eq!(inner.parent_span_id, outer.span_id, "inner nests in outer");
        assert_eq!(inner.end_time_unix_nano - inner.start_time_unix_nano, 1_000);
    }
    // Starts in outer but ends after it: not its child.
    assert!(by_name("async")[0].parent_span_id.is_empty());
    // Another thread's range is never a child of this thread's.
    let other = by_name("other-thread")[0];
    assert!(other.parent_span_id.is_empty());
    assert_eq!(
        attr(&other.attributes, semconv::THREAD_NAME),
        Some(&Value::StringValue("worker".into()))
    );
    assert_eq!(
        attr(&other.attributes, semconv::THREAD_ID),
        Some(&Value::IntValue(11))
    );
    let mut ids: Vec<_> = all.iter().map(|s| s.span_id.clone()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 5, "span ids are unique");
}

#[test]
fn the_resource_places_the_spans_for_the_converter() {
    let d = dump(vec![event(EventKind::PushPop, 10, 2_000, Some(3_000), "r")]);
    let m = mirror(&d, &origin(), 1);
    let resource = m.requests[0].resource_spans[0].resource.as_ref().unwrap();
    let get = |k: &str| attr(&resource.attributes, k).cloned();
    let s = |v: &str| Some(Value::StringValue(v.into()));
    assert_eq!(get(nsight::SESSION), s("s-1"));
    assert_eq!(get(nsight::COLLECTION), s("2"));
    assert_eq!(get(nsight::TAG), s("train"));
    assert_eq!(get(semconv::PROCESS_PID), Some(Value::IntValue(4242)));
    assert_eq!(get(semconv::PROCESS_EXECUTABLE_NAME), s("trainer"));
    assert_eq!(get(semconv::K8S_POD_NAME), s("pod-a"));
    assert_eq!(get(semconv::K8S_NAMESPACE_NAME), s("research"));
    assert_eq!(get(semconv::K8S_CONTAINER_NAME), s("main"));
}

#[test]
fn domains_categories_colours_payloads_and_registered_strings_are_attributes() {
    let mut domain = event(EventKind::DomainCreate, 10, 1_500, None, "cdomain");
    domain.domain = 3;
    let mut category = event(EventKind::Category, 10, 1_600, None, "io");
    category.domain = 3;
    category.category = 7;
    let mut range = event(EventKind::PushPop, 10, 2_000, Some(3_000), "");
    range.text = None;
    range.text_id = Some(9);
    range.domain = 3;
    range.category = 7;
    range.color = Some(0xFF00_FF00);
    range.payload = Some(Payload::I64(42));
    let mut big = event(EventKind::PushPop, 10, 4_000, Some(5_000), "big");
    big.payload = Some(Payload::U64(u64::MAX));
    let m = mirror(&dump(vec![domain, category, range, big]), &origin(), 1);
    assert_eq!(m.spans, 2, "domain and category events are not spans");
    let all = spans(&m);
    let step = all.iter().find(|s| s.name == "registered-step").unwrap();
    let a = &step.attributes;
    assert_eq!(
        attr(a, nsight::NVTX_DOMAIN),
        Some(&Value::StringValue("cdomain".into()))
    );
    assert_eq!(attr(a, nsight::NVTX_CATEGORY), Some(&Value::IntValue(7)));
    assert_eq!(
        attr(a, nsight::NVTX_CATEGORY_NAME),
        Some(&Value::StringValue("io".into()))
    );
    assert_eq!(
        attr(a, nsight::NVTX_COLOR),
        Some(&Value::IntValue(0xFF00_FF00))
    );
    assert_eq!(attr(a, nsight::NVTX_PAYLOAD), Some(&Value::IntValue(42)));
    let big = all.iter().find(|s| s.name == "big").unwrap();
    assert!(attr(&big.attributes, nsight::NVTX_DOMAIN).is_none());
    assert_eq!(
        attr(&big.attributes, nsight::NVTX_PAYLOAD),
        Some(&Value::DoubleValue(1.8446744073709552e19))
    );
}

#[test]
fn marks_join_the_innermost_range_and_the_rest_are_counted() {
    let d = dump(vec![
        event(EventKind::PushPop, 10, 2_000, Some(9_000), "outer"),
        event(EventKind::PushPop, 10, 3_000, Some(4_000), "inner"),
        event(EventKind::Mark, 10, 3_500, None, "in-inner"),
        event(EventKind::Mark, 10, 5_000, None, "in-outer"),
        event(EventKind::Mark, 10, 9_500, None, "outside"),
        event(EventKind::Mark, 11, 3_500, None, "other-thread"),
        event(EventKind::PushPop, 10, 9_600, None, "still-open"),
    ]);
    let m = mirror(&d, &origin(), 1);
    let all = spans(&m);
    let events = |n: &str| {
        all.iter()
            .find(|s| s.name == n)
            .unwrap()
            .events
            .iter()
            .map(|e| (e.name.clone(), e.time_unix_nano))
            .collect::<Vec<_>>()
    };
    assert_eq!(events("inner"), vec![("in-inner".to_owned(), UTC + 2_500)]);
    assert_eq!(events("outer"), vec![("in-outer".to_owned(), UTC + 4_000)]);
    assert_eq!(m.spans, 2);
    assert_eq!(m.not_mirrored, 3, "two stray marks and one open range");
}

#[test]
fn large_dumps_are_split_into_batches_with_the_resource_on_each() {
    let events = (0..BATCH_SPANS as u64 * 2 + 1)
        .map(|i| {
            event(
                EventKind::PushPop,
                10,
                START + i * 10,
                Some(START + i * 10 + 5),
                "r",
            )
        })
        .collect();
    let m = mirror(&dump(events), &origin(), 1);
    assert_eq!(m.requests.len(), 3);
    assert_eq!(spans(&m).len(), BATCH_SPANS * 2 + 1);
    for r in &m.requests {
        assert!(r.resource_spans[0].resource.is_some());
    }
    assert_eq!(mirror(&dump(Vec::new()), &origin(), 1).requests.len(), 0);
}
