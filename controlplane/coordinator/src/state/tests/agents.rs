//! Agent-facing behaviour: registration, reconnects, joining, and stale reports.

use super::*;

#[test]
fn a_duplicate_identity_is_refused_while_connected() {
    let (mut c, a, ..) = with_agents();
    let err = c
        .register_agent(agent("default", "pod-a"), at(1))
        .unwrap_err();
    assert_eq!(err, CoordError::DuplicateAgent { agent: a.clone() });
    assert_eq!(err.kind(), ErrorKind::Conflict);
    // Even with another tag or node: the identity is what counts.
    let mut moved = agent("other", "pod-a");
    moved.node = "node-2".into();
    assert!(c.register_agent(moved, at(1)).is_err());
    assert_eq!(c.status(&tag("other")).agents.len(), 1);

    let _ = c.agent_disconnected(&a, at(2)).unwrap();
    let again = c.register_agent(agent("default", "pod-a"), at(3)).unwrap();
    assert!(again.value.reconnected);
    assert_eq!(again.value.agent, a);
}

#[test]
fn a_reconnect_mid_collection_resends_start() {
    let (mut c, a, b, _) = with_agents();
    let t = Tag::default();
    let sid = c.start(&t, None, at(1)).unwrap().value.session;
    let _ = c
        .agent_acknowledged(&a, sid, CollectionId(1), at(2))
        .unwrap();
    let _ = c.agent_disconnected(&a, at(3)).unwrap();
    let _ = c.agent_disconnected(&b, at(3)).unwrap();

    let back = c.register_agent(agent("default", "pod-a"), at(4)).unwrap();
    assert!(back.value.reconnected);
    assert_eq!(sends(&back.effects), vec![(a.clone(), start_cmd(sid, 1))]);
    assert_eq!(
        outcome(&c, sid, 1, &a),
        AgentOutcome::Started,
        "resumes where it was"
    );
    let back = c.register_agent(agent("default", "pod-b"), at(4)).unwrap();
    assert_eq!(sends(&back.effects), vec![(b.clone(), start_cmd(sid, 1))]);
    assert_eq!(outcome(&c, sid, 1, &b), AgentOutcome::Pending);
    assert_eq!(
        collection(&c, sid, 1).agents.len(),
        2,
        "no duplicate membership"
    );
}

#[test]
fn a_reconnect_while_stopping_resends_stop() {
    let (mut c, a, b, _) = with_agents();
    let t = Tag::default();
    let sid = c.start(&t, None, at(1)).unwrap().value.session;
    let _ = c.agent_disconnected(&a, at(2)).unwrap();
    let stopped = c.stop(&t, None, at(3)).unwrap();
    assert_eq!(stopped.value.agents, 2);
    assert_eq!(
        sends(&stopped.effects),
        vec![(b.clone(), stop_cmd(sid, 1))],
        "a disconnected agent is not sent anything"
    );
    assert_eq!(outcome(&c, sid, 1, &a), AgentOutcome::StopSent);

    let back = c.register_agent(agent("default", "pod-a"), at(4)).unwrap();
    assert_eq!(sends(&back.effects), vec![(a.clone(), stop_cmd(sid, 1))]);
    let _ = c
        .agent_uploaded(&a, sid, CollectionId(1), vec!["a".into()], at(5))
        .unwrap();

    // After uploading, a further reconnect has nothing to resend.
    let _ = c.agent_disconnected(&a, at(6)).unwrap();
    let back = c.register_agent(agent("default", "pod-a"), at(7)).unwrap();
    assert!(sends(&back.effects).is_empty());
}

#[test]
fn a_new_agent_joins_a_collecting_collection_only() {
    let (mut c, ..) = with_agents();
    let t = Tag::default();
    let sid = c.start(&t, None, at(1)).unwrap().value.session;
    let joined = c
        .register_agent(agent("default", "pod-new"), at(2))
        .unwrap();
    let key = joined.value.agent.clone();
    assert!(!joined.value.reconnected);
    assert_eq!(
        sends(&joined.effects),
        vec![(key.clone(), start_cmd(sid, 1))]
    );
    assert!(joined.effects.contains(&Effect::Persist { session: sid }));
    assert!(joined
        .effects
        .contains(&Effect::PersistAgent { agent: key.clone() }));
    assert_eq!(outcome(&c, sid, 1, &key), AgentOutcome::Pending);

    // Of another tag: not added.
    let foreign = c.register_agent(agent("other", "pod-x"), at(2)).unwrap();
    assert!(sends(&foreign.effects).is_empty());
    assert_eq!(collection(&c, sid, 1).agents.len(), 3);

    // Once stopping, latecomers are not added.
    let _ = c.stop(&t, None, at(3)).unwrap();
    let late = c
        .register_agent(agent("default", "pod-late"), at(4))
        .unwrap();
    assert!(sends(&late.effects).is_empty());
    assert!(!collection(&c, sid, 1)
        .agents
        .contains_key(&late.value.agent));
}

