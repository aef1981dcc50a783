//! The [`Coordinator`] state machine: its data (sessions by ID, known agents), its [`Config`],
//! rebuilding after a restart ([`Coordinator::restore`]) and the passage of time
//! ([`Coordinator::tick`]). The user-facing operations live in `sessions.rs`, the agent-facing
//! ones in `agents.rs` and the read-only queries in `view.rs`; all are `impl Coordinator` blocks
//! over the data defined here.
//!
//! Invariants kept by every call: at most one open session per tag; at most one collecting
//! collection per session, and none in an ended session; a collection's agents only change while
//! it is open (Collecting or Stopping). A call that returns an error changes nothing.

use std::collections::{BTreeMap, BTreeSet};

use crate::state::effect::{Command, Effects, Outcome, Restored, Stopped};
use crate::state::error::CoordError;
use crate::state::model::{
    AgentInfo, AgentKey, AgentOutcome, Collection, CollectionState, Millis, Session, SessionId,
    SessionState, Tag,
};
use crate::state::view::MirroringStatus;

/// Timeouts, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// An agent silent for this long is disconnected, and Lost in open collections.
    pub heartbeat_timeout_ms: u64,
    /// Agents that have not uploaded this long after STOP are TimedOut.
    pub upload_timeout_ms: u64,
    /// A disconnected agent that no open collection waits for is forgotten after this long.
    pub forget_agent_after_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            heartbeat_timeout_ms: 15_000,
            upload_timeout_ms: 120_000,
            forget_agent_after_ms: 3_600_000,
        }
    }
}

/// What the coordinator knows about one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AgentEntry {
    pub(super) info: AgentInfo,
    pub(super) connected: bool,
    /// Last message, or the moment it disconnected (which starts its grace period).
    pub(super) last_seen: Millis,
    /// Its NVTX mirroring counters, from its last heartbeat that had them.
    pub(super) mirroring: Option<MirroringStatus>,
}

/// The coordinator's pure core. Feed it events with the current time; carry out the effects.
#[derive(Debug, Clone, Default)]
pub struct Coordinator {
    pub(super) config: Config,
    pub(super) sessions: BTreeMap<SessionId, Session>,
    pub(super) agents: BTreeMap<AgentKey, AgentEntry>,
    /// When the state was restored: collection members the coordinator has never seen since
    /// (absent from the restored agents) get their heartbeat grace period from here.
    pub(super) restored_at: Millis,
}

