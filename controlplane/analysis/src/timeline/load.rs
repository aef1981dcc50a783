//! Reads a report's SQLite export into [`TrackSource`]s, the way Nsight Systems lays out its
//! timeline: per process, per thread, the NVTX, CUDA API and OS runtime rows; per GPU, one row
//! per CUDA stream with its kernels, memcpy and memset. Tables a report lacks are noted, not
//! errors; columns that differ between nsys versions are looked up, not assumed.
//!
//! ```text
//!  PROCESSES, ThreadNames, StringIds ──> labels
//!  NVTX_EVENTS, CUPTI_ACTIVITY_KIND_RUNTIME, OSRT_API ──globalTid──> process > thread > row
//!  CUPTI_ACTIVITY_KIND_{KERNEL,MEMCPY,MEMSET}, TARGET_INFO_GPU ──> GPU > stream
//!  NVTX ranges x API calls x GPU work (correlation id) ──project──> GPU > NVTX (projected)
//! ```

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::Path,
};

use nsight_contracts::timeline::TrackKind;
use rusqlite::{Connection, OpenFlags};

use super::{
    index::{Index, RawEvent, Source, TrackSource},
    project,
};

/// Why a report cannot be read at all (a missing table is not one).
#[derive(Debug, thiserror::Error)]
#[error("cannot read the report as an Nsight Systems SQLite export: {0}")]
pub struct LoadError(#[from] rusqlite::Error);

/// Opens a report read-only (the service never writes one).
pub fn open(path: &Path) -> Result<Connection, LoadError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

/// The process and thread numbers in a serialized global thread id.
pub fn pid_tid(global_tid: i64) -> (i64, i64) {
    ((global_tid >> 24) & 0xFF_FFFF, global_tid & 0xFF_FFFF)
}

/// `cudaLaunchKernel_v7000` -> `cudaLaunchKernel`: NVIDIA drops a suffix of `_v` and exactly
/// four characters, and keeps others (`cuMemAlloc_v2`).
pub fn api_name(raw: &str) -> &str {
    match raw.rfind("_v") {
        Some(i) if raw.len() - i == 6 => &raw[..i],
        _ => raw,
    }
}

/// Labels of CUDA copy kinds when a report has no ENUM_CUDA_MEMCPY_OPER table.
const COPY_KINDS: [&str; 14] = [
    "Unknown",
    "Host-to-Device",
    "Device-to-Host",
    "Host-to-Array",
    "Array-to-Host",
    "Array-to-Array",
    "Array-to-Device",
    "Device-to-Array",
    "Device-to-Device",
    "Host-to-Host",
    "Peer-to-Peer",
    "Unified Host-to-Device",
    "Unified Device-to-Host",
    "Unified Device-to-Device",
];

/// Names, numbered in the order first seen.
#[derive(Default)]
struct Names {
    ids: HashMap<String, u32>,
    list: Vec<String>,
}

impl Names {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.list.len() as u32;
        self.list.push(name.to_owned());
        self.ids.insert(name.to_owned(), id);
        id
    }
}

#[derive(Default)]
struct Thread {
    nvtx: Vec<RawEvent>,
    api: Vec<RawEvent>,
    osrt: Vec<RawEvent>,
}

struct Reader<'c> {
    conn: &'c Connection,
    tables: HashSet<String>,
    strings: HashMap<i64, String>,
    names: Names,
    notes: Vec<String>,
}

