//! The hub: the one place that owns the state machine, the store and the agents' outbound
//! streams. Every event goes through one of its methods, which call the machine under one lock
//! and carry out its effects in order (persist, disconnect, send). Nothing else writes state.
//!
//! Durability: what a user asked for over REST (begin, start, stop, end) and anything that is
//! followed by a command to an agent is written before the call returns. Agents' own reports
//! (acknowledgements, uploads, registrations) are group-committed by [`Hub::flush`] every few
//! tens of milliseconds: thousands of agents answering one START cost a handful of writes, not
//! thousands. A crash inside that window loses only reports the coordinator asks for again:
//! reconnecting agents are re-sent START/STOP and answer again (see the agent's `Backend`).
//!
//! Locks: the machine (`core`) and the store are locked separately, always in that order, and a
//! write takes the store lock before it lets go of the machine, so writes reach the disk in the
//! order their contents were read. A group commit copies what changed under the machine lock and
//! writes it (serialisation, disk sync) after releasing it: agents' reports are not held up by
//! the disk, which matters when 10,000 acknowledgements arrive while a session is written.

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::{SystemTime, UNIX_EPOCH},
};

use super::{
    converters, outbox,
    store::{Batch, StateStore, StoreError},
};
use crate::{
    proto::{coordinator_message::Msg, CoordinatorMessage, Start, Stop},
    state::{
        AgentInfo, AgentKey, Command, CoordError, Coordinator, Effect, Millis, Outcome, Registered,
        SessionId,
    },
};

/// An agent's outbound queue (see `outbox`). Messages are boxed so that a queued message costs a
/// pointer in the queue.
pub type Outbound = outbox::Sender<Box<CoordinatorMessage>>;

/// An agent's outbound stream and the connection it belongs to (a reconnect replaces it).
#[derive(Debug)]
struct Link {
    connection: u64,
    tx: Outbound,
}

#[derive(Debug)]
struct Core {
    machine: Coordinator,
    links: HashMap<AgentKey, Link>,
    next_connection: u64,
    /// Changed but not yet written (see the module doc on durability).
    dirty_sessions: BTreeSet<SessionId>,
    dirty_agents: BTreeSet<AgentKey>,
    /// Where ended collections are announced (`converters`), when someone listens.
    settled: Option<tokio::sync::mpsc::UnboundedSender<converters::Settled>>,
    /// Bumped whenever effects carried out change what users see (`GET /changes`).
    changes: Arc<tokio::sync::watch::Sender<u64>>,
}

/// When the effects' writes must be durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    /// Before the call returns.
    Now,
    /// At the next group commit, unless the effects include a command to an agent.
    Soon,
}