#[test]
fn stale_reports_are_refused_and_change_nothing() {
    let (mut c, a, _, other) = with_agents();
    let t = Tag::default();
    let sid = c.start(&t, None, at(1)).unwrap().value.session;
    let snapshot = c.session(sid).unwrap().clone();
    let stale = |r: Result<Outcome, CoordError>| match r {
        Err(CoordError::StaleReport { reason, .. }) => reason,
        other => panic!("expected a stale report, got {other:?}"),
    };

    let foreign_session = SessionId::random();
    assert_eq!(
        stale(c.agent_uploaded(&a, foreign_session, CollectionId(1), vec![], at(2))),
        StaleReason::UnknownSession
    );
    assert_eq!(
        stale(c.agent_acknowledged(&a, sid, CollectionId(9), at(2))),
        StaleReason::UnknownCollection
    );
    assert_eq!(
        stale(c.agent_failed(&other, sid, CollectionId(1), "x".into(), at(2))),
        StaleReason::NotAMember
    );
    assert_eq!(c.session(sid).unwrap(), &snapshot);

    let unknown = agent("default", "ghost").key();
    assert_eq!(
        c.agent_uploaded(&unknown, sid, CollectionId(1), vec![], at(2)),
        Err(CoordError::UnknownAgent { agent: unknown })
    );

    // Reports about a finished collection, and repeated results, are stale too.
    let _ = c
        .agent_uploaded(&a, sid, CollectionId(1), vec!["k".into()], at(3))
        .unwrap();
    assert_eq!(
        stale(c.agent_failed(&a, sid, CollectionId(1), "late".into(), at(4))),
        StaleReason::AlreadySettled
    );
    let _ = c.end_session(&t, None, at(5)).unwrap();
    let _ = c.tick(at(5 + Config::default().upload_timeout_ms));
    let finished = c.session(sid).unwrap().clone();
    assert_eq!(finished.collections[0].state, CollectionState::Incomplete);
    assert_eq!(
        stale(c.agent_uploaded(&a, sid, CollectionId(1), vec!["again".into()], at(9))),
        StaleReason::CollectionFinished
    );
    assert_eq!(c.session(sid).unwrap(), &finished);
    assert_eq!(
        finished.collections[0].agents[&a],
        AgentOutcome::Uploaded {
            keys: vec!["k".into()]
        }
    );
}

#[test]
fn acknowledgements_are_idempotent() {
    let (mut c, a, ..) = with_agents();
    let sid = c.start(&Tag::default(), None, at(1)).unwrap().value.session;
    let first = c
        .agent_acknowledged(&a, sid, CollectionId(1), at(2))
        .unwrap();
    assert_eq!(persisted(&first.effects), vec![sid]);
    let second = c
        .agent_acknowledged(&a, sid, CollectionId(1), at(3))
        .unwrap();
    assert!(second.effects.is_empty());
    assert_eq!(outcome(&c, sid, 1, &a), AgentOutcome::Started);
}

#[test]
fn heartbeats_need_a_connected_agent() {
    let (mut c, a, ..) = with_agents();
    assert!(c.heartbeat(&a, at(1)).is_ok());
    let ghost = agent("default", "ghost").key();
    assert_eq!(
        c.heartbeat(&ghost, at(1)).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    let _ = c.agent_disconnected(&a, at(2)).unwrap();
    assert_eq!(
        c.heartbeat(&a, at(3)),
        Err(CoordError::AgentNotConnected { agent: a.clone() })
    );
    assert!(c.agent_disconnected(&a, at(3)).is_ok(), "idempotent");
}

#[test]
fn a_heartbeat_with_mirroring_counters_shows_them_in_the_status() {
    let (mut c, a, ..) = with_agents();
    let mirroring = |agent: &AgentKey, c: &Coordinator| {
        c.status(&Tag::default())
            .agents
            .into_iter()
            .find(|s| &s.key == agent)
            .and_then(|s| s.mirroring)
    };
    assert_eq!(mirroring(&a, &c), None, "an agent that does not mirror");
    let counters = MirroringStatus {
        sent: 120,
        dropped: 3,
        not_mirrored: 1,
        last_error: Some("Unavailable: no healthy upstream".into()),
    };
    let _ = c
        .heartbeat_with_mirroring(&a, counters.clone(), at(2))
        .unwrap();
    assert_eq!(mirroring(&a, &c), Some(counters));
    let ghost = agent("default", "ghost").key();
    assert!(c
        .heartbeat_with_mirroring(&ghost, MirroringStatus::default(), at(3))
        .is_err());
}

#[test]
fn upload_before_stop_is_kept() {
    let (mut c, a, b, _) = with_agents();
    let t = Tag::default();
    let sid = c.start(&t, None, at(1)).unwrap().value.session;
    let _ = c
        .agent_uploaded(&a, sid, CollectionId(1), vec!["early".into()], at(2))
        .unwrap();
    assert_eq!(collection(&c, sid, 1).state, CollectionState::Collecting);
    let stopped = c.stop(&t, None, at(3)).unwrap();
    assert_eq!(
        stopped.value.agents, 1,
        "only the profiling agent is told to stop"
    );
    assert_eq!(sends(&stopped.effects), vec![(b.clone(), stop_cmd(sid, 1))]);
    let _ = c
        .agent_uploaded(&b, sid, CollectionId(1), vec!["b".into()], at(4))
        .unwrap();
    assert_eq!(collection(&c, sid, 1).state, CollectionState::Completed);
}