impl Reader<'_> {
    fn has(&self, table: &str) -> bool {
        self.tables.contains(table)
    }

    fn columns(&self, table: &str) -> Result<HashSet<String>, LoadError> {
        let mut stmt = self
            .conn
            .prepare(&format!("PRAGMA table_info(\"{table}\")"))?;
        let cols = stmt
            .query_map([], |r| r.get::<_, String>(1))?
            .collect::<Result<_, _>>()?;
        Ok(cols)
    }

    fn string(&self, id: Option<i64>) -> Option<&str> {
        id.and_then(|id| self.strings.get(&id)).map(String::as_str)
    }

    /// Streams the `(rowid, start, end, key, name)` rows of `sql` (columns: rowid, start, end,
    /// key, name id, text) to `each`; events without an end are skipped and counted in a note.
    /// A row's text is its name when present; otherwise `name` makes one from the id (once per
    /// id).
    fn rows(
        &mut self,
        sql: &str,
        name: impl Fn(&Self, Option<i64>) -> String,
        mut each: impl FnMut((i64, i64, i64, i64, u32)),
    ) -> Result<(), LoadError> {
        let conn = self.conn;
        let mut stmt = conn.prepare(sql)?;
        let mut rows = stmt.query([])?;
        let mut by_id: HashMap<Option<i64>, u32> = HashMap::new();
        let mut open = 0usize;
        while let Some(r) = rows.next()? {
            let Some(end) = r.get::<_, Option<i64>>(2)? else {
                open += 1;
                continue;
            };
            let name_id = r.get::<_, Option<i64>>(4)?;
            let id = match r.get_ref(5)?.as_str_or_null().ok().flatten() {
                Some(text) => self.names.id(text),
                None => match by_id.get(&name_id) {
                    Some(&id) => id,
                    None => {
                        let label = name(self, name_id);
                        let id = self.names.id(&label);
                        by_id.insert(name_id, id);
                        id
                    }
                },
            };
            each((
                r.get(0)?,
                r.get(1)?,
                end,
                r.get::<_, Option<i64>>(3)?.unwrap_or(0),
                id,
            ));
        }
        if open > 0 {
            self.notes
                .push(format!("{open} event(s) without an end were left out"));
        }
        Ok(())
    }
}

