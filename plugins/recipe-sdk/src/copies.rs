//! Memory copies listed one per row with the CUDA API call that made them, for NVIDIA's
//! expert-system rules on copies (`cuda_memcpy_async`, `cuda_memcpy_sync`): which copies is the
//! rule's (an SQL condition over `m`, the copy, and `s.value`, the call's name); reading,
//! ordering (longest first), the row limit and the table are shared here.
//!
//! ```text
//!  MEMCPY m ⋈ RUNTIME r (correlationId, NVIDIA's join) ⋈ StringIds s ─ rule's condition ─>
//!      Copy rows ─ longest first, --rows ─> Duration, Start, kinds, MB, PID, device, ..., API
//!      (every row found) ─ total time per API and memory kinds ─> bar chart
//! ```

use std::collections::{BTreeMap, HashMap};

use crate::{
    memops::{memory_kind_labels, MEMCPY_TABLE},
    round_half_away, svg, time_value, Args, Column, ColumnKind, Figure, Output, Schema, Table,
    TimeUnit, Value, Window, BYTES_PER_MB,
};

/// At most this many bars in [`time_by_api_figure`].
const FIGURE_BARS: usize = 20;

const RUNTIME: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";

/// One copy as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    pub duration: i64,
    pub start: i64,
    pub src: Option<i64>,
    pub dst: Option<i64>,
    pub bytes: Option<i64>,
    pub global_pid: Option<i64>,
    pub device: Option<i64>,
    pub context: Option<i64>,
    pub green_context: Option<i64>,
    pub stream: Option<i64>,
    /// The call's name as stored (with its version suffix, as NVIDIA's rules print it).
    pub api: String,
}

/// `--rows`: a limit; `None` for all (`-1`, or not given when `default` is `None`).
pub fn row_limit(args: &Args, default: Option<usize>) -> Result<Option<usize>, String> {
    match args.get("rows").map(str::trim) {
        None => Ok(default),
        Some("-1") => Ok(None),
        Some(s) => s
            .parse::<usize>()
            .ok()
            .filter(|&n| n >= 1)
            .map(Some)
            .ok_or_else(|| {
                format!("--rows {s}: expected a whole number of 1 or more, or -1 for all")
            }),
    }
}

/// The copies inside `window` that `condition` selects, each joined by `correlationId` to its
/// call (backtrace rows, event class 67, are no calls); missing tables and columns become notes
/// and no copies.
pub fn read_copies(
    schema: &Schema<'_>,
    condition: &str,
    window: &Window,
    out: &mut Output,
) -> Result<Vec<Copy>, String> {
    let memcpy = schema.require(
        out,
        MEMCPY_TABLE,
        &[
            "start",
            "end",
            "srcKind",
            "dstKind",
            "bytes",
            "copyKind",
            "globalPid",
            "deviceId",
            "contextId",
            "streamId",
            "correlationId",
        ],
        "the profile has no CUDA memory copies",
    );
    let runtime = schema.require(
        out,
        RUNTIME,
        &["correlationId", "nameId"],
        "the profile has no CUDA API calls",
    );
    let (Some(memcpy), Some(runtime)) = (memcpy, runtime) else {
        return Ok(Vec::new());
    };
    if !schema.has_table("StringIds") {
        return Ok(Vec::new());
    }
    let green = if memcpy.iter().any(|c| c == "greenContextId") {
        "NULLIF(m.greenContextId, 0)"
    } else {
        out.note(format!(
            "column {MEMCPY_TABLE}.greenContextId not in this report (older export); Green \
             Context ID is empty"
        ));
        "NULL"
    };
    let not_backtrace = if runtime.iter().any(|c| c == "eventClass") {
        "AND r.eventClass IS NOT 67"
    } else {
        ""
    };
    let sql = format!(
        "SELECT m.\"end\" - m.start, m.start, m.srcKind, m.dstKind, m.bytes, m.globalPid, \
         m.deviceId, m.contextId, {green}, m.streamId, s.value \
         FROM {MEMCPY_TABLE} AS m \
         JOIN {RUNTIME} AS r ON r.correlationId = m.correlationId {not_backtrace} \
         JOIN StringIds AS s ON s.id = r.nameId \
         WHERE ({condition}) AND {}",
        window.sql("m")
    );
    let mut copies = Vec::new();
    schema.report().query(&sql, &[], &mut |row| {
        let int = |i: usize| row.get(i).and_then(Value::as_int);
        if let (Some(duration), Some(start)) = (int(0), int(1)) {
            copies.push(Copy {
                duration,
                start,
                src: int(2),
                dst: int(3),
                bytes: int(4),
                global_pid: int(5),
                device: int(6),
                context: int(7),
                green_context: int(8),
                stream: int(9),
                api: row
                    .get(10)
                    .and_then(Value::as_text)
                    .unwrap_or_default()
                    .to_owned(),
            });
        }
        Ok(())
    })?;
    Ok(copies)
}

