//! Turns one process's dump (NVTX events, and GPU activity from CUPTI in [`cuda`]) into a report
//! in the Nsight Systems SQLite export schema, so that recipes and SQL written for `nsys export
//! --type sqlite` run on it unchanged. Owns the
//! tables and their column sets (copied from real nsys 2026.2 exports); touches nothing but the
//! connection it is given. Shared by the agent (dumps from its injection library) and the OTLP
//! converter (`controlplane/otlp`, dumps built from spans): one writer, one schema.
//!
//! ```text
//!  Dump { strings, thread_names, events, window } ──> StringIds, NVTX_EVENTS, ThreadNames,
//!      PROCESSES, TARGET_INFO_SESSION_START_TIME, META_DATA_EXPORT, ENUM_NSYS_EVENT_TYPE
//! ```
//! `globalTid = pid << 24 | tid` and `globalPid = pid << 24` (nsys's encoding with hardware and
//! VM ids 0: PID = globalTid / 0x1000000 % 0x1000000, TID = globalTid % 0x1000000).

use std::{collections::HashMap, path::Path};

use nsight_nvtx::dump::{Dump, EventKind, Payload};
use rusqlite::{params, Connection};

/// `ENUM_NSYS_EVENT_TYPE` ids this report uses.
pub mod event_type {
    pub const NVTX_CATEGORY: i64 = 33;
    pub const NVTX_MARK: i64 = 34;
    pub const NVTX_PUSH_POP_RANGE: i64 = 59;
    pub const NVTX_START_END_RANGE: i64 = 60;
    pub const NVTX_DOMAIN_CREATE: i64 = 75;
}

/// The NVTX part of `ENUM_NSYS_EVENT_TYPE` (ids and names as nsys exports them).
const EVENT_TYPES: &[(i64, &str)] = &[
    (32, "NvtxEvents"),
    (33, "NvtxCategory"),
    (34, "NvtxMark"),
    (35, "NvtxPushRange"),
    (36, "NvtxPopRange"),
    (37, "NvtxStartRange"),
    (38, "NvtxEndRange"),
    (39, "NvtxThread"),
    (59, "NvtxPushPopRange"),
    (60, "NvtxStartEndRange"),
    (64, "NvtxtCategory"),
    (65, "NvtxtMark"),
    (66, "NvtxtPushRange"),
    (67, "NvtxtPopRange"),
    (68, "NvtxtStartRange"),
    (69, "NvtxtEndRange"),
    (70, "NvtxtPushPopRange"),
    (71, "NvtxtStartEndRange"),
    (72, "NvtxtMetaThread"),
    (73, "NvtxtMetaProcess"),
    (74, "NvtxtMetaFileDisplay"),
    (75, "NvtxDomainCreate"),
    (76, "NvtxDomainDestroy"),
    (97, "NvtxNameCudaDevice"),
    (98, "NvtxNameCudaContext"),
    (99, "NvtxNameCudaStream"),
];

/// The export schema version whose tables and columns this report follows.
pub const SCHEMA_VERSION: &str = "3.25.0";

const SCHEMA: &str = "
CREATE TABLE StringIds (
    id      INTEGER NOT NULL PRIMARY KEY,
    value   TEXT    NOT NULL
);
CREATE TABLE ThreadNames (
    nameId      INTEGER NOT NULL,
    priority    INTEGER,
    globalTid   INTEGER
);
CREATE TABLE PROCESSES (
    globalPid   INTEGER,
    pid         INTEGER,
    name        TEXT
);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (
    utcEpochNs      INTEGER,
    utcTime         TEXT,
    localTime       TEXT,
    systemClockNs   INTEGER
);
CREATE TABLE META_DATA_EXPORT (
    name    TEXT NOT NULL,
    value   TEXT
);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (
    id      INTEGER NOT NULL PRIMARY KEY,
    name    TEXT,
    label   TEXT
);
CREATE TABLE NVTX_EVENTS (
    start           INTEGER NOT NULL,
    end             INTEGER,
    eventType       INTEGER NOT NULL,
    rangeId         INTEGER,
    category        INTEGER,
    color           INTEGER,
    text            TEXT,
    globalTid       INTEGER,
    endGlobalTid    INTEGER,
    textId          INTEGER,
    domainId        INTEGER,
    uint64Value     INTEGER,
    int64Value      INTEGER,
    doubleValue     REAL,
    uint32Value     INTEGER,
    int32Value      INTEGER,
    floatValue      REAL,
    jsonTextId      INTEGER,
    jsonText        TEXT,
    binaryData      TEXT
);
";

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("creating the report {}", path.display())]
    Create {
        path: std::path::PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("writing the report tables")]
    Write(#[source] rusqlite::Error),
}

