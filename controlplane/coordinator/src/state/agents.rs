//! The agent-facing operations of the [`Coordinator`]: registration (including resuming after a
//! reconnect), heartbeats, disconnects, and the reports an agent sends about a collection
//! (acknowledged, uploaded, failed). Reports naming a session or collection the agent is not part
//! of are refused with `StaleReport` and never change the state.

use crate::state::effect::{Command, Effects, Outcome, Registered};
use crate::state::error::{CoordError, StaleReason};
use crate::state::machine::{settle, AgentEntry, Coordinator};
use crate::state::model::{
    AgentInfo, AgentKey, AgentOutcome, CollectionId, CollectionState, Millis, SessionId,
    SessionState,
};
use crate::state::view::MirroringStatus;

impl Coordinator {
    /// Registers an agent's stream.
    ///
    /// Refused with `DuplicateAgent` while an agent with the same identity is connected. A known
    /// but disconnected identity is a reconnect and resumes where it was: in a Collecting
    /// collection it is sent START again (a Lost agent becomes Pending again), in a Stopping one
    /// that it has not settled it is sent STOP again. Any agent of the tag that is not yet part of
    /// the tag's Collecting collection joins it and is sent START.
    pub fn register_agent(
        &mut self,
        info: AgentInfo,
        now: Millis,
    ) -> Result<Outcome<Registered>, CoordError> {
        let key = info.key();
        let previous = self.agents.get(&key);
        if previous.is_some_and(|a| a.connected) {
            return Err(CoordError::DuplicateAgent { agent: key });
        }
        let reconnected = previous.is_some();
        let mut fx = Effects::default();
        if previous.is_none_or(|a| a.info != info) {
            fx.persist_agent(key.clone());
        }
        let tag = info.tag.clone();
        self.agents.insert(
            key.clone(),
            AgentEntry {
                info,
                connected: true,
                last_seen: now,
                // Its next heartbeat says.
                mirroring: None,
            },
        );

        for s in self.sessions.values_mut() {
            let joinable = s.state == SessionState::Open && s.tag == tag;
            for c in s.collections.iter_mut().filter(|c| c.state.is_open()) {
                let start = Command::Start {
                    session: s.id,
                    collection: c.id,
                };
                let stop = Command::Stop {
                    session: s.id,
                    collection: c.id,
                };
                let (command, changed) = match (c.state, c.agents.get_mut(&key)) {
                    (CollectionState::Collecting, Some(outcome)) => match outcome {
                        AgentOutcome::Pending | AgentOutcome::Started => (Some(start), false),
                        AgentOutcome::Lost => {
                            *outcome = AgentOutcome::Pending;
                            (Some(start), true)
                        }
                        _ => (None, false),
                    },
                    (CollectionState::Collecting, None) if joinable => {
                        c.agents.insert(key.clone(), AgentOutcome::Pending);
                        (Some(start), true)
                    }
                    (CollectionState::Stopping, Some(outcome)) => match outcome {
                        AgentOutcome::StopSent => (Some(stop), false),
                        AgentOutcome::Pending | AgentOutcome::Started | AgentOutcome::Lost => {
                            *outcome = AgentOutcome::StopSent;
                            (Some(stop), true)
                        }
                        _ => (None, false),
                    },
                    _ => (None, false),
                };
                if changed {
                    fx.persist(s.id);
                }
                if let Some(command) = command {
                    fx.send(key.clone(), command);
                }
            }
        }
        Ok(fx.finish(Registered {
            agent: key,
            reconnected,
        }))
    }

    /// Records a heartbeat. `AgentNotConnected` when the agent was declared disconnected: it
    /// must register again (which resumes its collections).
    pub fn heartbeat(&mut self, agent: &AgentKey, now: Millis) -> Result<Outcome, CoordError> {
        let entry = self.connected_entry(agent)?;
        entry.last_seen = entry.last_seen.max(now);
        Ok(Effects::default().finish(()))
    }

    /// A heartbeat that carries the agent's NVTX mirroring counters: kept for its status.
    pub fn heartbeat_with_mirroring(
        &mut self,
        agent: &AgentKey,
        mirroring: MirroringStatus,
        now: Millis,
    ) -> Result<Outcome, CoordError> {
        let outcome = self.heartbeat(agent, now)?;
        self.connected_entry(agent)?.mirroring = Some(mirroring);
        Ok(outcome)
    }

