//! User-facing lifecycle: sessions, collections and the errors of begin/start/stop/end.

use super::*;

#[test]
fn full_lifecycle_completes() {
    let (mut c, a, b, _) = with_agents();
    let t = Tag::default();
    let title = Some(Title::parse("resnet baseline").unwrap());
    let begun = c.begin_session(&t, title.clone(), at(1)).unwrap();
    let sid = begun.value;
    assert_eq!(persisted(&begun.effects), vec![sid]);
    assert_eq!(c.session(sid).unwrap().title, title);

    let started = c.start(&t, None, at(2)).unwrap();
    assert_eq!(started.value.session, sid);
    assert_eq!(started.value.collection, CollectionId(1));
    assert!(!started.value.session_created);
    assert_eq!(started.value.agents, 2);
    assert_eq!(
        sends(&started.effects),
        vec![
            (a.clone(), start_cmd(sid, 1)),
            (b.clone(), start_cmd(sid, 1))
        ]
    );
    assert!(
        matches!(started.effects[0], Effect::Persist { session } if session == sid),
        "persist comes before sends"
    );
    assert_eq!(outcome(&c, sid, 1, &a), AgentOutcome::Pending);

    for key in [&a, &b] {
        let acked = c
            .agent_acknowledged(key, sid, CollectionId(1), at(3))
            .unwrap();
        assert_eq!(persisted(&acked.effects), vec![sid]);
        assert_eq!(outcome(&c, sid, 1, key), AgentOutcome::Started);
    }

    let stopped = c.stop(&t, None, at(10)).unwrap();
    assert_eq!(stopped.value.agents, 2);
    assert_eq!(stopped.value.state, CollectionState::Stopping);
    assert_eq!(
        sends(&stopped.effects),
        vec![(a.clone(), stop_cmd(sid, 1)), (b.clone(), stop_cmd(sid, 1))]
    );
    assert_eq!(outcome(&c, sid, 1, &b), AgentOutcome::StopSent);
    assert_eq!(collection(&c, sid, 1).stop_requested_at, Some(at(10)));

    let keys_a = vec!["reports/a.nsys-rep".to_string()];
    let _ = c
        .agent_uploaded(&a, sid, CollectionId(1), keys_a.clone(), at(11))
        .unwrap();
    assert_eq!(collection(&c, sid, 1).state, CollectionState::Stopping);
    let last = c
        .agent_uploaded(
            &b,
            sid,
            CollectionId(1),
            vec!["reports/b.nsys-rep".into()],
            at(12),
        )
        .unwrap();
    assert_eq!(persisted(&last.effects), vec![sid]);
    let done = collection(&c, sid, 1);
    assert_eq!(done.state, CollectionState::Completed);
    assert_eq!(done.completed_at, Some(at(12)));
    assert_eq!(done.agents[&a], AgentOutcome::Uploaded { keys: keys_a });

    let ended = c.end_session(&t, None, at(20)).unwrap();
    assert_eq!(ended.value.stopped, None);
    let session = c.session(sid).unwrap();
    assert_eq!(session.state, SessionState::Ended);
    assert_eq!(session.ended_at, Some(at(20)));
    assert_eq!(c.status(&t).active_session, None);
}

#[test]
fn collections_of_a_session_are_numbered_from_one() {
    let (mut c, ..) = with_agents();
    let t = Tag::default();
    let first = c.start(&t, None, at(1)).unwrap().value;
    assert!(first.session_created, "start without a session opens one");
    let _ = c.stop(&t, None, at(2)).unwrap();
    let second = c.start(&t, Some(first.session), at(3)).unwrap().value;
    assert_eq!(first.collection, CollectionId(1));
    assert_eq!(second.collection, CollectionId(2));
    assert_eq!(second.session, first.session);
    assert!(!second.session_created);
    assert_eq!(c.session(first.session).unwrap().collections.len(), 2);
}

#[test]
fn start_while_collecting_is_a_conflict() {
    let (mut c, ..) = with_agents();
    let t = Tag::default();
    let sid = c.start(&t, None, at(1)).unwrap().value.session;
    let before = c.session(sid).unwrap().clone();
    let err = c.start(&t, None, at(2)).unwrap_err();
    assert_eq!(
        err,
        CoordError::AlreadyCollecting {
            session: sid,
            collection: CollectionId(1)
        }
    );
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(err.to_string().contains("profiler-stop"));
    assert_eq!(c.session(sid).unwrap(), &before);
}

