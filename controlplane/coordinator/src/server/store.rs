//! Durable coordinator state behind a small trait: sessions (with their collections and per-agent
//! outcomes) and the agents expected back after a restart. Written only by the hub.

use std::path::Path;

use redb::{Database, ReadableTable, TableDefinition};

use crate::state::{AgentInfo, Session, SessionId};

const SESSIONS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("sessions");
const AGENTS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("agents");
const AGENTS_KEY: &str = "known";

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

/// Where the coordinator keeps what must survive a restart.
pub trait StateStore: Send + std::fmt::Debug {
    fn load(&self) -> Result<(Vec<Session>, Vec<AgentInfo>), StoreError>;
    fn save_session(&mut self, session: &Session) -> Result<(), StoreError>;
    fn save_agents(&mut self, agents: &[AgentInfo]) -> Result<(), StoreError>;
}

/// redb on a volume: each save is one durable transaction.
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
        let db = Database::create(path).map_err(|source| StoreError::Open {
            path: path.display().to_string(),
            source: Box::new(source),
        })?;
        let txn = db.begin_write().map_err(db_err)?;
        txn.open_table(SESSIONS).map_err(db_err)?;
        txn.open_table(AGENTS).map_err(db_err)?;
        txn.commit().map_err(db_err)?;
        Ok(Self { db })
    }

    fn put(
        &self,
        table: TableDefinition<'_, &str, &[u8]>,
        key: &str,
        value: &[u8],
    ) -> Result<(), StoreError> {
        let txn = self.db.begin_write().map_err(db_err)?;
        {
            let mut t = txn.open_table(table).map_err(db_err)?;
            t.insert(key, value).map_err(db_err)?;
        }
        txn.commit().map_err(db_err)
    }
}

impl StateStore for RedbStore {
    fn load(&self) -> Result<(Vec<Session>, Vec<AgentInfo>), StoreError> {
        let txn = self.db.begin_read().map_err(db_err)?;
        let sessions_table = txn.open_table(SESSIONS).map_err(db_err)?;
        let mut sessions = Vec::new();
        for row in sessions_table.iter().map_err(db_err)? {
            let (key, value) = row.map_err(db_err)?;
            let session =
                serde_json::from_slice(value.value()).map_err(|source| StoreError::Corrupt {
                    key: key.value().to_string(),
                    source,
                })?;
            sessions.push(session);
        }
        let agents_table = txn.open_table(AGENTS).map_err(db_err)?;
        let agents = match agents_table.get(AGENTS_KEY).map_err(db_err)? {
            Some(v) => serde_json::from_slice(v.value()).map_err(|source| StoreError::Corrupt {
                key: AGENTS_KEY.into(),
                source,
            })?,
            None => Vec::new(),
        };
        Ok((sessions, agents))
    }

    fn save_session(&mut self, session: &Session) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(session).map_err(StoreError::Encode)?;
        self.put(SESSIONS, &session.id.to_string(), &bytes)
    }

    fn save_agents(&mut self, agents: &[AgentInfo]) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(agents).map_err(StoreError::Encode)?;
        self.put(AGENTS, AGENTS_KEY, &bytes)
    }
}

/// Keeps state in memory only (a coordinator started without a state directory).
#[derive(Debug, Default)]
pub struct MemoryStore {
    sessions: std::collections::BTreeMap<SessionId, Session>,
    agents: Vec<AgentInfo>,
}

impl StateStore for MemoryStore {
    fn load(&self) -> Result<(Vec<Session>, Vec<AgentInfo>), StoreError> {
        Ok((
            self.sessions.values().cloned().collect(),
            self.agents.clone(),
        ))
    }

    fn save_session(&mut self, session: &Session) -> Result<(), StoreError> {
        self.sessions.insert(session.id, session.clone());
        Ok(())
    }

    fn save_agents(&mut self, agents: &[AgentInfo]) -> Result<(), StoreError> {
        self.agents = agents.to_vec();
        Ok(())
    }
}
