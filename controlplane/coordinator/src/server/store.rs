//! Durable coordinator state behind a small trait: sessions (with their collections and per-agent
//! outcomes) and the agents expected back after a restart. Written only by the hub, in batches:
//! one transaction (one sync) per batch.

use std::{collections::BTreeMap, path::Path};

use redb::{Database, ReadableTable, TableDefinition};

use crate::state::{AgentInfo, AgentKey, Session, SessionId};

/// redb's default cache is 1 GiB. The state is read once at start and then only written, and
/// redb keeps written pages in its cache: with 16 MiB that was ~0.9 KB per known agent (9 MB at
/// 10,000 agents) for nothing. Pages not cached are read back through the OS page cache.
const STATE_CACHE_BYTES: usize = 2 << 20;
const SESSIONS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("sessions");
/// One row per known agent, by agent key: saving one agent costs the same with 10 or 10,000.
const AGENTS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("agents");

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the state database {path}")]
    Open {
        path: String,
        #[source]
        source: Box<redb::DatabaseError>,
    },
    #[error("state database operation failed")]
    Database(#[source] Box<redb::Error>),
    #[error("stored record {key} is corrupt")]
    Corrupt {
        key: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot encode a record")]
    Encode(#[source] serde_json::Error),
}

fn db_err(e: impl Into<redb::Error>) -> StoreError {
    StoreError::Database(Box::new(e.into()))
}

/// One durable write: sessions to save, agents to save (`Some`) or forget (`None`). A copy, so
/// that the hub can write it without holding the state machine's lock.
#[derive(Debug, Default)]
pub struct Batch {
    pub sessions: Vec<Session>,
    pub agents: Vec<(AgentKey, Option<AgentInfo>)>,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty() && self.agents.is_empty()
    }
}

/// Where the coordinator keeps what must survive a restart.
pub trait StateStore: Send + std::fmt::Debug {
    fn load(&self) -> Result<(Vec<Session>, Vec<AgentInfo>), StoreError>;
    /// Writes the whole batch atomically and durably.
    fn write(&mut self, batch: &Batch) -> Result<(), StoreError>;
}

/// redb on a volume.
pub struct RedbStore {
    db: Database,
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedbStore")
    }
}

impl RedbStore {
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let db = Database::builder()
            .set_cache_size(STATE_CACHE_BYTES)
            .create(path)
            .map_err(|source| StoreError::Open {
                path: path.display().to_string(),
                source: Box::new(source),
            })?;
        let txn = db.begin_write().map_err(db_err)?;
        txn.open_table(SESSIONS).map_err(db_err)?;
        txn.open_table(AGENTS).map_err(db_err)?;
        txn.commit().map_err(db_err)?;
        Ok(Self { db })
    }
}

fn decode<T: serde::de::DeserializeOwned>(key: &str, bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|source| StoreError::Corrupt {
        key: key.to_string(),
        source,
    })
}

impl StateStore for RedbStore {
    fn load(&self) -> Result<(Vec<Session>, Vec<AgentInfo>), StoreError> {
        let txn = self.db.begin_read().map_err(db_err)?;
        let mut sessions = Vec::new();
        for row in txn
            .open_table(SESSIONS)
            .map_err(db_err)?
            .iter()
            .map_err(db_err)?
        {
            let (key, value) = row.map_err(db_err)?;
            sessions.push(decode(key.value(), value.value())?);
        }
        let mut agents = Vec::new();
        for row in txn
            .open_table(AGENTS)
            .map_err(db_err)?
            .iter()
            .map_err(db_err)?
        {
            let (key, value) = row.map_err(db_err)?;
            agents.push(decode(key.value(), value.value())?);
        }
        Ok((sessions, agents))
    }

    fn write(&mut self, batch: &Batch) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        let txn = self.db.begin_write().map_err(db_err)?;
        {
            let mut sessions = txn.open_table(SESSIONS).map_err(db_err)?;
            for session in &batch.sessions {
                let bytes = serde_json::to_vec(session).map_err(StoreError::Encode)?;
                let key = session.id.to_string();
                sessions
                    .insert(key.as_str(), bytes.as_slice())
                    .map_err(db_err)?;
            }
            let mut agents = txn.open_table(AGENTS).map_err(db_err)?;
            for (key, info) in &batch.agents {
                match info {
                    Some(info) => {
                        let bytes = serde_json::to_vec(info).map_err(StoreError::Encode)?;
                        agents
                            .insert(key.as_str(), bytes.as_slice())
                            .map_err(db_err)?;
                    }
                    None => {
                        agents.remove(key.as_str()).map_err(db_err)?;
                    }
                }
            }
        }
        txn.commit().map_err(db_err)
    }
}

/// Keeps state in memory only (a coordinator started without a state directory).
#[derive(Debug, Default)]
pub struct MemoryStore {
    sessions: BTreeMap<SessionId, Session>,
    agents: BTreeMap<AgentKey, AgentInfo>,
}

impl StateStore for MemoryStore {
    fn load(&self) -> Result<(Vec<Session>, Vec<AgentInfo>), StoreError> {
        Ok((
            self.sessions.values().cloned().collect(),
            self.agents.values().cloned().collect(),
        ))
    }

    fn write(&mut self, batch: &Batch) -> Result<(), StoreError> {
        for session in &batch.sessions {
            self.sessions.insert(session.id, session.clone());
        }
        for (key, info) in &batch.agents {
            match info {
                Some(info) => self.agents.insert(key.clone(), info.clone()),
                None => self.agents.remove(key),
            };
        }
        Ok(())
    }
}