/// Reads every row the timeline shows.
pub fn load(path: &Path) -> Result<Index, LoadError> {
    let conn = open(path)?;
    let tables: HashSet<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<Result<_, _>>()?;
    let mut reader = Reader {
        conn: &conn,
        strings: HashMap::new(),
        names: Names::default(),
        notes: Vec::new(),
        tables,
    };
    if reader.has("StringIds") {
        reader.strings = conn
            .prepare("SELECT id, value FROM StringIds")?
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?
            .collect::<Result<_, _>>()?;
    }
    let mut threads: BTreeMap<(i64, i64), Thread> = BTreeMap::new();
    let mut streams: BTreeMap<(i64, i64, i64), Vec<RawEvent>> = BTreeMap::new();
    let event = |(rowid, start, end, _, name): (i64, i64, i64, i64, u32), source| RawEvent {
        start,
        end,
        name,
        source,
        rowid,
    };

    // NVTX ranges (push/pop and start/end) on the thread that opened them.
    if reader.has("NVTX_EVENTS") {
        let kinds = nvtx_range_types(&reader)?;
        let cols = reader.columns("NVTX_EVENTS")?;
        let text_id = if cols.contains("textId") {
            "textId"
        } else {
            "NULL"
        };
        let sql = format!(
            "SELECT rowid, start, end, globalTid, {text_id}, text FROM NVTX_EVENTS \
             WHERE eventType IN ({kinds})"
        );
        reader.rows(
            &sql,
            |r, id| r.string(id).unwrap_or("(unnamed range)").to_owned(),
            |row| {
                threads
                    .entry(pid_tid(row.3))
                    .or_default()
                    .nvtx
                    .push(event(row, Source::Nvtx));
            },
        )?;
    } else {
        reader
            .notes
            .push("no NVTX_EVENTS table: the report has no NVTX ranges".to_owned());
    }

    let api_tables = [
        ("CUPTI_ACTIVITY_KIND_RUNTIME", Source::Runtime),
        ("OSRT_API", Source::Osrt),
    ];
    for (table, source) in api_tables {
        if !reader.has(table) {
            if source == Source::Runtime {
                reader.notes.push(format!(
                    "no {table} table: the report has no CUDA API calls"
                ));
            }
            continue;
        }
        let sql = format!("SELECT rowid, start, end, globalTid, nameId, NULL FROM {table}");
        reader.rows(
            &sql,
            |r, id| {
                r.string(id)
                    .map(|n| api_name(n).to_owned())
                    .unwrap_or_else(|| "(unnamed call)".to_owned())
            },
            |row| {
                let thread = threads.entry(pid_tid(row.3)).or_default();
                let list = if source == Source::Runtime {
                    &mut thread.api
                } else {
                    &mut thread.osrt
                };
                list.push(event(row, source));
            },
        )?;
    }

    // GPU work per (device, context, stream).
    let copy_labels = copy_labels(&reader)?;
    let gpu_tables = [
        ("CUPTI_ACTIVITY_KIND_KERNEL", Source::Kernel),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", Source::Memcpy),
        ("CUPTI_ACTIVITY_KIND_MEMSET", Source::Memset),
    ];
    for (table, source) in gpu_tables {
        if !reader.has(table) {
            if source == Source::Kernel {
                reader
                    .notes
                    .push(format!("no {table} table: the report has no GPU kernels"));
            }
            continue;
        }
        let cols = reader.columns(table)?;
        let name_col = match source {
            Source::Kernel => ["shortName", "demangledName", "name"]
                .into_iter()
                .find(|c| cols.contains(*c))
                .unwrap_or("NULL"),
            Source::Memcpy => "copyKind",
            _ => "NULL",
        };
        // The stream goes in the `key` column: device, context and stream packed by SQL.
        let sql = format!(
            "SELECT rowid, start, end, (deviceId << 40) | ((contextId & 0xFFFFF) << 20) | \
             (streamId & 0xFFFFF), {name_col}, NULL FROM {table}"
        );
        let labels = &copy_labels;
        reader.rows(
            &sql,
            |r, id| match source {
                Source::Kernel => r.string(id).unwrap_or("(unnamed kernel)").to_owned(),
                Source::Memcpy => {
                    let kind = id
                        .and_then(|k| labels.get(&k).cloned())
                        .unwrap_or_else(|| "Unknown".to_owned());
                    format!("[CUDA memcpy {kind}]")
                }
                _ => "[CUDA memset]".to_owned(),
            },
            |row| {
                let key = row.3;
                let stream = (key >> 40, (key >> 20) & 0xFFFFF, key & 0xFFFFF);
                streams.entry(stream).or_default().push(event(row, source));
            },
        )?;
    }

    // NVTX ranges projected onto each GPU (through the CUDA correlation id).
    let mut projected: BTreeMap<i64, Vec<RawEvent>> = BTreeMap::new();
    let launched: Vec<&str> = gpu_tables
        .iter()
        .map(|(t, _)| *t)
        .filter(|t| reader.has(t))
        .collect();
    if reader.has("CUPTI_ACTIVITY_KIND_RUNTIME") && threads.values().any(|t| !t.nvtx.is_empty()) {
        let calls = project::calls(&conn, &launched)?;
        for (key, thread) in &threads {
            if let Some(calls) = calls.get(key) {
                for (device, events) in project::project(&thread.nvtx, calls) {
                    projected.entry(device).or_default().extend(events);
                }
            }
        }
    }

    let process_names = process_names(&reader)?;
    let thread_names = thread_names(&reader)?;
    let gpu_names = gpu_names(&reader)?;
    let mut sources: Vec<TrackSource> = Vec::new();
    let group = |sources: &mut Vec<TrackSource>, kind, label: String, parent| {
        sources.push(TrackSource {
            kind,
            label,
            parent,
            events: Vec::new(),
        });
        sources.len() - 1
    };
    let mut process: Option<(i64, usize)> = None;
    for ((pid, tid), thread) in threads {
        let p = match process {
            Some((seen, at)) if seen == pid => at,
            _ => {
                let name = process_names.get(&pid).cloned().unwrap_or_default();
                let label = if name.is_empty() {
                    format!("Process [{pid}]")
                } else {
                    format!("{name} [{pid}]")
                };
                let at = group(&mut sources, TrackKind::Process, label, None);
                process = Some((pid, at));
                at
            }
        };
        let name = thread_names.get(&(pid, tid)).cloned().unwrap_or_default();
        let label = if name.is_empty() {
            format!("Thread [{tid}]")
        } else {
            format!("{name} [{tid}]")
        };
        let t = group(&mut sources, TrackKind::Thread, label, Some(p));
        let rows = [
            (TrackKind::Nvtx, "NVTX", thread.nvtx),
            (TrackKind::CudaApi, "CUDA API", thread.api),
            (TrackKind::OsRuntime, "OS runtime", thread.osrt),
        ];
        for (kind, label, events) in rows {
            if !events.is_empty() {
                sources.push(TrackSource {
                    kind,
                    label: label.to_owned(),
                    parent: Some(t),
                    events,
                });
            }
        }
    }
    let contexts: HashMap<i64, HashSet<i64>> =
        streams.keys().fold(HashMap::new(), |mut m, &(d, c, _)| {
            m.entry(d).or_default().insert(c);
            m
        });
    let mut gpu: Option<(i64, usize)> = None;
    for ((device, context, stream), events) in streams {
        let g = match gpu {
            Some((seen, at)) if seen == device => at,
            _ => {
                let label = match gpu_names.get(&device) {
                    Some(name) => format!("GPU {device}: {name}"),
                    None => format!("GPU {device}"),
                };
                let at = group(&mut sources, TrackKind::Gpu, label, None);
                gpu = Some((device, at));
                if let Some(events) = projected.remove(&device) {
                    sources.push(TrackSource {
                        kind: TrackKind::NvtxProjected,
                        label: "NVTX (projected)".to_owned(),
                        parent: Some(at),
                        events,
                    });
                }
                at
            }
        };
        let label = if contexts.get(&device).is_some_and(|c| c.len() > 1) {
            format!("Context {context} · Stream {stream}")
        } else {
            format!("Stream {stream}")
        };
        sources.push(TrackSource {
            kind: TrackKind::Stream,
            label,
            parent: Some(g),
            events,
        });
    }
    Ok(Index::build(sources, reader.names.list, reader.notes))
}

