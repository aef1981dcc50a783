//! The `cuda_gpu_trace` recipe (NVIDIA's `cuda_gpu_trace` stats report), as a component of the
//! `recipe` world: every CUDA kernel, memory copy and memset on the GPU, in start order.
//!
//! ```text
//!  KERNEL ─┐
//!  MEMCPY ─┼─ events.rs (names, memory kinds) ── by start ──> one row per event
//!  MEMSET ─┘          TARGET_INFO_GPU -> "Device" = "<GPU name> (<id>)"
//! ```
//! Sizes are MB (1e6 bytes) rounded to three decimals; the throughput of a copy or memset is
//! NVIDIA's `bytes * (1000000000 / duration)` (an integer division) in MB/s, rounded the same
//! way, empty for a zero duration.

mod events;

use std::collections::HashMap;

use nsight_recipe_sdk::{
    round_half_away, time_value, time_window, Args, Column, ColumnKind, KernelName, Output, Report,
    Schema, Table, TimeUnit, Value, BYTES_PER_MB, FILTER_ARGS, KERNEL_NAME_ARGUMENT,
    STATS_ARGUMENTS,
};

use crate::events::{gpu_names, read_events, Event, KERNEL_TABLE};

nsight_recipe_sdk::recipe_component!(CudaGpuTrace);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const NAME: &str = "cuda_gpu_trace";

struct CudaGpuTrace;

impl Guest for CudaGpuTrace {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "cuda_gpu_trace: describe");
        RecipeInfo {
            name: NAME.into(),
            display_name: "CUDA GPU Trace".into(),
            description: "Every CUDA kernel, memory copy and memset on the GPU in start order: \
                          start, duration, correlation id, grid and block, registers, shared \
                          memory, bytes and throughput, memory kinds, device, context, stream \
                          and name."
                .into(),
            arguments: wit_arguments(
                STATS_ARGUMENTS
                    .iter()
                    .take(1)
                    .chain([&KERNEL_NAME_ARGUMENT])
                    .chain(&STATS_ARGUMENTS[1..]),
            ),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, gpu_trace)
    }
}

fn gpu_trace(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit", "name", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let unit = args.time_unit()?;
    let kernel_name = KernelName::parse(&args)?;
    let mut out = Output::default();
    let schema = Schema::read(report);
    let strings = schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let tables = [
        KERNEL_TABLE,
        nsight_recipe_sdk::memops::MEMCPY_TABLE,
        nsight_recipe_sdk::memops::MEMSET_TABLE,
    ];
    let present: Vec<&str> = tables.into_iter().filter(|t| schema.has_table(t)).collect();
    for t in tables.iter().filter(|t| !present.contains(t)) {
        out.note(format!("table {t} not in this report"));
    }
    for t in &present {
        if !schema.columns(t).iter().any(|c| c == "greenContextId") {
            out.note(format!(
                "column {t}.greenContextId not in this report (older export); GreenCtx is empty"
            ));
        }
    }
    let name_column = if schema.has_table(KERNEL_TABLE) {
        kernel_name.column_in(&schema.columns(KERNEL_TABLE), &mut out)
    } else {
        kernel_name.column()
    };
    let mut events = if strings && !present.is_empty() {
        read_events(&schema, name_column, &window)?
    } else {
        Vec::new()
    };
    // NVIDIA's ORDER BY start; ties as the union lists them (kernels, copies, memsets, each by
    // rowid).
    events.sort_by_key(|(source, rowid, e)| (e.start, *source, *rowid));
    let gpus = gpu_names(&schema)?;
    if !events.is_empty() && gpus.is_empty() {
        out.note("no GPU names in this report (TARGET_INFO_GPU); devices are shown by id");
    }
    out.tables.push(table(
        events.into_iter().map(|(_, _, e)| e).collect(),
        &gpus,
        unit,
    ));
    Ok(out)
}

/// Bytes as MB rounded to three decimals.
fn mb(bytes: Option<i64>) -> Value {
    bytes.map_or(Value::Null, |b| {
        Value::Real(round_half_away(b as f64 / BYTES_PER_MB, 3))
    })
}

/// NVIDIA's `bytes * (1000000000 / duration)` (integer division; NULL for a zero duration)
/// in MB/s, rounded to three decimals.
fn throughput(bytes: Option<i64>, duration: i64) -> Value {
    match bytes {
        Some(b) if duration != 0 => {
            let per_second = i128::from(b) * i128::from(1_000_000_000 / duration);
            Value::Real(round_half_away(per_second as f64 / BYTES_PER_MB, 3))
        }
        _ => Value::Null,
    }
}

fn columns(unit: TimeUnit) -> Vec<Column> {
    let u = unit.suffix();
    let time_kind = if unit == TimeUnit::Nsec {
        ColumnKind::Int
    } else {
        ColumnKind::Real
    };
    let int = |n: &str| Column::new(n, ColumnKind::Int, None);
    let mb = |n: &str| Column::new(format!("{n} (MB)"), ColumnKind::Real, Some("MB"));
    vec![
        Column::new(format!("Start ({u})"), time_kind, Some(u)),
        Column::new(format!("Duration ({u})"), time_kind, Some(u)),
        int("CorrId"),
        int("GrdX"),
        int("GrdY"),
        int("GrdZ"),
        int("BlkX"),
        int("BlkY"),
        int("BlkZ"),
        int("Reg/Trd"),
        mb("StcSMem"),
        mb("DymSMem"),
        mb("Bytes"),
        Column::new("Throughput (MB/s)", ColumnKind::Real, Some("MB/s")),
        Column::new("SrcMemKd", ColumnKind::Text, None),
        Column::new("DstMemKd", ColumnKind::Text, None),
        Column::new("Device", ColumnKind::Text, None),
        int("Ctx"),
        int("GreenCtx"),
        int("Strm"),
        Column::new("Name", ColumnKind::Text, None),
    ]
}

fn table(events: Vec<Event>, gpus: &HashMap<i64, String>, unit: TimeUnit) -> Table {
    let int = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
    let text = |v: Option<String>| v.map_or(Value::Null, Value::Text);
    let rows = events
        .into_iter()
        .map(|e| {
            let mut row = vec![
                time_value(unit, e.start),
                time_value(unit, e.duration),
                int(e.correlation),
            ];
            row.extend(e.launch.map(int));
            row.extend([
                int(e.registers),
                mb(e.static_shared),
                mb(e.dynamic_shared),
                mb(e.bytes),
                throughput(e.bytes, e.duration),
                text(e.src_kind),
                text(e.dst_kind),
                // printf('%s (%d)', gpu.name, deviceId): an unknown name prints as empty.
                text(
                    e.device
                        .map(|d| format!("{} ({d})", gpus.get(&d).map_or("", String::as_str))),
                ),
                int(e.context),
                // NULLIF(greenContextId, 0).
                int(e.green_context.filter(|&g| g != 0)),
                int(e.stream),
                text(e.name),
            ]);
            row
        })
        .collect();
    Table {
        name: NAME.to_owned(),
        columns: columns(unit),
        rows,
    }
}
