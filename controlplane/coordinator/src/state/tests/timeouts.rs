//! The passage of time: heartbeat and upload timeouts, completion, forgetting agents.

use super::*;

const HEARTBEAT: u64 = 15_000;
const UPLOAD: u64 = 120_000;

#[test]
fn a_silent_agent_is_lost_and_the_collection_incomplete() {
    let (mut c, a, b, other) = with_agents();
    let t = Tag::default();
    let sid = c.start(&t, None, at(0)).unwrap().value.session;
    let _ = c.stop(&t, None, at(1_000)).unwrap();
    let _ = c
        .agent_uploaded(&a, sid, CollectionId(1), vec!["a".into()], at(2_000))
        .unwrap();
    let _ = c.heartbeat(&other, at(HEARTBEAT - 1)).unwrap();

    // Just before the timeout nothing happens.
    let quiet = c.tick(at(HEARTBEAT - 1));
    assert!(quiet.effects.is_empty(), "{:?}", quiet.effects);
    assert_eq!(collection(&c, sid, 1).state, CollectionState::Stopping);

    let ticked = c.tick(at(HEARTBEAT));
    assert!(ticked.effects.contains(&Effect::Disconnect {
        agent: b.clone(),
        reason: format!("no message for {HEARTBEAT} ms (heartbeat timeout {HEARTBEAT} ms)"),
    }));
    assert!(
        !ticked
            .effects
            .iter()
            .any(|e| matches!(e, Effect::Disconnect { agent, .. } if agent == &other)),
        "the agent that heartbeated stays"
    );
    assert_eq!(persisted(&ticked.effects), vec![sid]);
    let done = collection(&c, sid, 1);
    assert_eq!(done.agents[&b], AgentOutcome::Lost);
    assert_eq!(done.state, CollectionState::Incomplete);
    assert_eq!(done.completed_at, Some(at(HEARTBEAT)));
    assert!(!c
        .status(&t)
        .agents
        .iter()
        .any(|s| s.key == b && s.connected));
}

#[test]
fn heartbeats_keep_an_agent_in_its_collection() {
    let (mut c, a, ..) = with_agents();
    let sid = c.start(&Tag::default(), None, at(0)).unwrap().value.session;
    for step in 1..=10 {
        let _ = c.heartbeat(&a, at(step * 10_000)).unwrap();
        let _ = c.tick(at(step * 10_000));
    }
    assert_eq!(outcome(&c, sid, 1, &a), AgentOutcome::Pending);
    assert!(c.agents().iter().any(|s| s.key == a && s.connected));
}

#[test]
fn an_agent_lost_while_collecting_resumes_when_it_returns() {
    let (mut c, a, ..) = with_agents();
    let sid = c.start(&Tag::default(), None, at(0)).unwrap().value.session;
    let _ = c.agent_disconnected(&a, at(1_000)).unwrap();
    let _ = c.tick(at(1_000 + HEARTBEAT - 1));
    assert_eq!(
        outcome(&c, sid, 1, &a),
        AgentOutcome::Pending,
        "grace period"
    );
    let _ = c.tick(at(1_000 + HEARTBEAT));
    assert_eq!(outcome(&c, sid, 1, &a), AgentOutcome::Lost);
    assert_eq!(
        collection(&c, sid, 1).state,
        CollectionState::Collecting,
        "a collecting collection does not complete before stop"
    );
    let back = c
        .register_agent(agent("default", "pod-a"), at(20_000))
        .unwrap();
    assert_eq!(sends(&back.effects), vec![(a.clone(), start_cmd(sid, 1))]);
    assert_eq!(persisted(&back.effects), vec![sid]);
    assert_eq!(outcome(&c, sid, 1, &a), AgentOutcome::Pending);
}

#[test]
fn the_upload_timeout_marks_remaining_agents_timed_out() {
    let (mut c, a, b, _) = with_agents();
    let t = Tag::default();
    let sid = c.start(&t, None, at(0)).unwrap().value.session;
    let _ = c.stop(&t, None, at(1_000)).unwrap();
    let _ = c
        .agent_uploaded(&a, sid, CollectionId(1), vec!["a".into()], at(2_000))
        .unwrap();
    let mut now = 1_000;
    while now < 1_000 + UPLOAD {
        let _ = c.heartbeat(&b, at(now)).unwrap();
        let _ = c.tick(at(now));
        now += 5_000;
    }
    assert_eq!(outcome(&c, sid, 1, &b), AgentOutcome::StopSent);
    let _ = c.heartbeat(&b, at(1_000 + UPLOAD)).unwrap();
    let ticked = c.tick(at(1_000 + UPLOAD));
    assert_eq!(persisted(&ticked.effects), vec![sid]);
    let done = collection(&c, sid, 1);
    assert_eq!(done.agents[&b], AgentOutcome::TimedOut);
    assert_eq!(
        done.agents[&a],
        AgentOutcome::Uploaded {
            keys: vec!["a".into()]
        }
    );
    assert_eq!(done.state, CollectionState::Incomplete);
    // A late upload cannot change the settled collection.
    assert!(c
        .agent_uploaded(
            &b,
            sid,
            CollectionId(1),
            vec!["b".into()],
            at(1_000 + UPLOAD + 1)
        )
        .is_err());
    assert_eq!(collection(&c, sid, 1), done);
}