/// Why a request could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(transparent)]
    Refused(#[from] CoordError),
    #[error("the coordinator could not save its state; the change may not survive a restart")]
    Store(#[source] StoreError),
}

type Store = Arc<Mutex<Box<dyn StateStore>>>;

/// Shared handle to the coordinator's state.
#[derive(Debug, Clone)]
pub struct Hub {
    core: Arc<Mutex<Core>>,
    store: Store,
    changes: Arc<tokio::sync::watch::Sender<u64>>,
}

/// Locks a mutex. A panic while holding one cannot leave the machine half-updated in a way later
/// calls would misread (each call is validated first), nor a store mid-write (its transactions
/// are atomic): keep serving.
fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
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
        let store: Store = Arc::new(Mutex::new(store));
        // Versions start at the clock so that a restarted coordinator never answers a client
        // with the number it had before (the client would miss what changed meanwhile).
        let changes = Arc::new(tokio::sync::watch::channel(now().0).0);
        let mut core = Core {
            machine,
            links: HashMap::new(),
            next_connection: 0,
            dirty_sessions: BTreeSet::new(),
            dirty_agents: BTreeSet::new(),
            settled: None,
            changes: changes.clone(),
        };
        tracing::info!(
            sessions = restored.value.sessions,
            agents = restored.value.agents,
            "coordinator state restored"
        );
        let repairs = restored.value.repairs.clone();
        carry_out(&mut core, &store, restored.effects, Durability::Now)?;
        Ok((
            Self {
                core: Arc::new(Mutex::new(core)),
                store,
                changes,
            },
            repairs,
        ))
    }

    fn lock(&self) -> MutexGuard<'_, Core> {
        lock(&self.core)
    }

    /// The state's version, bumped by every change users see (not by heartbeats).
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Announces every collection that ends from now on on `tx` (the OTLP converters' caller).
    pub fn announce_settled(&self, tx: tokio::sync::mpsc::UnboundedSender<converters::Settled>) {
        self.lock().settled = Some(tx);
    }

    /// Runs a user's call (REST) on the machine; its changes are durable when it returns.
    pub fn apply<T>(
        &self,
        call: impl FnOnce(&mut Coordinator, Millis) -> Result<Outcome<T>, CoordError>,
    ) -> Result<T, HubError> {
        self.apply_with(Durability::Now, call)
    }

    /// Runs an agent's report on the machine; its changes are group-committed.
    pub fn apply_agent<T>(
        &self,
        call: impl FnOnce(&mut Coordinator, Millis) -> Result<Outcome<T>, CoordError>,
    ) -> Result<T, HubError> {
        self.apply_with(Durability::Soon, call)
    }

    fn apply_with<T>(
        &self,
        durability: Durability,
        call: impl FnOnce(&mut Coordinator, Millis) -> Result<Outcome<T>, CoordError>,
    ) -> Result<T, HubError> {
        let mut core = self.lock();
        let outcome = call(&mut core.machine, now())?;
        carry_out(&mut core, &self.store, outcome.effects, durability).map_err(HubError::Store)?;
        Ok(outcome.value)
    }

    /// Group commit: writes what agents' reports changed since the last flush. The machine is
    /// locked only to copy the changes; the write itself (which may wait for the disk) runs
    /// after, so call this from a blocking thread.
    pub fn flush(&self) {
        let (batch, mut store) = {
            let mut core = self.lock();
            let Some(batch) = take_batch(&mut core) else {
                return;
            };
            // Taken before the machine lock is released: see the module doc on locks.
            (batch, lock(&self.store))
        };
        let result = store.write(&batch);
        drop(store);
        if let Err(e) = result {
            tracing::error!(error = %e, "saving coordinator state failed; retrying");
            mark_dirty(&mut self.lock(), batch);
        }
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
        tx: Outbound,
        hello: impl FnOnce(&AgentKey, &Registered) -> CoordinatorMessage,
    ) -> Result<(Registered, u64), HubError> {
        let mut core = self.lock();
        let key = info.key();
        let outcome = core.machine.register_agent(info, now())?;
        // The channel is new and empty: this cannot fail.
        let _ = tx.try_send(Box::new(hello(&key, &outcome.value)));
        core.next_connection += 1;
        let connection = core.next_connection;
        core.links.insert(key, Link { connection, tx });
        carry_out(&mut core, &self.store, outcome.effects, Durability::Soon)
            .map_err(HubError::Store)?;
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
            if let Err(e) = carry_out(&mut core, &self.store, outcome.effects, Durability::Soon) {
                tracing::error!(error = %e, "saving state after a disconnect failed");
            }
        }
    }

    /// Periodic timeouts (heartbeats, uploads).
    pub fn tick(&self) {
        let mut core = self.lock();
        let at = now();
        let outcome = core.machine.tick(at);
        if let Err(e) = carry_out(&mut core, &self.store, outcome.effects, Durability::Soon) {
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

/// Copies every dirty session and agent into a batch and marks them clean; `None` when nothing
/// changed.
fn take_batch(core: &mut Core) -> Option<Batch> {
    if core.dirty_sessions.is_empty() && core.dirty_agents.is_empty() {
        return None;
    }
    let machine = &core.machine;
    let sessions = std::mem::take(&mut core.dirty_sessions)
        .into_iter()
        .filter_map(|id| machine.session(id).ok().cloned())
        .collect();
    let agents = std::mem::take(&mut core.dirty_agents)
        .into_iter()
        .map(|key| {
            let info = machine.agent_info(&key).cloned();
            (key, info)
        })
        .collect();
    Some(Batch { sessions, agents })
}

/// A batch that could not be written: its sessions and agents are written again at the next
/// flush (with their state then).
fn mark_dirty(core: &mut Core, batch: Batch) {
    core.dirty_sessions
        .extend(batch.sessions.iter().map(|s| s.id));
    core.dirty_agents
        .extend(batch.agents.into_iter().map(|(key, _)| key));
}

/// Writes every dirty session and agent in one transaction, with the machine locked (the
/// caller holds `core`); on failure they stay dirty.
fn flush(core: &mut Core, store: &Mutex<Box<dyn StateStore>>) -> Result<(), StoreError> {
    let Some(batch) = take_batch(core) else {
        return Ok(());
    };
    let result = lock(store).write(&batch);
    if result.is_err() {
        mark_dirty(core, batch);
    }
    result
}

/// Carries out effects in the machine's order: records what to persist, writes it (now, or at
/// the next group commit, see the module doc), then closes and sends. A failed write stops
/// before anything is sent.
fn carry_out(
    core: &mut Core,
    store: &Mutex<Box<dyn StateStore>>,
    effects: Vec<Effect>,
    durability: Durability,
) -> Result<(), StoreError> {
    let sends = effects.iter().any(|e| matches!(e, Effect::Send { .. }));
    if !effects.is_empty() {
        core.changes.send_modify(|v| *v = v.wrapping_add(1));
    }
    for effect in &effects {
        match effect {
            Effect::Persist { session } => {
                core.dirty_sessions.insert(*session);
            }
            Effect::PersistAgent { agent } => {
                core.dirty_agents.insert(agent.clone());
            }
            Effect::Disconnect { .. } | Effect::Send { .. } | Effect::Settled { .. } => {}
        }
    }
    if durability == Durability::Now || sends {
        flush(core, store)?;
    }
    // A broadcast sends one command to thousands of agents: encode it once.
    let mut encoded: Option<(Command, CoordinatorMessage)> = None;
    for effect in effects {
        match effect {
            Effect::Persist { .. } | Effect::PersistAgent { .. } => {}
            Effect::Settled {
                session,
                collection,
                state,
            } => {
                if let Some(tx) = &core.settled {
                    let _ = tx.send(converters::Settled {
                        session,
                        collection,
                        state,
                    });
                }
            }
            Effect::Disconnect { agent, reason } => {
                tracing::info!(agent = %agent.as_str(), %reason, "closing agent stream");
                core.links.remove(&agent);
            }
            Effect::Send { agent, command } => match core.links.get(&agent) {
                Some(link) => {
                    let message = match &encoded {
                        Some((last, message)) if *last == command => message.clone(),
                        _ => {
                            let message = wire(&command);
                            encoded = Some((command, message.clone()));
                            message
                        }
                    };
                    if link.tx.try_send(Box::new(message)).is_err() {
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