    /// Records that an agent's stream closed. Its collections keep waiting for it for the
    /// heartbeat timeout (from now), so it can reconnect and resume; after that `tick` marks it
    /// Lost. Disconnecting a disconnected agent does nothing.
    pub fn agent_disconnected(
        &mut self,
        agent: &AgentKey,
        now: Millis,
    ) -> Result<Outcome, CoordError> {
        let entry = self
            .agents
            .get_mut(agent)
            .ok_or_else(|| CoordError::UnknownAgent {
                agent: agent.clone(),
            })?;
        if entry.connected {
            entry.connected = false;
            entry.last_seen = entry.last_seen.max(now);
        }
        Ok(Effects::default().finish(()))
    }

    /// The agent acknowledged a command: Pending becomes Started. Repeated acknowledgements (or
    /// one for STOP) change nothing.
    pub fn agent_acknowledged(
        &mut self,
        agent: &AgentKey,
        session: SessionId,
        collection: CollectionId,
        now: Millis,
    ) -> Result<Outcome, CoordError> {
        self.report(agent, session, collection, now, |outcome| match outcome {
            AgentOutcome::Pending => Ok(Some(AgentOutcome::Started)),
            AgentOutcome::Started | AgentOutcome::StopSent => Ok(None),
            _ => Err(StaleReason::AlreadySettled),
        })
    }

    /// The agent uploaded its report under `keys`. Accepted while the collection is open, even
    /// before STOP (the profiled process may have exited) and from an agent marked Lost whose
    /// report arrives late.
    pub fn agent_uploaded(
        &mut self,
        agent: &AgentKey,
        session: SessionId,
        collection: CollectionId,
        keys: Vec<String>,
        now: Millis,
    ) -> Result<Outcome, CoordError> {
        self.report(agent, session, collection, now, |outcome| {
            settle_with(outcome, AgentOutcome::Uploaded { keys })
        })
    }

    /// The agent could not produce or upload its report.
    pub fn agent_failed(
        &mut self,
        agent: &AgentKey,
        session: SessionId,
        collection: CollectionId,
        reason: String,
        now: Millis,
    ) -> Result<Outcome, CoordError> {
        self.report(agent, session, collection, now, |outcome| {
            settle_with(outcome, AgentOutcome::Failed { reason })
        })
    }

    fn connected_entry(&mut self, agent: &AgentKey) -> Result<&mut AgentEntry, CoordError> {
        match self.agents.get_mut(agent) {
            None => Err(CoordError::UnknownAgent {
                agent: agent.clone(),
            }),
            Some(entry) if !entry.connected => Err(CoordError::AgentNotConnected {
                agent: agent.clone(),
            }),
            Some(entry) => Ok(entry),
        }
    }

    /// Applies a report to the agent's outcome in an open collection it belongs to. `transition`
    /// returns the new outcome, `None` for no change, or why the report is stale.
    fn report(
        &mut self,
        agent: &AgentKey,
        session: SessionId,
        collection: CollectionId,
        now: Millis,
        transition: impl FnOnce(&AgentOutcome) -> Result<Option<AgentOutcome>, StaleReason>,
    ) -> Result<Outcome, CoordError> {
        let stale = |reason| CoordError::StaleReport {
            agent: agent.clone(),
            session,
            collection,
            reason,
        };
        let Some(entry) = self.agents.get_mut(agent) else {
            return Err(CoordError::UnknownAgent {
                agent: agent.clone(),
            });
        };
        let s = self
            .sessions
            .get_mut(&session)
            .ok_or_else(|| stale(StaleReason::UnknownSession))?;
        let c = s
            .collection_mut(collection)
            .ok_or_else(|| stale(StaleReason::UnknownCollection))?;
        if !c.state.is_open() {
            return Err(stale(StaleReason::CollectionFinished));
        }
        let outcome = c
            .agents
            .get_mut(agent)
            .ok_or_else(|| stale(StaleReason::NotAMember))?;
        let next = transition(outcome).map_err(stale)?;
        if entry.connected {
            entry.last_seen = entry.last_seen.max(now);
        }
        let mut fx = Effects::default();
        if let Some(next) = next {
            *outcome = next;
            settle(session, c, now, &mut fx);
            fx.persist(session);
        }
        Ok(fx.finish(()))
    }
}

/// Uploaded or Failed may replace any outcome still awaited, and Lost (a late report).
fn settle_with(
    current: &AgentOutcome,
    next: AgentOutcome,
) -> Result<Option<AgentOutcome>, StaleReason> {
    match current {
        AgentOutcome::Pending
        | AgentOutcome::Started
        | AgentOutcome::StopSent
        | AgentOutcome::Lost => Ok(Some(next)),
        AgentOutcome::Uploaded { .. } | AgentOutcome::Failed { .. } | AgentOutcome::TimedOut => {
            Err(StaleReason::AlreadySettled)
        }
    }
}