#[test]
fn a_late_upload_from_a_lost_agent_still_counts() {
    let (mut c, a, b, _) = with_agents();
    let t = Tag::default();
    let sid = c.start(&t, None, at(0)).unwrap().value.session;
    let _ = c.heartbeat(&b, at(HEARTBEAT - 1)).unwrap();
    let _ = c.stop(&t, None, at(HEARTBEAT - 1)).unwrap();
    let _ = c.tick(at(HEARTBEAT));
    assert_eq!(outcome(&c, sid, 1, &a), AgentOutcome::Lost);
    assert_eq!(collection(&c, sid, 1).state, CollectionState::Stopping);
    let _ = c
        .agent_uploaded(
            &a,
            sid,
            CollectionId(1),
            vec!["a".into()],
            at(HEARTBEAT + 1),
        )
        .unwrap();
    let _ = c
        .agent_uploaded(
            &b,
            sid,
            CollectionId(1),
            vec!["b".into()],
            at(HEARTBEAT + 2),
        )
        .unwrap();
    assert_eq!(collection(&c, sid, 1).state, CollectionState::Completed);
}

#[test]
fn long_gone_agents_are_forgotten_unless_awaited() {
    let (mut c, a, b, _) = with_agents();
    let t = Tag::default();
    let _ = c.agent_disconnected(&a, at(0)).unwrap();
    let sid = c.start(&t, None, at(1)).unwrap().value.session;
    assert!(!collection(&c, sid, 1).agents.contains_key(&a));
    let _ = c.agent_disconnected(&b, at(2)).unwrap();
    let forget = Config::default().forget_agent_after_ms;
    let ticked = c.tick(at(forget + 2));
    assert!(
        ticked
            .effects
            .contains(&Effect::PersistAgent { agent: a.clone() }),
        "the forgotten agent's saved registration is deleted"
    );
    assert!(!ticked
        .effects
        .contains(&Effect::PersistAgent { agent: b.clone() }));
    let known: Vec<AgentKey> = c.agents().into_iter().map(|s| s.key).collect();
    assert!(
        !known.contains(&a),
        "not awaited by any collection: forgotten"
    );
    assert!(
        known.contains(&b),
        "still a member of an open collection: kept"
    );
    assert_eq!(c.agent_infos().len(), known.len());
}

/// Every way a collection ends says so once (the OTLP converters are told): the last upload,
/// a timeout, a stop with nothing to wait for.
#[test]
fn a_collection_that_ends_says_so_once() {
    let settled = |effects: &[Effect]| -> Vec<(CollectionId, CollectionState)> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Settled {
                    collection, state, ..
                } => Some((*collection, *state)),
                _ => None,
            })
            .collect()
    };
    let (mut c, a, b, _) = with_agents();
    let t = Tag::default();
    let sid = c.start(&t, None, at(0)).unwrap().value.session;
    let stop = c.stop(&t, None, at(10)).unwrap();
    assert!(settled(&stop.effects).is_empty(), "agents still upload");
    let first = c
        .agent_uploaded(&a, sid, CollectionId(1), vec!["a".into()], at(20))
        .unwrap();
    assert!(settled(&first.effects).is_empty());
    let last = c
        .agent_uploaded(&b, sid, CollectionId(1), vec!["b".into()], at(30))
        .unwrap();
    assert_eq!(
        settled(&last.effects),
        [(CollectionId(1), CollectionState::Completed)]
    );
    assert!(settled(&c.tick(at(40)).effects).is_empty(), "only once");
    // What a restarted coordinator tells the converters again.
    assert_eq!(
        c.ended_since(at(30)),
        [(sid, CollectionId(1), CollectionState::Completed)]
    );
    assert!(c.ended_since(at(31)).is_empty());

    // The next collection: nobody uploads; the upload timeout ends it, incomplete.
    let _ = c.start(&t, None, at(50)).unwrap();
    let _ = c.heartbeat(&a, at(60)).unwrap();
    let _ = c.heartbeat(&b, at(60)).unwrap();
    let _ = c.stop(&t, None, at(60)).unwrap();
    let _ = c.heartbeat(&a, at(60 + UPLOAD)).unwrap();
    let _ = c.heartbeat(&b, at(60 + UPLOAD)).unwrap();
    let timed_out = c.tick(at(60 + UPLOAD));
    assert_eq!(
        settled(&timed_out.effects),
        [(CollectionId(2), CollectionState::Incomplete)]
    );
}