#[test]
fn ending_an_ended_session_is_a_conflict() {
    let mut c = coordinator();
    let t = Tag::default();
    let sid = c.begin_session(&t, None, at(1)).unwrap().value;
    let _ = c.end_session(&t, Some(sid), at(2)).unwrap();
    let err = c.end_session(&t, Some(sid), at(3)).unwrap_err();
    assert_eq!(err, CoordError::SessionEnded { id: sid });
    assert_eq!(err.kind().http_status(), 409);
    assert_eq!(c.session(sid).unwrap().ended_at, Some(at(2)));
    // Without an ID there is no open session left to end.
    let err = c.end_session(&t, None, at(3)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    // An ended session cannot collect again.
    let err = c.start(&t, Some(sid), at(4)).unwrap_err();
    assert_eq!(err, CoordError::SessionEnded { id: sid });
}

#[test]
fn unknown_session_is_not_found() {
    let mut c = coordinator();
    let t = Tag::default();
    let id = SessionId::random();
    for err in [
        c.start(&t, Some(id), at(1)).unwrap_err(),
        c.stop(&t, Some(id), at(1)).unwrap_err(),
        c.end_session(&t, Some(id), at(1)).unwrap_err(),
        c.session(id).unwrap_err(),
    ] {
        assert_eq!(err, CoordError::UnknownSession { id });
        assert_eq!(err.kind().http_status(), 404);
    }
    assert!(c.sessions(&SessionFilter::default()).is_empty());
}

#[test]
fn a_session_of_another_tag_is_a_conflict() {
    let (mut c, ..) = with_agents();
    let other = tag("other");
    let sid = c.begin_session(&other, None, at(1)).unwrap().value;
    let err = c.start(&Tag::default(), Some(sid), at(2)).unwrap_err();
    assert_eq!(
        err,
        CoordError::SessionOfOtherTag {
            id: sid,
            session_tag: other.clone(),
            tag: Tag::default()
        }
    );
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(err.to_string().contains("--tag other"));
    assert!(c.session(sid).unwrap().collections.is_empty());
    assert!(c.end_session(&Tag::default(), Some(sid), at(3)).is_err());
    assert_eq!(c.session(sid).unwrap().state, SessionState::Open);
}

#[test]
fn begin_session_twice_on_a_tag_is_a_conflict() {
    let mut c = coordinator();
    let t = Tag::default();
    let sid = c.begin_session(&t, None, at(1)).unwrap().value;
    let err = c.begin_session(&t, None, at(2)).unwrap_err();
    assert_eq!(err, CoordError::SessionAlreadyOpen { tag: t, id: sid });
    assert_eq!(err.kind(), ErrorKind::Conflict);
    // Another tag is independent.
    assert!(c.begin_session(&tag("other"), None, at(3)).is_ok());
    assert_eq!(c.sessions(&SessionFilter::default()).len(), 2);
}

#[test]
fn stop_without_a_collection_is_a_conflict() {
    let mut c = coordinator();
    let t = Tag::default();
    let err = c.stop(&t, None, at(1)).unwrap_err();
    assert!(matches!(
        err,
        CoordError::NotCollecting { session: None, .. }
    ));
    assert_eq!(err.kind(), ErrorKind::Conflict);
    let sid = c.begin_session(&t, None, at(2)).unwrap().value;
    let err = c.stop(&t, Some(sid), at(3)).unwrap_err();
    assert!(matches!(err, CoordError::NotCollecting { session: Some(s), .. } if s == sid));
    let _ = c.start(&t, None, at(4)).unwrap();
    let _ = c.stop(&t, None, at(5)).unwrap();
    assert!(matches!(
        c.stop(&t, None, at(6)),
        Err(CoordError::NotCollecting { .. })
    ));
}

#[test]
fn zero_agents_complete_on_stop_with_no_files() {
    let mut c = coordinator();
    let t = Tag::default();
    let started = c.start(&t, None, at(1)).unwrap();
    assert_eq!(started.value.agents, 0);
    assert!(sends(&started.effects).is_empty());
    let sid = started.value.session;
    assert_eq!(collection(&c, sid, 1).state, CollectionState::Collecting);
    let stopped = c.stop(&t, None, at(2)).unwrap();
    assert_eq!(stopped.value.state, CollectionState::Completed);
    let done = collection(&c, sid, 1);
    assert_eq!(done.completed_at, Some(at(2)));
    assert!(done.agents.is_empty());
}

#[test]
fn agents_of_another_tag_get_no_start() {
    let (mut c, a, b, other) = with_agents();
    let started = c.start(&Tag::default(), None, at(1)).unwrap();
    let sent: Vec<AgentKey> = sends(&started.effects)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(sent, vec![a, b]);
    let sid = started.value.session;
    assert!(!collection(&c, sid, 1).agents.contains_key(&other));
    // And the other tag can collect at the same time, with only its agent.
    let theirs = c.start(&tag("other"), None, at(2)).unwrap();
    assert_ne!(theirs.value.session, sid);
    assert_eq!(
        sends(&theirs.effects),
        vec![(other, start_cmd(theirs.value.session, 1))]
    );
}

#[test]
fn ending_a_collecting_session_stops_it_and_still_records_uploads() {
    let (mut c, a, b, _) = with_agents();
    let t = Tag::default();
    let sid = c.start(&t, None, at(1)).unwrap().value.session;
    let ended = c.end_session(&t, None, at(5)).unwrap();
    let stopped = ended.value.stopped.clone().unwrap();
    assert_eq!(stopped.collection, CollectionId(1));
    assert_eq!(stopped.state, CollectionState::Stopping);
    assert_eq!(sends(&ended.effects).len(), 2);
    assert_eq!(c.session(sid).unwrap().state, SessionState::Ended);

    let _ = c
        .agent_uploaded(&a, sid, CollectionId(1), vec!["a".into()], at(6))
        .unwrap();
    let _ = c
        .agent_failed(&b, sid, CollectionId(1), "disk full".into(), at(7))
        .unwrap();
    let done = collection(&c, sid, 1);
    assert_eq!(done.state, CollectionState::Incomplete);
    assert_eq!(
        done.agents[&b],
        AgentOutcome::Failed {
            reason: "disk full".into()
        }
    );
    // A new session can begin on the tag.
    assert!(c.begin_session(&t, None, at(8)).is_ok());
}

#[test]
fn status_and_listing_show_the_active_work() {
    let (mut c, a, ..) = with_agents();
    let t = Tag::default();
    let started = c.start(&t, None, at(1)).unwrap().value;
    let status = c.status(&t);
    assert_eq!(status.tag, t);
    assert_eq!(status.agents.len(), 2);
    assert!(status.agents.iter().all(|s| s.connected));
    assert_eq!(status.active_session.map(|s| s.id), Some(started.session));
    let active = status.active_collection.unwrap();
    assert_eq!(active.id, CollectionId(1));
    assert_eq!(active.agents[&a], AgentOutcome::Pending);
    let json = serde_json::to_value(c.status(&t)).unwrap();
    assert_eq!(json["activeCollection"]["state"], "collecting");

    let _ = c.end_session(&t, None, at(2)).unwrap();
    let status = c.status(&t);
    assert_eq!(status.active_session, None);
    assert_eq!(
        status.active_collection.map(|c| c.state),
        Some(CollectionState::Stopping),
        "an ended session's upload is still shown"
    );
    let open = SessionFilter {
        tag: Some(t.clone()),
        state: Some(SessionState::Open),
    };
    assert!(c.sessions(&open).is_empty());
    let ended = SessionFilter {
        tag: Some(t),
        state: Some(SessionState::Ended),
    };
    assert_eq!(c.sessions(&ended).len(), 1);
    assert_eq!(c.status(&tag("other")).agents.len(), 1);
}

#[test]
fn tags_count_their_sessions_and_say_which_has_one_open() {
    let mut c = coordinator();
    assert!(c.tags().is_empty());
    let (train, eval) = (tag("train"), tag("eval"));
    for n in 0..3 {
        let _ = c.begin_session(&train, None, at(n * 10)).unwrap();
        let _ = c.end_session(&train, None, at(n * 10 + 1)).unwrap();
    }
    let _ = c.begin_session(&train, None, at(40)).unwrap();
    let _ = c.begin_session(&eval, None, at(50)).unwrap();
    let _ = c.end_session(&eval, None, at(51)).unwrap();
    let tags: Vec<(String, usize, bool)> = c
        .tags()
        .into_iter()
        .map(|t| (t.tag.to_string(), t.sessions, t.open))
        .collect();
    assert_eq!(
        tags,
        [("eval".into(), 1, false), ("train".into(), 4, true)],
        "name order"
    );
}

#[test]
fn limited_status_lists_few_agents_but_counts_all() {
    let (mut c, ..) = with_agents();
    let t = Tag::default();
    let _ = c.start(&t, None, at(1)).unwrap();
    let status = c.status_limited(&t, 1);
    assert_eq!(status.agents.len(), 1);
    assert_eq!(status.agent_counts.known, 2);
    assert_eq!(status.agent_counts.connected, 2);
    let active = status.active_collection.unwrap();
    assert_eq!(active.agents.len(), 1);
    assert_eq!(active.agents_total, 2);
    assert_eq!(active.outcome_counts.get("pending"), Some(&2));
    let none = c.status_limited(&t, 0);
    assert!(none.agents.is_empty());
    assert_eq!(none.agent_counts.known, 2);
}
