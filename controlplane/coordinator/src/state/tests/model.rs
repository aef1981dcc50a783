//! The plain data of `model.rs`: validation of tags and titles, agent keys, IDs and the JSON
//! shape of persisted sessions.

use std::collections::BTreeMap;

use super::*;

#[test]
fn tags_are_validated() {
    assert_eq!(Tag::default().as_str(), "default");
    assert!(Tag::parse("train-v2.1_a").is_ok());
    assert_eq!(Tag::parse(""), Err(ValidationError::TagEmpty));
    assert_eq!(
        Tag::parse(&"a".repeat(64)),
        Err(ValidationError::TagTooLong { len: 64 })
    );
    assert!(Tag::parse(&"a".repeat(63)).is_ok());
    assert_eq!(
        Tag::parse("a b"),
        Err(ValidationError::TagInvalidChar { ch: ' ', index: 1 })
    );
    assert!(matches!(
        Tag::parse("é"),
        Err(ValidationError::TagInvalidChar { ch: 'é', .. })
    ));
}

#[test]
fn titles_are_validated() {
    assert!(Title::parse("resnet run 3 (batch 64) — ok").is_ok());
    assert!(
        Title::parse(&"é".repeat(256)).is_ok(),
        "limit counts characters"
    );
    assert_eq!(
        Title::parse(&"x".repeat(257)),
        Err(ValidationError::TitleTooLong { len: 257 })
    );
    assert_eq!(
        Title::parse("a\u{7}b"),
        Err(ValidationError::TitleControlChar {
            ch: '\u{7}',
            index: 1
        })
    );
    assert!(matches!(
        Title::parse("line\nbreak"),
        Err(ValidationError::TitleControlChar { .. })
    ));
    assert!(matches!(
        Title::parse(".."),
        Err(ValidationError::TitleDotName { .. })
    ));
    assert!(matches!(
        Title::parse("."),
        Err(ValidationError::TitleDotName { .. })
    ));
    assert!(Title::parse("...").is_ok());
    assert_eq!(
        Title::parse("a/b"),
        Err(ValidationError::TitlePathSeparator { ch: '/', index: 1 })
    );
    assert!(matches!(
        Title::parse("a\\b"),
        Err(ValidationError::TitlePathSeparator { ch: '\\', .. })
    ));
    assert_eq!(Title::parse(""), Err(ValidationError::TitleEmpty));
    let message = Title::parse("..").err().map(|e| e.to_string());
    assert!(message.is_some_and(|m| m.contains("directory")));
}

#[test]
fn validation_applies_when_deserializing() {
    let bad: Result<Tag, _> = serde_json::from_str("\"no spaces\"");
    assert!(bad.is_err());
    let bad: Result<Title, _> = serde_json::from_str("\"..\"");
    assert!(bad.is_err());
    let good: Tag = serde_json::from_str("\"ok\"").unwrap();
    assert_eq!(good.as_str(), "ok");
}

#[test]
fn agent_keys_are_injective() {
    let id = |ns: &str, pod: &str, process: &str| AgentIdentity {
        namespace: ns.into(),
        pod: pod.into(),
        container: "c".into(),
        process_name: process.into(),
        pid: 7,
    };
    assert_eq!(id("ns", "p", "python").key().as_str(), "ns/p/c/python/7");
    assert_ne!(id("a/b", "c", "x").key(), id("a", "b/c", "x").key());
    assert_ne!(id("a%2Fb", "c", "x").key(), id("a/b", "c", "x").key());
    assert_eq!(id("ns", "p", "x").key(), id("ns", "p", "x").key());
}

#[test]
fn session_json_is_camel_case_and_round_trips() {
    let mut agents = BTreeMap::new();
    agents.insert(
        AgentIdentity {
            namespace: "ns".into(),
            pod: "p".into(),
            container: "c".into(),
            process_name: "x".into(),
            pid: 1,
        }
        .key(),
        AgentOutcome::Uploaded {
            keys: vec!["r/1.nsys-rep".into()],
        },
    );
    let session = Session {
        id: SessionId::random(),
        tag: Tag::default(),
        title: Some(Title::parse("t").unwrap()),
        state: SessionState::Open,
        created_at: Millis(5),
        ended_at: None,
        collections: vec![Collection {
            id: CollectionId::FIRST,
            started_at: Millis(6),
            stop_requested_at: Some(Millis(7)),
            completed_at: Some(Millis(8)),
            state: CollectionState::Completed,
            agents,
        }],
    };
    let json = serde_json::to_value(&session).unwrap();
    assert_eq!(json["createdAt"], 5);
    assert_eq!(json["collections"][0]["stopRequestedAt"], 7);
    assert_eq!(json["collections"][0]["state"], "completed");
    assert_eq!(
        json["collections"][0]["agents"]["ns/p/c/x/1"]["state"],
        "uploaded"
    );
    let back: Session = serde_json::from_value(json).unwrap();
    assert_eq!(back, session);
}

#[test]
fn ids_parse_and_count() {
    assert_eq!(CollectionId::FIRST.next(), Some(CollectionId(2)));
    assert_eq!(CollectionId(u32::MAX).next(), None);
    let id = SessionId::random();
    assert_eq!(id.to_string().parse::<SessionId>(), Ok(id));
    assert!(matches!(
        "nope".parse::<SessionId>(),
        Err(ValidationError::SessionId { .. })
    ));
}
