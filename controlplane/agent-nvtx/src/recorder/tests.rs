//! Unit tests of the recorder: nesting, windows, generations, cross-thread ranges, names.

use super::*;

fn named(text: &str) -> impl FnOnce() -> Attrs + '_ {
    move || Attrs {
        text: Some(text.to_owned()),
        ..Attrs::default()
    }
}

fn no_names(_: u32) -> Option<String> {
    None
}

#[test]
fn nested_push_pop_inside_the_window_are_kept_with_their_times_and_levels() {
    let r = Recorder::new(7, "app".into());
    let log = r.register_thread(8);
    let mut log = log.lock().unwrap();
    assert!(r.start(100, 5_000));
    assert_eq!(r.push(&mut log, 110, 0, named("outer")), 0);
    assert_eq!(r.push(&mut log, 120, 0, named("inner")), 1);
    assert_eq!(r.pop(&mut log, 130, 0), 1);
    assert_eq!(r.pop(&mut log, 150, 0), 0);
    assert_eq!(r.pop(&mut log, 160, 0), -1, "nothing left to pop");
    drop(log);
    let dump = r.stop(200, no_names);
    assert_eq!(
        dump.window,
        Window {
            start_ns: 100,
            end_ns: 200,
            utc_start_ns: 5_000
        }
    );
    let got: Vec<_> = dump
        .events
        .iter()
        .map(|e| (e.text.as_deref().unwrap(), e.start, e.end, e.tid))
        .collect();
    assert_eq!(
        got,
        [("outer", 110, Some(150), 8), ("inner", 120, Some(130), 8)]
    );
    assert!(!r.is_recording());
}

#[test]
fn ranges_outside_the_window_are_dropped_and_open_ones_have_no_end() {
    let r = Recorder::new(1, "app".into());
    let log = r.register_thread(1);
    let mut log = log.lock().unwrap();
    r.push(&mut log, 10, 0, named("before"));
    r.start(20, 0);
    assert_eq!(
        r.pop(&mut log, 30, 0),
        0,
        "the pop still matches the early push"
    );
    r.push(&mut log, 40, 0, named("open"));
    drop(log);
    let dump = r.stop(50, no_names);
    assert_eq!(dump.events.len(), 1);
    assert_eq!(dump.events[0].text.as_deref(), Some("open"));
    assert_eq!(dump.events[0].end, None);
}

#[test]
fn a_second_window_holds_only_its_own_events() {
    let r = Recorder::new(1, "app".into());
    let log = r.register_thread(1);
    r.start(0, 0);
    {
        let mut l = log.lock().unwrap();
        r.push(&mut l, 1, 0, named("first"));
        r.pop(&mut l, 2, 0);
        r.push(&mut l, 3, 0, named("spans both"));
    }
    assert_eq!(r.stop(4, no_names).events.len(), 2);
    {
        let mut l = log.lock().unwrap();
        r.push(&mut l, 5, 0, named("between"));
        r.pop(&mut l, 6, 0);
    }
    r.start(10, 0);
    {
        let mut l = log.lock().unwrap();
        r.pop(&mut l, 11, 0); // ends "spans both": begun in the old window, dropped
        r.push(&mut l, 12, 0, named("second"));
        r.pop(&mut l, 13, 0);
    }
    let dump = r.stop(20, no_names);
    let texts: Vec<_> = dump
        .events
        .iter()
        .filter_map(|e| e.text.as_deref())
        .collect();
    assert_eq!(texts, ["second"]);
}

#[test]
fn start_end_ranges_may_end_on_another_thread() {
    let r = Recorder::new(3, "app".into());
    r.start(0, 0);
    let id = r.range_start(5, 31, 0, named("io"));
    assert_ne!(id, 0);
    r.range_end(9, 32, id);
    r.range_end(9, 32, 12345); // unknown: ignored
    let dump = r.stop(10, no_names);
    let e = &dump.events[0];
    assert_eq!(
        (e.kind, e.start, e.end, e.tid, e.end_tid),
        (EventKind::StartEnd, 5, Some(9), 31, Some(32))
    );
    assert_eq!(e.range_id, Some(id));
}

#[test]
fn domains_pop_their_own_stack() {
    let r = Recorder::new(1, "app".into());
    let log = r.register_thread(1);
    let mut log = log.lock().unwrap();
    r.start(0, 0);
    let d = r.domain_create(0, "mydomain".into());
    assert_eq!(r.push(&mut log, 1, d, named("in d")), 0);
    assert_eq!(r.push(&mut log, 2, 0, named("default")), 0);
    assert_eq!(r.pop(&mut log, 3, d), 0);
    assert_eq!(r.pop(&mut log, 4, 0), 0);
    drop(log);
    let dump = r.stop(5, no_names);
    let ranges: Vec<_> = dump
        .events
        .iter()
        .filter(|e| e.kind == EventKind::PushPop)
        .map(|e| (e.text.as_deref().unwrap(), e.domain, e.end))
        .collect();
    assert_eq!(ranges, [("in d", d, Some(3)), ("default", 0, Some(4))]);
    let domain = dump
        .events
        .iter()
        .find(|e| e.kind == EventKind::DomainCreate)
        .unwrap();
    assert_eq!(
        (domain.domain, domain.text.as_deref()),
        (d, Some("mydomain"))
    );
}

#[test]
fn names_strings_and_marks_reach_the_dump() {
    let r = Recorder::new(1, "app".into());
    let log = r.register_thread(2);
    let mut log = log.lock().unwrap();
    let s = r.register_string(0, "registered".into());
    assert_eq!(
        r.register_string(0, "registered".into()),
        s,
        "registering again reuses the id"
    );
    r.name_category(0, 0, 4, "io".into());
    r.name_thread(2, "worker".into());
    r.mark(&mut log, 1, 0, named("not recorded"));
    r.start(10, 0);
    r.mark(&mut log, 11, 0, || Attrs {
        text_id: Some(s),
        category: 4,
        ..Attrs::default()
    });
    drop(log);
    let dump = r.stop(20, |tid| Some(format!("os-{tid}")));
    assert_eq!(
        dump.strings,
        [RegisteredString {
            id: s,
            domain: 0,
            value: "registered".into()
        }]
    );
    let marks: Vec<_> = dump
        .events
        .iter()
        .filter(|e| e.kind == EventKind::Mark)
        .collect();
    assert_eq!(marks.len(), 1);
    assert_eq!((marks[0].text_id, marks[0].category), (Some(s), 4));
    let category = dump
        .events
        .iter()
        .find(|e| e.kind == EventKind::Category)
        .unwrap();
    assert_eq!(
        (category.start, category.category, category.text.as_deref()),
        (10, 4, Some("io"))
    );
    assert!(dump.thread_names.contains(&ThreadName {
        tid: 2,
        name: "worker".into()
    }));
}

#[test]
fn stop_without_start_gives_an_empty_window_and_start_is_idempotent() {
    let r = Recorder::new(1, "app".into());
    let dump = r.stop(42, no_names);
    assert!(dump.events.is_empty());
    assert_eq!((dump.window.start_ns, dump.window.end_ns), (42, 42));
    assert!(r.start(50, 0));
    assert!(!r.start(60, 0), "a repeated START keeps the first window");
    assert_eq!(r.stop(70, no_names).window.start_ns, 50);
}