/// Who made the report, for `META_DATA_EXPORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportMeta {
    /// e.g. `2026-05-26T08:01:27` (UTC).
    pub export_time_utc: String,
    pub host: String,
    pub output_file: String,
}

/// `globalTid` as nsys serialises it.
pub fn global_tid(pid: u32, tid: u32) -> i64 {
    (i64::from(pid) << 24) | i64::from(tid & 0xff_ffff)
}

/// `YYYY-MM-DDTHH:MM:SS` (UTC) for nanoseconds since the epoch.
pub fn utc_text(ns: u64) -> String {
    let secs = i64::try_from(ns / 1_000_000_000).unwrap_or(0);
    time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|t| {
            t.format(time::macros::format_description!(
                "[year]-[month]-[day]T[hour]:[minute]:[second]"
            ))
            .ok()
        })
        .unwrap_or_default()
}

/// Writes `dump` as a new SQLite file at `path` (replacing one left there).
pub fn write_file(dump: &Dump, meta: &ReportMeta, path: &Path) -> Result<(), ReportError> {
    let _ = std::fs::remove_file(path);
    let mut conn = Connection::open(path).map_err(|source| ReportError::Create {
        path: path.to_path_buf(),
        source,
    })?;
    write(&mut conn, dump, meta)
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Creates the tables in `conn` (empty) and fills them from `dump`, in one transaction.
pub fn write(conn: &mut Connection, dump: &Dump, meta: &ReportMeta) -> Result<(), ReportError> {
    let tx = conn.transaction().map_err(ReportError::Write)?;
    tx.execute_batch(SCHEMA).map_err(ReportError::Write)?;
    let mut next_string = 0i64;
    let mut string_ids: HashMap<u64, i64> = HashMap::new();
    {
        let mut insert = tx
            .prepare("INSERT INTO StringIds (id, value) VALUES (?1, ?2)")
            .map_err(ReportError::Write)?;
        for s in &dump.strings {
            insert
                .execute(params![next_string, s.value])
                .map_err(ReportError::Write)?;
            string_ids.insert(s.id, next_string);
            next_string += 1;
        }
        let mut names = tx
            .prepare("INSERT INTO ThreadNames (nameId, priority, globalTid) VALUES (?1, 0, ?2)")
            .map_err(ReportError::Write)?;
        for t in &dump.thread_names {
            insert
                .execute(params![next_string, t.name])
                .map_err(ReportError::Write)?;
            names
                .execute(params![next_string, global_tid(dump.pid, t.tid)])
                .map_err(ReportError::Write)?;
            next_string += 1;
        }
    }
    if let Some(cuda) = &dump.cuda {
        cuda::write(&tx, dump.pid, cuda, &mut next_string).map_err(ReportError::Write)?;
    }
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO NVTX_EVENTS (start, end, eventType, rangeId, category, color, text, \
                 globalTid, endGlobalTid, textId, domainId, uint64Value, int64Value, doubleValue, \
                 uint32Value, int32Value, floatValue) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
            )
            .map_err(ReportError::Write)?;
        for e in &dump.events {
            let kind = match e.kind {
                EventKind::PushPop => event_type::NVTX_PUSH_POP_RANGE,
                EventKind::StartEnd => event_type::NVTX_START_END_RANGE,
                EventKind::Mark => event_type::NVTX_MARK,
                EventKind::DomainCreate => event_type::NVTX_DOMAIN_CREATE,
                EventKind::Category => event_type::NVTX_CATEGORY,
            };
            let (mut u64v, mut i64v, mut f64v, mut u32v, mut i32v, mut f32v) =
                (None, None, None, None, None, None);
            match e.payload {
                Some(Payload::U64(v)) => u64v = Some(i64_of(v)),
                Some(Payload::I64(v)) => i64v = Some(v),
                Some(Payload::F64(v)) => f64v = Some(v),
                Some(Payload::U32(v)) => u32v = Some(v),
                Some(Payload::I32(v)) => i32v = Some(v),
                Some(Payload::F32(v)) => f32v = Some(f64::from(v)),
                None => {}
            }
            // An unknown registered-string handle keeps the event, without a name.
            let text_id = e.text_id.and_then(|id| string_ids.get(&id).copied());
            insert
                .execute(params![
                    i64_of(e.start),
                    e.end.map(i64_of),
                    kind,
                    e.range_id.map(i64_of),
                    (e.category != 0).then_some(e.category),
                    e.color,
                    e.text,
                    global_tid(dump.pid, e.tid),
                    e.end_tid.map(|t| global_tid(dump.pid, t)),
                    text_id,
                    i64_of(e.domain),
                    u64v,
                    i64v,
                    f64v,
                    u32v,
                    i32v,
                    f32v,
                ])
                .map_err(ReportError::Write)?;
        }
    }
    tx.execute(
        "INSERT INTO PROCESSES (globalPid, pid, name) VALUES (?1, ?2, ?3)",
        params![global_tid(dump.pid, 0), dump.pid, dump.process_name],
    )
    .map_err(ReportError::Write)?;
    let start = utc_text(dump.window.utc_start_ns);
    tx.execute(
        "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?1, ?2, ?3, ?4)",
        params![
            i64_of(dump.window.utc_start_ns),
            start,
            start,
            i64_of(dump.window.start_ns)
        ],
    )
    .map_err(ReportError::Write)?;
    for (id, name) in EVENT_TYPES {
        tx.execute(
            "INSERT INTO ENUM_NSYS_EVENT_TYPE (id, name, label) VALUES (?1, ?2, ?2)",
            params![id, name],
        )
        .map_err(ReportError::Write)?;
    }
    let (major, minor_micro) = SCHEMA_VERSION.split_once('.').unwrap_or(("3", "0.0"));
    let (minor, micro) = minor_micro.split_once('.').unwrap_or(("0", "0"));
    let metadata = [
        ("EXPORT_PRODUCT_NAME", "Nsight Operator (Rust) nvtx backend"),
        ("EXPORT_PRODUCT_VERSION", env!("CARGO_PKG_VERSION")),
        ("EXPORT_SCHEMA_VERSION", SCHEMA_VERSION),
        ("EXPORT_SCHEMA_VERSION_MAJOR", major),
        ("EXPORT_SCHEMA_VERSION_MINOR", minor),
        ("EXPORT_SCHEMA_VERSION_MICRO", micro),
        ("EXPORT_PLATFORM", "linux-desktop"),
        ("EXPORT_ARCH", std::env::consts::ARCH),
        ("EXPORT_TIME_UTC", &meta.export_time_utc),
        ("EXPORT_HOST", &meta.host),
        ("EXPORT_PARAM_EXPORT_TYPE", "SQLite"),
        ("EXPORT_PARAM_OUTPUT_FILE", &meta.output_file),
        ("EXPORT_PARAM_TIME_NORMALIZE", "false"),
    ];
    let dropped;
    let mut metadata = metadata.to_vec();
    if let Some(cuda) = &dump.cuda {
        metadata[0].1 = "Nsight Operator (Rust) nvtx+cupti backend";
        dropped = cuda.dropped.to_string();
        metadata.push(("NSIGHT_CUPTI_DROPPED_RECORDS", &dropped));
        if !cuda.cupti.is_empty() {
            metadata.push(("NSIGHT_CUPTI_LIBRARY", &cuda.cupti));
        }
        if let Some(why) = &cuda.unavailable {
            metadata.push(("NSIGHT_CUPTI_UNAVAILABLE", why));
        }
    }
    for (name, value) in metadata {
        tx.execute(
            "INSERT INTO META_DATA_EXPORT (name, value) VALUES (?1, ?2)",
            params![name, value],
        )
        .map_err(ReportError::Write)?;
    }
    tx.commit().map_err(ReportError::Write)
}

mod cuda;
pub use cuda::{kernel_names, nsys_memory_kind};

#[cfg(test)]
mod tests;