impl Coordinator {
    /// An empty coordinator.
    pub fn new(config: Config) -> Coordinator {
        Coordinator {
            config,
            ..Coordinator::default()
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Replaces all state with persisted sessions and agents, after a restart. Restored agents
    /// are known but disconnected: when one registers again it resumes its open collections;
    /// one that does not come back within the heartbeat timeout is Lost. Inconsistent data is
    /// repaired (and reported in [`Restored::repairs`], with Persist effects for the sessions
    /// changed) rather than refused, so a restart always succeeds.
    pub fn restore(
        &mut self,
        sessions: Vec<Session>,
        agents: Vec<AgentInfo>,
        now: Millis,
    ) -> Outcome<Restored> {
        let mut fx = Effects::default();
        let mut repairs = Vec::new();
        self.sessions.clear();
        self.agents.clear();
        self.restored_at = now;
        for session in sessions {
            if let Some(old) = self.sessions.insert(session.id, session) {
                repairs.push(format!(
                    "session {} appeared twice; kept the last copy",
                    old.id
                ));
            }
        }
        for info in agents {
            let entry = AgentEntry {
                info,
                connected: false,
                last_seen: now,
                mirroring: None,
            };
            if let Some(old) = self.agents.insert(entry.info.key(), entry) {
                repairs.push(format!(
                    "agent {} appeared twice; kept the last copy",
                    old.info.key()
                ));
            }
        }

        // At most one open session per tag: keep the newest.
        let mut newest: BTreeMap<Tag, (Millis, SessionId)> = BTreeMap::new();
        for s in self.sessions.values() {
            if s.state == SessionState::Open {
                let candidate = (s.created_at, s.id);
                let slot = newest.entry(s.tag.clone()).or_insert(candidate);
                *slot = (*slot).max(candidate);
            }
        }
        let keep: BTreeSet<SessionId> = newest.values().map(|(_, id)| *id).collect();
        for s in self.sessions.values_mut() {
            if s.state == SessionState::Open && !keep.contains(&s.id) {
                s.state = SessionState::Ended;
                s.ended_at = Some(now);
                fx.persist(s.id);
                repairs.push(format!(
                    "session {} was a second open session on tag `{}`; ended it",
                    s.id, s.tag
                ));
            }
            // At most one collecting collection, none in an ended session.
            let keep_collecting = match s.state {
                SessionState::Open => s.collecting().map(|c| c.id),
                SessionState::Ended => None,
            };
            for c in &mut s.collections {
                if c.state == CollectionState::Collecting && Some(c.id) != keep_collecting {
                    stop_collection(s.id, c, &self.agents, now, &mut fx);
                    fx.persist(s.id);
                    repairs.push(format!(
                        "collection {} of session {} could not still be collecting; stopped it",
                        c.id, s.id
                    ));
                }
                if c.state == CollectionState::Stopping && c.stop_requested_at.is_none() {
                    c.stop_requested_at = Some(now);
                    fx.persist(s.id);
                    repairs.push(format!(
                        "collection {} of session {} was stopping without a stop time; using now",
                        c.id, s.id
                    ));
                }
            }
        }
        let restored = Restored {
            sessions: self.sessions.len(),
            agents: self.agents.len(),
            repairs,
        };
        fx.finish(restored)
    }

    /// Applies the timeouts: agents silent for the heartbeat timeout are disconnected (and told
    /// so via [`crate::state::Effect::Disconnect`]) and become Lost in open collections they had
    /// not settled; agents of a Stopping collection whose upload timeout passed become TimedOut;
    /// Stopping collections whose agents all settled complete; long-gone agents are forgotten.
    /// Call it every second or so.
    pub fn tick(&mut self, now: Millis) -> Outcome {
        let mut fx = Effects::default();
        let heartbeat = self.config.heartbeat_timeout_ms;
        for (key, agent) in &mut self.agents {
            let silent = now.since(agent.last_seen);
            if agent.connected && silent >= heartbeat {
                agent.connected = false;
                fx.disconnect(
                    key.clone(),
                    format!("no message for {silent} ms (heartbeat timeout {heartbeat} ms)"),
                );
            }
        }

        for s in self.sessions.values_mut() {
            for c in s.collections.iter_mut().filter(|c| c.state.is_open()) {
                let mut changed = false;
                for (key, outcome) in &mut c.agents {
                    if outcome.is_settled() {
                        continue;
                    }
                    let gone = match self.agents.get(key) {
                        Some(agent) => !agent.connected && now.since(agent.last_seen) >= heartbeat,
                        None => now.since(self.restored_at) >= heartbeat,
                    };
                    if gone {
                        *outcome = AgentOutcome::Lost;
                        changed = true;
                    }
                }
                let upload_expired = c.state == CollectionState::Stopping
                    && c.stop_requested_at
                        .is_some_and(|t| now.since(t) >= self.config.upload_timeout_ms);
                if upload_expired {
                    for outcome in c.agents.values_mut() {
                        if !outcome.is_settled() {
                            *outcome = AgentOutcome::TimedOut;
                            changed = true;
                        }
                    }
                }
                if settle(s.id, c, now, &mut fx) || changed {
                    fx.persist(s.id);
                }
            }
        }

        let awaited: BTreeSet<&AgentKey> = self
            .sessions
            .values()
            .flat_map(|s| &s.collections)
            .filter(|c| c.state.is_open())
            .flat_map(|c| c.agents.keys())
            .collect();
        let forget: Vec<AgentKey> = self
            .agents
            .iter()
            .filter(|(key, agent)| {
                !agent.connected
                    && now.since(agent.last_seen) >= self.config.forget_agent_after_ms
                    && !awaited.contains(key)
            })
            .map(|(key, _)| key.clone())
            .collect();
        if !forget.is_empty() {
            for key in forget {
                self.agents.remove(&key);
                fx.persist_agent(key);
            }
        }
        fx.finish(())
    }

    /// The open session of a tag, if any.
    pub(super) fn open_session_id(&self, tag: &Tag) -> Option<SessionId> {
        self.sessions
            .values()
            .find(|s| s.state == SessionState::Open && &s.tag == tag)
            .map(|s| s.id)
    }

    /// Checks that session `id` exists, belongs to `tag` and is open.
    pub(super) fn check_open_session(
        &self,
        tag: &Tag,
        id: SessionId,
    ) -> Result<&Session, CoordError> {
        let session = self
            .sessions
            .get(&id)
            .ok_or(CoordError::UnknownSession { id })?;
        if &session.tag != tag {
            return Err(CoordError::SessionOfOtherTag {
                id,
                session_tag: session.tag.clone(),
                tag: tag.clone(),
            });
        }
        if session.state == SessionState::Ended {
            return Err(CoordError::SessionEnded { id });
        }
        Ok(session)
    }
}

/// Moves a collection to Stopping: agents still profiling get StopSent, and STOP is sent to the
/// connected ones (the others get it when they reconnect). Completes the collection at once if
/// nothing is left to wait for (for example when it has no agents).
pub(super) fn stop_collection(
    session: SessionId,
    collection: &mut Collection,
    agents: &BTreeMap<AgentKey, AgentEntry>,
    now: Millis,
    fx: &mut Effects,
) -> Stopped {
    collection.state = CollectionState::Stopping;
    collection.stop_requested_at = Some(now);
    let mut told = 0;
    for (key, outcome) in &mut collection.agents {
        if outcome.is_profiling() {
            *outcome = AgentOutcome::StopSent;
            told += 1;
            if agents.get(key).is_some_and(|a| a.connected) {
                fx.send(
                    key.clone(),
                    Command::Stop {
                        session,
                        collection: collection.id,
                    },
                );
            }
        }
    }
    settle(session, collection, now, fx);
    Stopped {
        session,
        collection: collection.id,
        agents: told,
        state: collection.state,
    }
}

/// Completes a Stopping collection whose agents have all settled: Completed when every agent
/// uploaded (or there were none), else Incomplete, and says so ([`crate::state::Effect::Settled`]). Returns
/// whether it changed.
pub(super) fn settle(
    session: SessionId,
    collection: &mut Collection,
    now: Millis,
    fx: &mut Effects,
) -> bool {
    if collection.state != CollectionState::Stopping
        || !collection.agents.values().all(AgentOutcome::is_settled)
    {
        return false;
    }
    let all_uploaded = collection
        .agents
        .values()
        .all(|o| matches!(o, AgentOutcome::Uploaded { .. }));
    collection.state = if all_uploaded {
        CollectionState::Completed
    } else {
        CollectionState::Incomplete
    };
    collection.completed_at = Some(now);
    fx.settled(session, collection.id, collection.state);
    true
}
