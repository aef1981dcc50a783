//! The `nccl_gpu_time_util_map` recipe (NCCL GPU Time Utilization Heatmap), as a component of
//! the `recipe` world.
//!
//! ```text
//!  CUPTI_ACTIVITY_KIND_KERNEL ─ (PID, device, start, end, short name id) ─ StringIds
//!        └─ nccl:: is_nccl_kernel ─> Kernel ─ nccl::time_util_map(--bins) ─> UtilBin
//!              └─> table (All/NCCL/Compute/Overlap % per bin) + one heat map per kind
//! ```
//! NVIDIA's documented definition: "the percentage of time that communication and compute
//! kernels were running, as well as their overlap. Communication kernels are identified by
//! the 'nccl' prefix." The binning rule is ours (docs/recipes.md). A report without NCCL
//! kernels gives a note and an empty table, as NVIDIA's recipe skips such a report.

use std::collections::BTreeSet;

use nsight_recipe_sdk::{
    count_arg,
    nccl::{is_nccl_kernel, time_util_map, Kernel, UtilBin},
    nvtx::pid,
    round_half_away, string_values,
    svg::heat_map,
    time_value, time_window, Args, Column, ColumnKind, Output, Report, Schema, Table, Value,
    FILTER_ARGS, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(NcclTimeUtilMap);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const NAME: &str = "nccl_gpu_time_util_map";
const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
/// At most this many (process, device) rows in a heat map.
const MAX_ROWS: usize = 64;

struct NcclTimeUtilMap;

impl Guest for NcclTimeUtilMap {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "nccl_gpu_time_util_map: describe");
        let own = [(
            "bins",
            "Number of equal time bins the report's kernel span is split into (1-10000).",
            Some("30"),
        )];
        RecipeInfo {
            name: NAME.into(),
            display_name: "NCCL GPU Time Utilization Heatmap".into(),
            description: "The percentage of each time bin in which communication (NCCL) and \
                          compute kernels were running on each process's GPU, and their \
                          overlap, as a heat map. Communication kernels are those whose name \
                          starts with 'nccl'."
                .into(),
            arguments: wit_arguments(own.iter().chain(&STATS_ARGUMENTS)),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, nccl_gpu_time_util_map)
    }
}

