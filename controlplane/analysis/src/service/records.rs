//! Durable job records: one redb table (job id → JSON of [`JobRecord`]), written on every
//! change of a job, one transaction each; or memory only when the service has no state
//! directory. Owns the file `analysis.redb`; knows nothing of storage or recipes.

use std::{collections::BTreeMap, path::Path};

use redb::{Database, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::job::Job;

const JOBS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("jobs");
/// The records are small; redb's default cache is 1 GiB.
const CACHE_BYTES: usize = 16 << 20;
/// Log lines kept per job; later ones are dropped (the last kept line says so).
pub const MAX_LOG_LINES: usize = 2_000;

/// One line of a job's log (`GET jobs/{id}/logs`): the contract's type.
pub use nsight_contracts::analysis::LogEntry;

/// A job and its log, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub job: Job,
    pub log: Vec<LogEntry>,
    /// Lines left out of a full log (records written before this field read as 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cut: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl JobRecord {
    /// Appends a line, keeping at most [`MAX_LOG_LINES`]: once full, the first lines stay, a
    /// line counts those left out, and the newest line is always last (so the outcome, e.g.
    /// `failed: ...`, is never cut).
    pub fn log(&mut self, time: u64, level: &str, message: impl Into<String>) {
        let entry = LogEntry {
            time,
            level: level.into(),
            message: message.into(),
        };
        if self.log.len() < MAX_LOG_LINES {
            self.log.push(entry);
            return;
        }
        // Full: [first MAX - 2 lines, marker, newest]. The first time, the last two lines
        // make room for the marker and the newest; after that the newest replaces the newest.
        let drop = if self.cut == 0 { 2 } else { 1 };
        self.log.truncate(MAX_LOG_LINES - drop);
        self.cut += drop as u64;
        if drop == 2 {
            self.log.push(LogEntry {
                time,
                level: "warn".into(),
                message: String::new(),
            });
        }
        if let Some(marker) = self.log.last_mut() {
            marker.message = format!(
                "log cut at {MAX_LOG_LINES} lines: {} lines left out before the last one",
                self.cut
            );
        }
        self.log.push(entry);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    #[error("cannot open the job database {path}")]
    Open {
        path: String,
        #[source]
        source: Box<redb::DatabaseError>,
    },
    #[error("job database operation failed")]
    Database(#[source] Box<redb::Error>),
    #[error("stored job {key} is corrupt")]
    Corrupt {
        key: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot encode a job record")]
    Encode(#[source] serde_json::Error),
}

fn db_err(e: impl Into<redb::Error>) -> RecordsError {
    RecordsError::Database(Box::new(e.into()))
}

/// Where job records live.
pub enum Records {
    Redb(Database),
    Memory(BTreeMap<Uuid, JobRecord>),
}

impl std::fmt::Debug for Records {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Redb(_) => "Records::Redb",
            Self::Memory(_) => "Records::Memory",
        })
    }
}

impl Records {
    /// Opens (or creates) `<dir>/analysis.redb`.
    pub fn open(dir: &Path) -> Result<Self, RecordsError> {
        let path = dir.join("analysis.redb");
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(&path)
            .map_err(|source| RecordsError::Open {
                path: path.display().to_string(),
                source: Box::new(source),
            })?;
        let txn = db.begin_write().map_err(db_err)?;
        txn.open_table(JOBS).map_err(db_err)?;
        txn.commit().map_err(db_err)?;
        Ok(Self::Redb(db))
    }

    pub fn memory() -> Self {
        Self::Memory(BTreeMap::new())
    }

    pub fn load(&self) -> Result<Vec<JobRecord>, RecordsError> {
        match self {
            Self::Memory(m) => Ok(m.values().cloned().collect()),
            Self::Redb(db) => {
                let txn = db.begin_read().map_err(db_err)?;
                let table = txn.open_table(JOBS).map_err(db_err)?;
                let mut out = Vec::new();
                for row in table.iter().map_err(db_err)? {
                    let (key, value) = row.map_err(db_err)?;
                    let record = serde_json::from_slice(value.value()).map_err(|source| {
                        RecordsError::Corrupt {
                            key: key.value().to_owned(),
                            source,
                        }
                    })?;
                    out.push(record);
                }
                Ok(out)
            }
        }
    }

    /// Writes the record durably.
    pub fn save(&mut self, record: &JobRecord) -> Result<(), RecordsError> {
        match self {
            Self::Memory(m) => {
                m.insert(record.job.id, record.clone());
                Ok(())
            }
            Self::Redb(db) => {
                let bytes = serde_json::to_vec(record).map_err(RecordsError::Encode)?;
                let key = record.job.id.to_string();
                let txn = db.begin_write().map_err(db_err)?;
                txn.open_table(JOBS)
                    .map_err(db_err)?
                    .insert(key.as_str(), bytes.as_slice())
                    .map_err(db_err)?;
                txn.commit().map_err(db_err)
            }
        }
    }

    pub fn remove(&mut self, id: Uuid) -> Result<(), RecordsError> {
        match self {
            Self::Memory(m) => {
                m.remove(&id);
                Ok(())
            }
            Self::Redb(db) => {
                let key = id.to_string();
                let txn = db.begin_write().map_err(db_err)?;
                txn.open_table(JOBS)
                    .map_err(db_err)?
                    .remove(key.as_str())
                    .map_err(db_err)?;
                txn.commit().map_err(db_err)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::job::{JobSpec, JobStatus, Lifecycle};

    fn record() -> JobRecord {
        let spec = JobSpec {
            recipe: "nvtx_sum".into(),
            args: vec![],
            pairs: vec![],
            tag: "default".into(),
            session: "s".into(),
            collection: None,
            inputs: vec![],
        };
        JobRecord {
            job: Job::new(Uuid::new_v4(), spec, 1),
            log: Vec::new(),
            cut: 0,
        }
    }

    #[test]
    fn records_survive_reopening() {
        let dir = std::env::temp_dir().join(format!("analysis-records-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut r = record();
        {
            let mut records = Records::open(&dir).unwrap();
            records.save(&r).unwrap();
            r.job.start(2).unwrap();
            r.log(2, "info", "started");
            records.save(&r).unwrap();
            let gone = record();
            records.save(&gone).unwrap();
            records.remove(gone.job.id).unwrap();
        }
        let records = Records::open(&dir).unwrap();
        let loaded = records.load().unwrap();
        assert_eq!(loaded, vec![r]);
        assert_eq!(loaded[0].job.status, JobStatus::Running);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_log_is_bounded() {
        let mut r = record();
        for i in 0..MAX_LOG_LINES + 10 {
            r.log(0, "info", format!("line {i}"));
        }
        assert_eq!(r.log.len(), MAX_LOG_LINES);
        assert_eq!(
            r.log[MAX_LOG_LINES - 3].message,
            format!("line {}", MAX_LOG_LINES - 3)
        );
        assert_eq!(
            r.log[MAX_LOG_LINES - 2].message,
            "log cut at 2000 lines: 11 lines left out before the last one"
        );
        r.log(0, "error", "failed: the outcome");
        assert_eq!(r.log.len(), MAX_LOG_LINES);
        assert!(r.log[MAX_LOG_LINES - 2]
            .message
            .contains(": 12 lines left out"));
        assert_eq!(r.log[MAX_LOG_LINES - 1].message, "failed: the outcome");
    }
}