/// Longest first (NVIDIA's `ORDER BY 1 DESC`), then by start, PID, device, stream and API so
/// that ties are stable; cut at `limit` with a note. Returns how many there were.
pub fn longest_first(copies: &mut Vec<Copy>, limit: Option<usize>, out: &mut Output) -> usize {
    copies.sort_by(|a, b| {
        b.duration
            .cmp(&a.duration)
            .then(a.start.cmp(&b.start))
            .then(a.global_pid.cmp(&b.global_pid))
            .then(a.device.cmp(&b.device))
            .then(a.stream.cmp(&b.stream))
            .then_with(|| a.api.cmp(&b.api))
    });
    let found = copies.len();
    if let Some(limit) = limit.filter(|&l| l < found) {
        copies.truncate(limit);
        out.note(format!(
            "{found} copies found; the {limit} longest are listed"
        ));
    }
    found
}

/// Where the copies' time went: their total duration (in `unit`) per API and source and
/// destination memory kinds, largest first (ties by name), at most [`FIGURE_BARS`] bars, as the
/// bar chart `name`; labels read `<API>: <src kind> to <dst kind>`. None without copies. Give
/// it every copy found, before a row limit.
pub fn time_by_api_figure(
    schema: &Schema<'_>,
    name: &str,
    copies: &[Copy],
    unit: TimeUnit,
) -> Result<Option<Figure>, String> {
    if copies.is_empty() {
        return Ok(None);
    }
    let labels: HashMap<i64, String> = memory_kind_labels(schema)?;
    let kind = |k: Option<i64>| {
        k.and_then(|k| labels.get(&k))
            .map_or("unknown", String::as_str)
    };
    let mut totals: BTreeMap<String, i64> = BTreeMap::new();
    for c in copies {
        let label = format!("{}: {} to {}", c.api, kind(c.src), kind(c.dst));
        *totals.entry(label).or_default() += c.duration;
    }
    let groups = totals.len();
    let mut bars: Vec<(String, i64)> = totals.into_iter().collect();
    bars.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let bars: Vec<(String, f64)> = bars
        .into_iter()
        .take(FIGURE_BARS)
        .map(|(label, total)| (label, total as f64 / unit.nanos()))
        .collect();
    Ok(Some(svg::bar_chart(
        name,
        &format!(
            "Copy time by API and memory kinds ({} of {groups} groups, {} copies)",
            bars.len(),
            copies.len()
        ),
        "API: source to destination memory kind",
        &format!("Total duration ({})", unit.suffix()),
        &bars,
    )))
}

/// The table `name` of `copies`: Duration, Start (in `unit`), Src Kind, Dst Kind (labels of
/// `memory_kind_labels`), Bytes (MB, three decimals), PID, Device ID, Context ID, Green
/// Context ID, Stream ID, API Name.
pub fn copies_table(
    schema: &Schema<'_>,
    name: &str,
    copies: Vec<Copy>,
    unit: TimeUnit,
) -> Result<Table, String> {
    let labels: HashMap<i64, String> = memory_kind_labels(schema)?;
    let u = unit.suffix();
    let time_kind = if unit == TimeUnit::Nsec {
        ColumnKind::Int
    } else {
        ColumnKind::Real
    };
    let columns = vec![
        Column::new(format!("Duration ({u})"), time_kind, Some(u)),
        Column::new(format!("Start ({u})"), time_kind, Some(u)),
        Column::new("Src Kind", ColumnKind::Text, None),
        Column::new("Dst Kind", ColumnKind::Text, None),
        Column::new("Bytes (MB)", ColumnKind::Real, Some("MB")),
        Column::new("PID", ColumnKind::Int, None),
        Column::new("Device ID", ColumnKind::Int, None),
        Column::new("Context ID", ColumnKind::Int, None),
        Column::new("Green Context ID", ColumnKind::Int, None),
        Column::new("Stream ID", ColumnKind::Int, None),
        Column::new("API Name", ColumnKind::Text, None),
    ];
    let int = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
    let kind = |k: Option<i64>| {
        k.and_then(|k| labels.get(&k))
            .map_or(Value::Null, |l| Value::Text(l.clone()))
    };
    let rows = copies
        .into_iter()
        .map(|c| {
            vec![
                time_value(unit, c.duration),
                time_value(unit, c.start),
                kind(c.src),
                kind(c.dst),
                c.bytes.map_or(Value::Null, |b| {
                    Value::Real(round_half_away(b as f64 / BYTES_PER_MB, 3))
                }),
                int(c.global_pid.map(|g| g / 0x100_0000 % 0x100_0000)),
                int(c.device),
                int(c.context),
                int(c.green_context),
                int(c.stream),
                Value::Text(c.api),
            ]
        })
        .collect();
    Ok(Table {
        name: name.to_owned(),
        columns,
        rows,
    })
}