fn nccl_gpu_time_util_map(
    report: &dyn Report,
    args: &[(String, String)],
) -> Result<Output, String> {
    let args = Args::parse(args, &["bins", "timeunit", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let bins = count_arg(&args, "bins", 30, 1, 10_000)?;
    let unit = args.time_unit()?;
    let mut out = Output::default();
    let schema = Schema::read(report);
    let strings = schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let kernels = match schema.require(
        &mut out,
        KERNEL,
        &["start", "end", "deviceId", "globalPid", "demangledName"],
        "the profile has no CUDA kernels",
    ) {
        Some(columns) if strings => read_kernels(&schema, &columns, &window, &mut out)?,
        _ => Vec::new(),
    };
    let nccl = kernels.iter().filter(|k| k.nccl).count();
    let map = if nccl == 0 {
        out.note(format!(
            "no NCCL kernels (names starting with 'nccl') among the {} kernels read; nothing \
             to map",
            kernels.len()
        ));
        Vec::new()
    } else {
        out.note(format!(
            "{nccl} of {} kernels are NCCL (communication) kernels; the span from the first \
             kernel's start to the last kernel's end is cut into {bins} bins",
            kernels.len()
        ));
        time_util_map(&kernels, bins)
    };
    figures(&map, &mut out);
    out.tables.push(table(&map, unit));
    Ok(out)
}

/// The kernels inside the window, classified by short name (demangled name in exports without
/// short names).
fn read_kernels(
    schema: &Schema<'_>,
    columns: &[String],
    window: &nsight_recipe_sdk::Window,
    out: &mut Output,
) -> Result<Vec<Kernel>, String> {
    let name = if columns.iter().any(|c| c == "shortName") {
        "coalesce(k.shortName, k.demangledName)"
    } else {
        out.note(nsight_recipe_sdk::kernel_name_missing_note("shortName"));
        "k.demangledName"
    };
    let sql = format!(
        "SELECT k.globalPid, k.deviceId, k.start, k.\"end\", {name} FROM {KERNEL} AS k WHERE {}",
        window.sql("k")
    );
    let mut rows: Vec<(i64, i64, i64, i64, Option<i64>)> = Vec::new();
    let mut incomplete = 0u64;
    schema.report().query(&sql, &[], &mut |row| {
        match row {
            [Value::Int(g), Value::Int(d), Value::Int(s), Value::Int(e), n] => {
                rows.push((pid(*g), *d, *s, *e, n.as_int()));
            }
            _ => incomplete += 1,
        }
        Ok(())
    })?;
    if incomplete > 0 {
        out.note(format!(
            "{incomplete} rows of {KERNEL} have no start, end, deviceId or globalPid and are \
             left out"
        ));
    }
    let ids: BTreeSet<i64> = rows.iter().filter_map(|r| r.4).collect();
    let names = string_values(schema.report(), &ids)?;
    Ok(rows
        .into_iter()
        .map(|(pid, device, start, end, id)| Kernel {
            pid,
            device,
            start,
            end,
            nccl: id
                .and_then(|id| names.get(&id))
                .is_some_and(|n| is_nccl_kernel(n)),
        })
        .collect())
}

/// One kind of the map: column header, figure suffix, the bin's covered nanoseconds.
type Kind = (&'static str, &'static str, fn(&UtilBin) -> i64);

/// The four kinds of the map.
const KINDS: [Kind; 4] = [
    ("All", "all", |b| b.all),
    ("NCCL", "nccl", |b| b.nccl),
    ("Compute", "compute", |b| b.compute),
    ("Overlap", "overlap", |b| b.overlap),
];

fn percent(b: &UtilBin, ns: i64) -> f64 {
    round_half_away(b.percent(ns), 1)
}

fn table(map: &[UtilBin], unit: nsight_recipe_sdk::TimeUnit) -> Table {
    let u = unit.suffix();
    let time_kind = if u == "ns" {
        ColumnKind::Int
    } else {
        ColumnKind::Real
    };
    let time = |name: &str| Column::new(format!("{name} ({u})"), time_kind, Some(u));
    let mut columns = vec![
        Column::new("PID", ColumnKind::Int, None),
        Column::new("Device ID", ColumnKind::Int, None),
        Column::new("Bin", ColumnKind::Int, None),
        time("Start"),
        time("End"),
    ];
    columns.extend(
        KINDS
            .iter()
            .map(|(h, _, _)| Column::new(format!("{h} (%)"), ColumnKind::Real, Some("%"))),
    );
    Table {
        name: NAME.into(),
        columns,
        rows: map
            .iter()
            .map(|b| {
                let mut row = vec![
                    Value::Int(b.pid),
                    Value::Int(b.device),
                    Value::Int(i64::from(b.index)),
                    time_value(unit, b.start),
                    time_value(unit, b.end),
                ];
                row.extend(KINDS.iter().map(|(_, _, v)| Value::Real(percent(b, v(b)))));
                row
            })
            .collect(),
    }
}

/// One heat map per kind: a row per (process, device), a cell per bin.
fn figures(map: &[UtilBin], out: &mut Output) {
    let (Some(first), Some(last)) = (map.first(), map.iter().map(|b| b.end).max()) else {
        return;
    };
    let groups: Vec<&[UtilBin]> = map
        .chunk_by(|a, b| (a.pid, a.device) == (b.pid, b.device))
        .take(MAX_ROWS)
        .collect();
    let (from, to) = (format!("{} ns", first.start), format!("{last} ns"));
    for (header, suffix, value) in KINDS {
        let rows: Vec<(String, Vec<f64>)> = groups
            .iter()
            .map(|g| {
                (
                    format!("PID {} device {}", g[0].pid, g[0].device),
                    g.iter().map(|b| percent(b, value(b))).collect(),
                )
            })
            .collect();
        // Shaded up to the largest value of this kind (at least 1 %), so that a kind that
        // keeps the GPUs busy a few percent of the time still shows its pattern.
        let top = rows
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .fold(1.0f64, f64::max);
        out.figures.push(heat_map(
            &format!("{NAME}_{suffix}"),
            &format!("{header} kernels: GPU time in use (%) per time bin"),
            ("time bins (report clock)", &from, &to),
            &rows,
            top,
        ));
    }
}