/// The NVTX event types that are ranges, from the report's own enum when it has one.
fn nvtx_range_types(reader: &Reader<'_>) -> Result<String, LoadError> {
    if reader.has("ENUM_NSYS_EVENT_TYPE") {
        let ids: Vec<String> = reader
            .conn
            .prepare(
                "SELECT id FROM ENUM_NSYS_EVENT_TYPE \
                 WHERE name IN ('NvtxPushPopRange', 'NvtxStartEndRange', \
                 'NvtxtPushPopRange', 'NvtxtStartEndRange')",
            )?
            .query_map([], |r| r.get::<_, i64>(0))?
            .map(|r| r.map(|id| id.to_string()))
            .collect::<Result<_, _>>()?;
        if !ids.is_empty() {
            return Ok(ids.join(", "));
        }
    }
    Ok("59, 60".to_owned())
}

/// A row of two columns, either possibly NULL.
type Pair<A, B> = (Option<A>, Option<B>);

impl Reader<'_> {
    /// The rows of a two-column query.
    fn pairs<A: rusqlite::types::FromSql, B: rusqlite::types::FromSql>(
        &self,
        sql: &str,
    ) -> Result<Vec<Pair<A, B>>, LoadError> {
        let rows = self
            .conn
            .prepare(sql)?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }
}

fn copy_labels(reader: &Reader<'_>) -> Result<HashMap<i64, String>, LoadError> {
    let mut labels: HashMap<i64, String> = COPY_KINDS
        .iter()
        .enumerate()
        .map(|(i, l)| (i as i64, (*l).to_owned()))
        .collect();
    if reader.has("ENUM_CUDA_MEMCPY_OPER") {
        let rows = reader.pairs::<i64, String>("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER")?;
        labels.extend(rows.into_iter().filter_map(|(id, l)| Some((id?, l?))));
    }
    Ok(labels)
}

fn process_names(reader: &Reader<'_>) -> Result<HashMap<i64, String>, LoadError> {
    if !reader.has("PROCESSES") {
        return Ok(HashMap::new());
    }
    let rows = reader.pairs::<i64, String>("SELECT globalPid, name FROM PROCESSES")?;
    Ok(rows
        .into_iter()
        .filter_map(|(g, n)| Some((pid_tid(g?).0, n?)))
        .collect())
}

fn thread_names(reader: &Reader<'_>) -> Result<HashMap<(i64, i64), String>, LoadError> {
    if !reader.has("ThreadNames") {
        return Ok(HashMap::new());
    }
    let rows = reader.pairs::<i64, i64>("SELECT globalTid, nameId FROM ThreadNames")?;
    Ok(rows
        .into_iter()
        .filter_map(|(g, n)| Some((pid_tid(g?), reader.string(n)?.to_owned())))
        .collect())
}

fn gpu_names(reader: &Reader<'_>) -> Result<HashMap<i64, String>, LoadError> {
    if !reader.has("TARGET_INFO_GPU") {
        return Ok(HashMap::new());
    }
    // The device's number is `id` in current exports, `deviceId` in older ones.
    let cols = reader.columns("TARGET_INFO_GPU")?;
    let Some(id) = ["id", "deviceId"].into_iter().find(|c| cols.contains(*c)) else {
        return Ok(HashMap::new());
    };
    if !cols.contains("name") {
        return Ok(HashMap::new());
    }
    let rows = reader.pairs::<i64, String>(&format!("SELECT {id}, name FROM TARGET_INFO_GPU"))?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, n)| Some((id?, n?)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_names_lose_only_a_four_character_version() {
        assert_eq!(api_name("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
        assert_eq!(api_name("cuMemAlloc_v2"), "cuMemAlloc_v2");
        assert_eq!(
            api_name("cudaStreamIsCapturing_v10000"),
            "cudaStreamIsCapturing_v10000"
        );
        assert_eq!(pid_tid((1234 << 24) | 99), (1234, 99));
    }
}
