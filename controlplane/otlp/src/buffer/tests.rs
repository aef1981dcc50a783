//! Bounds, durability across reopen, sealing and the automatic conversion of late spans.

#![allow(clippy::unwrap_used, reason = "tests")]

use super::*;

fn id(c: &str) -> CollectionId {
    CollectionId {
        session: "s/1".into(),
        collection: c.into(),
    }
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("otlp-buffer-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

#[test]
fn admit_refuses_past_either_bound_with_the_bound_named() {
    let limits = Limits {
        max_collection_bytes: 100,
        max_total_bytes: 150,
    };
    let (a, b) = (id("a"), id("b"));
    assert!(admit(&limits, 0, &[(&a, 50, 50)]).is_ok());
    let refused = admit(&limits, 0, &[(&a, 50, 51)]).unwrap_err();
    assert!(
        refused.to_string().contains("--max-collection-bytes"),
        "{refused}"
    );
    let refused = admit(&limits, 100, &[(&a, 50, 30), (&b, 0, 30)]).unwrap_err();
    assert!(matches!(
        refused,
        Refusal::Total {
            held: 100,
            incoming: 60,
            max: 150
        }
    ));
}

#[test]
fn appended_spans_survive_a_reopen_and_seal_into_numbered_segments() {
    let root = tmp("reopen");
    let limits = Limits::default();
    {
        let mut buffer = Buffer::open(&root, limits).unwrap();
        buffer
            .append(&[(id("1"), b"a".to_vec()), (id("2"), b"bb".to_vec())])
            .unwrap();
        buffer.append(&[(id("1"), b"c".to_vec())]).unwrap();
    }
    let mut buffer = Buffer::open(&root, limits).unwrap();
    assert_eq!(buffer.held(), 3 * 8 + 4);
    buffer.stop(&id("1")).unwrap();
    let sealed = buffer.seal(&id("1")).unwrap();
    assert_eq!(sealed.len(), 1);
    let mut frames = Vec::new();
    crate::log::read(&sealed[0].1, |p| frames.push(p.to_vec())).unwrap();
    assert_eq!(frames, [b"a".to_vec(), b"c".to_vec()]);
    // A late span after the stop goes to a new segment, due once quiet.
    buffer.append(&[(id("1"), b"late".to_vec())]).unwrap();
    buffer.remove_sealed(&id("1"), sealed[0].0).unwrap();
    assert!(buffer.due(Duration::from_secs(60)).is_empty());
    assert_eq!(buffer.due(Duration::ZERO), [id("1")]);
    drop(buffer);
    let mut buffer = Buffer::open(&root, limits).unwrap();
    let list = buffer.list();
    assert!(list[0].stopped && list[0].active_bytes == 12, "{list:?}");
    let sealed = buffer.seal(&id("1")).unwrap();
    assert_eq!(sealed[0].0, 1, "numbers are never reused");
    assert!(!buffer.list()[1].stopped);
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_full_collection_refuses_and_keeps_what_it_had() {
    let root = tmp("full");
    let mut buffer = Buffer::open(
        &root,
        Limits {
            max_collection_bytes: 20,
            max_total_bytes: 1000,
        },
    )
    .unwrap();
    buffer.append(&[(id("1"), vec![0; 10])]).unwrap();
    let err = buffer.append(&[(id("1"), vec![0; 10])]).unwrap_err();
    assert!(matches!(err, BufferError::Full(Refusal::Collection { .. })));
    assert_eq!(buffer.held(), 18);
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn ids_that_sanitise_alike_keep_separate_logs() {
    let root = tmp("alike");
    let (a, b) = (id("a b"), id("a-b"));
    {
        let mut buffer = Buffer::open(&root, Limits::default()).unwrap();
        buffer
            .append(&[
                (a.clone(), b"first".to_vec()),
                (b.clone(), b"second".to_vec()),
            ])
            .unwrap();
    }
    let mut buffer = Buffer::open(&root, Limits::default()).unwrap();
    for (id, want) in [(a, b"first".to_vec()), (b, b"second".to_vec())] {
        let sealed = buffer.seal(&id).unwrap();
        let mut frames = Vec::new();
        crate::log::read(&sealed[0].1, |p| frames.push(p.to_vec())).unwrap();
        assert_eq!(frames, [want]);
    }
    fs::remove_dir_all(&root).unwrap();
}
