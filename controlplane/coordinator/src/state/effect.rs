//! What the state machine asks the I/O layer to do ([`Effect`], [`Command`]) and what each
//! successful call returns ([`Outcome`] plus a per-call value such as [`Started`]).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::state::model::{AgentKey, CollectionId, CollectionState, SessionId};

/// A command sent to an agent over its stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Command {
    /// Start (or keep) profiling for this collection.
    Start {
        session: SessionId,
        collection: CollectionId,
    },
    /// Stop profiling and upload the report of this collection.
    Stop {
        session: SessionId,
        collection: CollectionId,
    },
}

impl Command {
    pub fn session(&self) -> SessionId {
        match self {
            Command::Start { session, .. } | Command::Stop { session, .. } => *session,
        }
    }

    pub fn collection(&self) -> CollectionId {
        match self {
            Command::Start { collection, .. } | Command::Stop { collection, .. } => *collection,
        }
    }
}

/// Work for the I/O layer, to be carried out in the order given. Persist effects always come
/// first: a crash after saving but before sending is repaired when agents reconnect (they are
/// sent what they missed), while the reverse would leave agents acting on unsaved state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "camelCase")]
pub enum Effect {
    /// Save this session (read it with `Coordinator::session`).
    Persist { session: SessionId },
    /// Save this agent's registration (read it with `Coordinator::agent_info`), or delete the
    /// saved one when the coordinator no longer knows the agent (it was forgotten).
    PersistAgent { agent: AgentKey },
    /// Close this agent's stream: it was declared disconnected. It may register again.
    Disconnect { agent: AgentKey, reason: String },
    /// Send a command to a connected agent.
    Send { agent: AgentKey, command: Command },
    /// This collection just ended (Completed or Incomplete): every agent has settled. The OTLP
    /// converters, if any, are told to convert what was mirrored for it (`server::converters`).
    Settled {
        session: SessionId,
        collection: CollectionId,
        state: CollectionState,
    },
}

/// The result of a successful mutating call: a call-specific value and the effects to carry out.
#[must_use = "the effects must be carried out"]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome<T = ()> {
    pub value: T,
    pub effects: Vec<Effect>,
}

/// Returned by `Coordinator::register_agent`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registered {
    pub agent: AgentKey,
    /// The identity was known (disconnected) and has resumed.
    pub reconnected: bool,
}

/// Returned by `Coordinator::start`, `stop` and `end_session`: the REST answers as they are.
pub use nsight_contracts::coordinator::api::{Ended, Started, Stopped};

/// Returned by `Coordinator::restore`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Restored {
    pub sessions: usize,
    pub agents: usize,
    /// Inconsistencies found in the persisted data and how they were repaired.
    pub repairs: Vec<String>,
}

/// Collects effects during one call and orders them (see [`Effect`]).
#[derive(Debug, Default)]
pub(crate) struct Effects {
    persist: BTreeSet<SessionId>,
    persist_agents: BTreeSet<AgentKey>,
    disconnects: Vec<Effect>,
    sends: Vec<Effect>,
    settled: Vec<Effect>,
}

impl Effects {
    pub(crate) fn persist(&mut self, session: SessionId) {
        self.persist.insert(session);
    }

    pub(crate) fn persist_agent(&mut self, agent: AgentKey) {
        self.persist_agents.insert(agent);
    }

    pub(crate) fn disconnect(&mut self, agent: AgentKey, reason: String) {
        self.disconnects.push(Effect::Disconnect { agent, reason });
    }

    pub(crate) fn send(&mut self, agent: AgentKey, command: Command) {
        self.sends.push(Effect::Send { agent, command });
    }

    pub(crate) fn settled(
        &mut self,
        session: SessionId,
        collection: CollectionId,
        state: CollectionState,
    ) {
        self.settled.push(Effect::Settled {
            session,
            collection,
            state,
        });
    }

    pub(crate) fn finish<T>(self, value: T) -> Outcome<T> {
        let mut effects: Vec<Effect> = self
            .persist
            .into_iter()
            .map(|session| Effect::Persist { session })
            .collect();
        effects.extend(
            self.persist_agents
                .into_iter()
                .map(|agent| Effect::PersistAgent { agent }),
        );
        effects.extend(self.disconnects);
        effects.extend(self.sends);
        effects.extend(self.settled);
        Outcome { value, effects }
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    #[test]
    fn persist_comes_first_and_is_deduplicated() {
        let session = SessionId(Uuid::nil());
        let agent = AgentKey::from(&crate::state::model::AgentIdentity {
            namespace: "n".into(),
            pod: "p".into(),
            container: "c".into(),
            process_name: "x".into(),
            pid: 1,
        });
        let command = Command::Start {
            session,
            collection: CollectionId::FIRST,
        };
        let mut fx = Effects::default();
        fx.send(agent.clone(), command.clone());
        fx.persist(session);
        fx.persist(session);
        let outcome = fx.finish(());
        assert_eq!(
            outcome.effects,
            vec![Effect::Persist { session }, Effect::Send { agent, command }]
        );
        let json = serde_json::to_value(&outcome.effects[1]).unwrap();
        assert_eq!(json["effect"], "send");
        assert_eq!(json["command"]["type"], "start");
        assert_eq!(json["command"]["collection"], 1);
    }
}
