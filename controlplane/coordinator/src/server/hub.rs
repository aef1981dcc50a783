//! The hub: the one place that owns the state machine, the store and the agents' outbound
//! streams. Every event goes through [`Hub::apply`], which calls the machine under one lock and
//! carries out its effects in order (persist, disconnect, send). Nothing else writes state.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::{SystemTime, UNIX_EPOCH},
};

use tokio::sync::mpsc;

use super::store::{StateStore, StoreError};
use crate::{
    proto::{coordinator_message::Msg, CoordinatorMessage, Start, Stop},
    state::{
        AgentInfo, AgentKey, Command, CoordError, Coordinator, Effect, Millis, Outcome, Registered,
    },
};

/// An agent's outbound stream and the connection it belongs to (a reconnect replaces it).
#[derive(Debug)]
struct Link {
    connection: u64,
    tx: mpsc::Sender<CoordinatorMessage>,
}

#[derive(Debug)]
struct Core {
    machine: Coordinator,
    store: Box<dyn StateStore>,
    links: HashMap<AgentKey, Link>,
    next_connection: u64,
}

/// Why a request could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(transparent)]
    Refused(#[from] CoordError),
    #[error("the coordinator could not save its state; the change may not survive a restart")]
    Store(#[source] StoreError),
}

/// Shared handle to the coordinator's state.
#[derive(Debug, Clone)]
pub struct Hub {
    core: Arc<Mutex<Core>>,
}

pub fn now() -> Millis {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    Millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

impl Hub {
    /// Restores the machine from the store and returns the hub with what was repaired.
    pub fn restore(
        mut machine: Coordinator,
        store: Box<dyn StateStore>,
    ) -> Result<(Self, Vec<String>), StoreError> {
        let (sessions, agents) = store.load()?;
        let restored = machine.restore(sessions, agents, now());
        let mut core = Core {
            machine,
            store,
            links: HashMap::new(),
            next_connection: 0,
        };
        tracing::info!(
            sessions = restored.value.sessions,
            agents = restored.value.agents,
            "coordinator state restored"
        );
        let repairs = restored.value.repairs.clone();
        carry_out(&mut core, restored.effects)?;
        Ok((
            Self {
                core: Arc::new(Mutex::new(core)),
            },
            repairs,
        ))
    }

    fn lock(&self) -> MutexGuard<'_, Core> {
        // A panic while holding the lock cannot leave the machine half-updated in a way later
        // calls would misread (each call is validated first); keep serving.
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs one mutating call on the machine and carries out its effects.
    pub fn apply<T>(
        &self,
        call: impl FnOnce(&mut Coordinator, Millis) -> Result<Outcome<T>, CoordError>,
    ) -> Result<T, HubError> {
        let mut core = self.lock();
        let outcome = call(&mut core.machine, now())?;
        carry_out(&mut core, outcome.effects).map_err(HubError::Store)?;
        Ok(outcome.value)
    }

    /// Reads the machine.
    pub fn read<T>(&self, f: impl FnOnce(&Coordinator) -> T) -> T {
        f(&self.lock().machine)
    }

    /// Registers an agent and, if accepted, queues `hello` on its outbound stream and links the
    /// stream before carrying out the registration's effects, so the agent reads its welcome
    /// first and then any START/STOP it must resume. Returns the connection number that
    /// [`Hub::unlink`] needs.
    pub fn register(
        &self,
        info: AgentInfo,
        tx: mpsc::Sender<CoordinatorMessage>,
        hello: impl FnOnce(&AgentKey, &Registered) -> CoordinatorMessage,
    ) -> Result<(Registered, u64), HubError> {
        let mut core = self.lock();
        let key = info.key();
        let outcome = core.machine.register_agent(info, now())?;
        // The channel is new and empty: this cannot fail.
        let _ = tx.try_send(hello(&key, &outcome.value));
        core.next_connection += 1;
        let connection = core.next_connection;
        core.links.insert(key, Link { connection, tx });
        carry_out(&mut core, outcome.effects).map_err(HubError::Store)?;
        Ok((outcome.value, connection))
    }

    /// The stream of `connection` ended: mark the agent disconnected unless it has already
    /// reconnected on a newer stream.
    pub fn unlink(&self, agent: &AgentKey, connection: u64) {
        let mut core = self.lock();
        if core
            .links
            .get(agent)
            .is_none_or(|l| l.connection != connection)
        {
            return;
        }
        core.links.remove(agent);
        let at = now();
        if let Ok(outcome) = core.machine.agent_disconnected(agent, at) {
            if let Err(e) = carry_out(&mut core, outcome.effects) {
                tracing::error!(error = %e, "saving state after a disconnect failed");
            }
        }
    }

    /// Periodic timeouts (heartbeats, uploads).
    pub fn tick(&self) {
        let mut core = self.lock();
        let at = now();
        let outcome = core.machine.tick(at);
        if let Err(e) = carry_out(&mut core, outcome.effects) {
            tracing::error!(error = %e, "saving state after timeouts failed");
        }
    }

    /// Number of agents with a live stream.
    pub fn linked_agents(&self) -> usize {
        self.lock().links.len()
    }
}

fn wire(command: &Command) -> CoordinatorMessage {
    let msg = match command {
        Command::Start {
            session,
            collection,
        } => Msg::Start(Start {
            session: session.to_string(),
            collection: collection.0,
        }),
        Command::Stop {
            session,
            collection,
        } => Msg::Stop(Stop {
            session: session.to_string(),
            collection: collection.0,
        }),
    };
    CoordinatorMessage { msg: Some(msg) }
}

/// Carries out effects in the machine's order. Persist failures stop before anything is sent.
fn carry_out(core: &mut Core, effects: Vec<Effect>) -> Result<(), StoreError> {
    for effect in effects {
        match effect {
            Effect::Persist { session } => {
                if let Ok(s) = core.machine.session(session) {
                    let s = s.clone();
                    core.store.save_session(&s)?;
                }
            }
            Effect::PersistAgents => {
                let agents = core.machine.agent_infos();
                core.store.save_agents(&agents)?;
            }
            Effect::Disconnect { agent, reason } => {
                tracing::info!(agent = %agent.as_str(), %reason, "closing agent stream");
                core.links.remove(&agent);
            }
            Effect::Send { agent, command } => match core.links.get(&agent) {
                Some(link) => {
                    if link.tx.try_send(wire(&command)).is_err() {
                        tracing::warn!(agent = %agent.as_str(), "agent stream full or closed; it gets the command again when it reconnects");
                    }
                }
                None => {
                    tracing::debug!(agent = %agent.as_str(), "agent not linked; command deferred to its reconnect");
                }
            },
        }
    }
    Ok(())
}
