//! Which CUDA API call launched which GPU work, for the arrows of an exported trace: both sides
//! of a launch carry the process's correlation id (unique per process), read here by SQL.
//!
//! ```text
//!  CUPTI_ACTIVITY_KIND_RUNTIME (globalTid) ─┐
//!  CUPTI_ACTIVITY_KIND_{KERNEL,MEMCPY,MEMSET} (globalPid) ─┴─ (pid, correlationId) ──> flow id
//! ```

use std::collections::HashMap;

use rusqlite::Connection;

use super::{
    index::Source,
    load::{pid_tid, LoadError},
};

/// Flow ids of CUDA API calls and of the GPU work they launched: `(rowid, flow)` per table,
/// sorted by rowid. Both sides of one launch carry the same id.
#[derive(Debug, Default)]
pub struct Flows {
    by_source: HashMap<Source, Vec<(i64, u64)>>,
}

impl Flows {
    /// The flow id of a launch: the process and its correlation id (unique per process).
    pub fn id(pid: i64, correlation: i64) -> u64 {
        ((pid as u64 & 0xFF_FFFF) << 40 | (correlation as u64 & 0xFF_FFFF_FFFF)) + 1
    }

    /// Adds one table's `(rowid, flow)` pairs.
    pub fn insert(&mut self, source: Source, mut pairs: Vec<(i64, u64)>) {
        pairs.sort_unstable();
        self.by_source.insert(source, pairs);
    }

    /// Drops ids seen on one side only (an API call that launched nothing, GPU work whose call
    /// was not traced): a flow needs both ends.
    fn keep_linked(&mut self) {
        let mut api: Vec<u64> = self
            .by_source
            .get(&Source::Runtime)
            .map(|p| p.iter().map(|x| x.1).collect())
            .unwrap_or_default();
        api.sort_unstable();
        let mut gpu: Vec<u64> = self
            .by_source
            .iter()
            .filter(|(s, _)| **s != Source::Runtime)
            .flat_map(|(_, p)| p.iter().map(|x| x.1))
            .collect();
        gpu.sort_unstable();
        for (source, pairs) in &mut self.by_source {
            let other = if *source == Source::Runtime {
                &gpu
            } else {
                &api
            };
            pairs.retain(|p| other.binary_search(&p.1).is_ok());
        }
    }

    pub fn of(&self, source: Source, rowid: i64) -> Option<u64> {
        let pairs = self.by_source.get(&source)?;
        let i = pairs.binary_search_by_key(&rowid, |p| p.0).ok()?;
        Some(pairs[i].1)
    }
}

/// The flows of a report; a table that is missing or has no correlation id adds none.
pub fn read(conn: &Connection) -> Result<Flows, LoadError> {
    let mut flows = Flows::default();
    for (source, pid_column) in [
        (Source::Runtime, "globalTid"),
        (Source::Kernel, "globalPid"),
        (Source::Memcpy, "globalPid"),
        (Source::Memset, "globalPid"),
    ] {
        let table = source.table();
        let columns: Vec<String> = conn
            .prepare(&format!("PRAGMA table_info(\"{table}\")"))?
            .query_map([], |r| r.get::<_, String>(1))?
            .collect::<Result<_, _>>()?;
        let has = |c: &str| columns.iter().any(|x| x == c);
        if !has("correlationId") || !has(pid_column) {
            continue;
        }
        let mut stmt = conn.prepare(&format!(
            "SELECT rowid, correlationId, {pid_column} FROM {table} \
             WHERE correlationId IS NOT NULL AND {pid_column} IS NOT NULL"
        ))?;
        let pairs = stmt
            .query_map([], |r| {
                let (rowid, correlation, global): (i64, i64, i64) =
                    (r.get(0)?, r.get(1)?, r.get(2)?);
                Ok((rowid, Flows::id(pid_tid(global).0, correlation)))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        flows.insert(source, pairs);
    }
    flows.keep_linked();
    Ok(flows)
}
