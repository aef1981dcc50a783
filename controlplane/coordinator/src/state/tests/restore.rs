//! Rebuilding after a restart from persisted sessions and agents.

use super::*;

/// Runs a coordinator to a state with one Stopping collection (session 1, tag "default") and one
/// Collecting collection (tag "other"), then "persists" it through JSON as the I/O layer would.
fn persisted_state() -> (Vec<Session>, Vec<AgentInfo>, SessionId, SessionId) {
    let (mut c, a, _, _) = with_agents();
    let stopping = c.start(&Tag::default(), None, at(0)).unwrap().value.session;
    let _ = c
        .agent_acknowledged(&a, stopping, CollectionId(1), at(1))
        .unwrap();
    let _ = c.stop(&Tag::default(), None, at(2)).unwrap();
    let collecting = c.start(&tag("other"), None, at(3)).unwrap().value.session;
    let sessions: Vec<Session> = c
        .sessions(&SessionFilter::default())
        .iter()
        .map(|s| c.session(s.id).unwrap().clone())
        .collect();
    let json = serde_json::to_string(&(sessions, c.agent_infos())).unwrap();
    let (sessions, agents) = serde_json::from_str(&json).unwrap();
    (sessions, agents, stopping, collecting)
}

#[test]
fn restored_agents_resume_when_they_reconnect() {
    let (sessions, agents, stopping, collecting) = persisted_state();
    let mut c = coordinator();
    let restored = c.restore(sessions, agents, at(100));
    assert_eq!(restored.value.sessions, 2);
    assert_eq!(restored.value.agents, 3);
    assert!(
        restored.value.repairs.is_empty(),
        "{:?}",
        restored.value.repairs
    );
    assert!(restored.effects.is_empty());
    assert!(c.agents().iter().all(|s| !s.connected));

    let a = c
        .register_agent(agent("default", "pod-a"), at(101))
        .unwrap();
    assert!(a.value.reconnected);
    assert_eq!(
        sends(&a.effects),
        vec![(a.value.agent.clone(), stop_cmd(stopping, 1))]
    );
    let o = c.register_agent(agent("other", "pod-o"), at(101)).unwrap();
    assert_eq!(
        sends(&o.effects),
        vec![(o.value.agent.clone(), start_cmd(collecting, 1))]
    );

    // The resumed collection completes normally; the one that did not come back is lost.
    let _ = c
        .agent_uploaded(
            &a.value.agent,
            stopping,
            CollectionId(1),
            vec!["a".into()],
            at(102),
        )
        .unwrap();
    let _ = c.heartbeat(&a.value.agent, at(100 + 15_000)).unwrap();
    let _ = c.heartbeat(&o.value.agent, at(100 + 15_000)).unwrap();
    let _ = c.tick(at(100 + 15_000));
    let done = collection(&c, stopping, 1);
    assert_eq!(done.state, CollectionState::Incomplete);
    assert_eq!(
        done.agents[&agent("default", "pod-b").key()],
        AgentOutcome::Lost
    );
    assert_eq!(
        collection(&c, collecting, 1).state,
        CollectionState::Collecting
    );
    // The restored open session still refuses a second one.
    assert!(c.begin_session(&tag("other"), None, at(200)).is_err());
}

#[test]
fn members_missing_from_the_restored_agents_get_a_grace_period() {
    let (sessions, _, _, collecting) = persisted_state();
    let mut c = coordinator();
    let _ = c.restore(sessions, vec![], at(100));
    let member = agent("other", "pod-o").key();
    let _ = c.tick(at(100 + 14_999));
    assert_eq!(outcome(&c, collecting, 1, &member), AgentOutcome::Pending);
    let _ = c.tick(at(100 + 15_000));
    assert_eq!(outcome(&c, collecting, 1, &member), AgentOutcome::Lost);
    let back = c
        .register_agent(agent("other", "pod-o"), at(100 + 15_001))
        .unwrap();
    assert!(
        !back.value.reconnected,
        "unknown before, but still a member"
    );
    assert_eq!(
        sends(&back.effects),
        vec![(member.clone(), start_cmd(collecting, 1))]
    );
    assert_eq!(outcome(&c, collecting, 1, &member), AgentOutcome::Pending);
}

#[test]
fn inconsistent_persisted_data_is_repaired() {
    let mut c = coordinator();
    let t = Tag::default();
    let old = c.start(&t, None, at(0)).unwrap().value.session;
    let mut first = c.session(old).unwrap().clone();
    let mut second = first.clone();
    second.id = SessionId::random();
    second.created_at = at(10);
    second.collections.clear();
    // Two open sessions on one tag; the older one is still collecting (with no agents).
    first.state = SessionState::Open;

    let mut fresh = coordinator();
    let restored = fresh.restore(vec![first, second.clone()], vec![], at(50));
    assert_eq!(
        restored.value.repairs.len(),
        2,
        "{:?}",
        restored.value.repairs
    );
    assert_eq!(persisted(&restored.effects), vec![old]);
    let repaired = fresh.session(old).unwrap();
    assert_eq!(repaired.state, SessionState::Ended);
    assert_eq!(repaired.collections[0].state, CollectionState::Completed);
    assert_eq!(
        fresh.status(&t).active_session.map(|s| s.id),
        Some(second.id),
        "the newest open session is kept"
    );
}
