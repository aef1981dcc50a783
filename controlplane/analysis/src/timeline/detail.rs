//! One event's details, answered by SQL on the report: every column of its row (ids into
//! StringIds shown as their text), and the events tied to it by the CUDA correlation id (the API
//! call that launched a kernel or copy, and what an API call launched).
//!
//! ```text
//!  (track, event) ──index──> (table, rowid) ──SELECT * ... WHERE rowid = ?──> fields
//!  correlationId + process ──> the other side's rows ──Index: track + number by start──> links
//! ```

use rusqlite::{types::ValueRef, Connection, OptionalExtension};

use nsight_contracts::timeline::{EventDetail, EventLink, Field, TrackKind};

use super::{
    index::{Index, Source},
    load::{pid_tid, LoadError},
};

/// Columns that hold an id into StringIds.
const STRING_COLUMNS: [&str; 5] = [
    "nameId",
    "shortName",
    "demangledName",
    "mangledName",
    "textId",
];
/// Links listed per event at most (an API call may launch many kernels in a graph).
const MAX_LINKS: usize = 32;

fn text_of(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => "NULL".to_owned(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => f.to_string(),
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Blob(b) => format!("({} bytes)", b.len()),
    }
}

/// The details of event `event` of `track`; `None` when there is no such event.
pub fn detail(
    conn: &Connection,
    index: &Index,
    track: u32,
    event: u32,
) -> Result<Option<EventDetail>, LoadError> {
    let Some((_, ev)) = index.track(track) else {
        return Ok(None);
    };
    let e = event as usize;
    if e >= ev.len() {
        return Ok(None);
    }
    let (source, rowid) = (ev.source[e], ev.rowid[e]);
    let mut stmt = conn.prepare(&format!(
        "SELECT * FROM {} WHERE rowid = ?1",
        source.table()
    ))?;
    let names: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    let mut fields = Vec::new();
    let mut correlation = None;
    let mut process = None;
    let mut rows = stmt.query([rowid])?;
    if let Some(row) = rows.next()? {
        for (i, column) in names.iter().enumerate() {
            let value = row.get_ref(i)?;
            if column == "correlationId" {
                correlation = value.as_i64().ok();
            }
            if column == "globalPid" || column == "globalTid" {
                process = value.as_i64().ok().map(|g| pid_tid(g).0);
            }
            let mut text = text_of(value);
            if STRING_COLUMNS.contains(&column.as_str()) {
                if let Ok(id) = value.as_i64() {
                    let s: Option<String> = conn
                        .query_row("SELECT value FROM StringIds WHERE id = ?1", [id], |r| {
                            r.get(0)
                        })
                        .optional()
                        .unwrap_or(None);
                    if let Some(s) = s {
                        text = s;
                    }
                }
            }
            fields.push(Field {
                name: column.clone(),
                value: text,
            });
        }
    }
    let related = match (correlation, process) {
        (Some(c), Some(p)) => links(conn, index, source, c, p)?,
        _ => Vec::new(),
    };
    Ok(Some(EventDetail {
        track,
        event,
        name: index.name_of(ev.name[e]),
        start_ns: ev.start[e],
        end_ns: ev.end[e],
        row: ev.row[e],
        fields,
        related,
    }))
}

/// The events on the other side of a correlation id, within one process.
fn links(
    conn: &Connection,
    index: &Index,
    source: Source,
    correlation: i64,
    process: i64,
) -> Result<Vec<EventLink>, LoadError> {
    let (targets, relation, pid_column): (&[Source], &str, &str) = match source {
        Source::Kernel | Source::Memcpy | Source::Memset => {
            (&[Source::Runtime], "launched by", "globalTid")
        }
        Source::Runtime => (
            &[Source::Kernel, Source::Memcpy, Source::Memset],
            "launched",
            "globalPid",
        ),
        _ => return Ok(Vec::new()),
    };
    let kind = if source == Source::Runtime {
        TrackKind::Stream
    } else {
        TrackKind::CudaApi
    };
    let mut out = Vec::new();
    for &target in targets {
        let table = target.table();
        let exists: bool = conn
            .query_row(
                "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get(0),
            )
            .unwrap_or(false);
        if !exists {
            continue;
        }
        let mut stmt = conn.prepare(&format!(
            "SELECT rowid, start FROM {table} WHERE correlationId = ?1 \
             AND (({pid_column} >> 24) & 16777215) = ?2 LIMIT {MAX_LINKS}"
        ))?;
        let rows = stmt
            .query_map([correlation, process], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        for (rowid, start) in rows {
            let found = index
                .tracks
                .iter()
                .filter(|t| t.kind == kind)
                .find_map(|t| {
                    let ev = &index.events[t.id as usize];
                    ev.find(target, rowid, start).map(|n| (t.id, ev, n))
                });
            if let Some((track, ev, n)) = found {
                let i = n as usize;
                out.push(EventLink {
                    track,
                    event: n,
                    name: index
                        .names
                        .get(ev.name[i] as usize)
                        .cloned()
                        .unwrap_or_default(),
                    start_ns: ev.start[i],
                    end_ns: ev.end[i],
                    relation: relation.to_owned(),
                });
            }
        }
    }
    Ok(out)
}
