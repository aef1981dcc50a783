//! The `cuda_memcpy_async` recipe (NVIDIA's expert-system rule "CUDA Async Memcpy with
//! Pageable Memory"), as a component of the `recipe` world: asynchronous copies that became
//! synchronous because one side is pageable host memory.
//!
//! ```text
//!  MEMCPY (srcKind or dstKind pageable) ⋈ RUNTIME (correlationId) ⋈ StringIds
//!      (call name LIKE 'cudaMemcpy%Async%') ──> one row per copy, longest first
//! ```
//! The join is NVIDIA's: by `correlationId` alone. Memory kinds are labelled from
//! `ENUM_CUDA_MEM_KIND` (nsys's numbering, 0 = Pageable), else from the same labels built in.

use std::collections::HashMap;

use nsight_recipe_sdk::{
    memops::memory_kind_labels, round_half_away, time_value, time_window, Args, Column, ColumnKind,
    Output, Report, Schema, Table, TimeUnit, Value, BYTES_PER_MB, FILTER_ARGS, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(CudaMemcpyAsync);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const NAME: &str = "cuda_memcpy_async";
const MEMCPY: &str = "CUPTI_ACTIVITY_KIND_MEMCPY";
const RUNTIME: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";
/// nsys's memory kind of pageable host memory.
const PAGEABLE: i64 = 0;

struct CudaMemcpyAsync;

impl Guest for CudaMemcpyAsync {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "cuda_memcpy_async: describe");
        RecipeInfo {
            name: NAME.into(),
            display_name: "CUDA Async Memcpy with Pageable Memory".into(),
            description: "Asynchronous memory copies (cudaMemcpy*Async) from or to pageable host \
                          memory, which the driver runs synchronously: each copy with its \
                          duration, start, memory kinds, size, process, device, context, stream \
                          and API, longest first. Pinned host memory avoids them."
                .into(),
            arguments: wit_arguments(
                STATS_ARGUMENTS
                    .iter()
                    .take(1)
                    .chain(&[(
                        "rows",
                        "At most this many rows (the longest copies); -1 for all.",
                        Some("-1"),
                    )])
                    .chain(&STATS_ARGUMENTS[1..]),
            ),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, memcpy_async)
    }
}

/// `--rows`: a limit, or `None` for all (not given, or `-1`).
fn row_limit(args: &Args) -> Result<Option<usize>, String> {
    match args.get("rows").map(str::trim) {
        None | Some("-1") => Ok(None),
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

/// One copy as listed.
struct Copy {
    duration: i64,
    start: i64,
    src: Option<i64>,
    dst: Option<i64>,
    bytes: Option<i64>,
    global_pid: Option<i64>,
    device: Option<i64>,
    context: Option<i64>,
    green_context: Option<i64>,
    stream: Option<i64>,
    api: String,
}

fn memcpy_async(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit", "rows", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let unit = args.time_unit()?;
    let limit = row_limit(&args)?;
    let mut out = Output::default();
    let schema = Schema::read(report);
    let strings = schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let memcpy = schema.require(
        &mut out,
        MEMCPY,
        &[
            "start",
            "end",
            "srcKind",
            "dstKind",
            "bytes",
            "globalPid",
            "deviceId",
            "contextId",
            "streamId",
            "correlationId",
        ],
        "the profile has no CUDA memory copies",
    );
    let runtime = schema.require(
        &mut out,
        RUNTIME,
        &["correlationId", "nameId"],
        "the profile has no CUDA API calls",
    );
    let mut copies = Vec::new();
    if let (Some(memcpy), Some(runtime)) = (memcpy, runtime) {
        if strings {
            let green = if memcpy.iter().any(|c| c == "greenContextId") {
                "NULLIF(m.greenContextId, 0)"
            } else {
                out.note(format!(
                    "column {MEMCPY}.greenContextId not in this report (older export); Green \
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
                 FROM {MEMCPY} AS m \
                 JOIN {RUNTIME} AS r ON r.correlationId = m.correlationId {not_backtrace} \
                 JOIN StringIds AS s ON s.id = r.nameId \
                 WHERE (m.srcKind = {PAGEABLE} OR m.dstKind = {PAGEABLE}) \
                   AND s.value LIKE 'cudaMemcpy%Async%' AND {}",
                window.sql("m")
            );
            report.query(&sql, &[], &mut |row| {
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
        }
    }
    // Longest first (NVIDIA's ORDER BY 1 DESC); then by start and the ids, so ties are stable.
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
    out.note(if found > 0 {
        "The APIs listed use PAGEABLE memory, which makes asynchronous CUDA memcpy operations \
         block and run synchronously, leading to low GPU utilization. Suggestion: if \
         applicable, use PINNED memory instead."
    } else {
        "There were no problems detected related to memcpy operations using pageable memory."
    });
    let labels = memory_kind_labels(&schema)?;
    out.tables.push(table(copies, &labels, unit));
    Ok(out)
}

fn table(copies: Vec<Copy>, labels: &HashMap<i64, String>, unit: TimeUnit) -> Table {
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
    Table {
        name: NAME.to_owned(),
        columns,
        rows,
    }
}
