//! The `nvtx_gpu_proj_sum` recipe (NVIDIA's "NVTX GPU Projection Summary"), as a component of
//! the `recipe` world: how long the GPU worked for each NVTX range.
//!
//! ```text
//!  NVTX ranges (ThreadRanges) ─┐
//!  kernels/memcpys/memsets ⋈ launch calls ─ projection.rs ─> per range: first GPU start,
//!                                                             last GPU end, op count, level
//!      ─> grouped by (range, style) ─> Stats of projected durations + totals and averages
//! ```
//! NVIDIA's documented definition: a GPU operation belongs to every range (start and end on
//! one thread) around the CUDA API call that launched it; a range's projection runs from the
//! start of its first operation to the end of its last; children's time is not subtracted.
//! Ranges that launched nothing have no projection and are not counted. Where NVIDIA's
//! documentation is silent (level, children, rounding, order) docs/recipes.md says what we do.

mod projection;

use std::collections::BTreeMap;

use nsight_recipe_sdk::{
    nvtx::NVTX_TABLE, round_half_away, svg, thread_ranges::ThreadRanges, time_value, time_window,
    Args, Column, ColumnKind, Output, Report, Schema, Stats, Table, TimeUnit, Value, FILTER_ARGS,
    STATS_ARGUMENTS,
};

use crate::projection::{nesting, project, RUNTIME};

nsight_recipe_sdk::recipe_component!(NvtxGpuProjSum);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const NAME: &str = "nvtx_gpu_proj_sum";
/// Ranges drawn in the figure.
const FIGURE_RANGES: usize = 20;

struct NvtxGpuProjSum;

impl Guest for NvtxGpuProjSum {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "nvtx_gpu_proj_sum: describe");
        RecipeInfo {
            name: NAME.into(),
            display_name: "NVTX GPU Projection Summary".into(),
            description: "NVTX ranges projected onto the GPU: for each range, from the start of \
                          the first to the end of the last GPU operation (kernel, memcpy, \
                          memset) launched inside it; per range name and style the total \
                          projected and CPU range time, instances, projected average, median, \
                          min, max and standard deviation, GPU operations, stack level and \
                          children."
                .into(),
            arguments: wit_arguments(STATS_ARGUMENTS.iter()),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, nvtx_gpu_proj_sum)
    }
}

/// The projected ranges of one (range name, style).
#[derive(Default)]
struct Group {
    projected: Vec<i64>,
    range_time: i128,
    ops: u64,
    levels: u64,
    children: u64,
}

fn nvtx_gpu_proj_sum(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let unit = args.time_unit()?;
    let mut out = Output::default();
    let schema = Schema::read(report);
    let strings = schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let nvtx = schema.require(
        &mut out,
        NVTX_TABLE,
        &["start", "end", "eventType", "globalTid"],
        "the profile has no NVTX data",
    );
    let runtime = schema.require(
        &mut out,
        RUNTIME,
        &["start", "end", "correlationId", "globalTid"],
        "the profile has no CUDA API calls",
    );
    let mut groups: BTreeMap<(String, &'static str), Group> = BTreeMap::new();
    if let (Some(nvtx), Some(runtime)) = (nvtx, runtime) {
        if strings {
            let ranges = ThreadRanges::read(&schema, &nvtx, strings)?;
            let has_class = runtime.iter().any(|c| c == "eventClass");
            let projected = project(&schema, &ranges, has_class, &window, &mut out)?;
            let nested = nesting(&ranges);
            for (_, thread) in ranges.threads() {
                for r in thread {
                    let Some(p) = projected.get(&r.id) else {
                        continue;
                    };
                    let Some(label) = ranges.labels.get(r.label) else {
                        continue;
                    };
                    let (level, children) = nested.get(&r.id).copied().unwrap_or((0, 0));
                    let g = groups.entry(label.clone()).or_default();
                    g.projected.push(p.end - p.start);
                    g.range_time += i128::from(r.end - r.start);
                    g.ops += p.ops;
                    g.levels += level;
                    g.children += children;
                }
            }
        }
    }
    let rows = ranked(groups);
    out.figures.extend(figure(&rows, unit));
    out.tables.push(table(rows, unit));
    Ok(out)
}

struct Row {
    range: String,
    style: &'static str,
    stats: Stats,
    range_time: i64,
    ops: u64,
    levels: u64,
    children: u64,
}

/// Rows by Total Proj Time descending, then range name and style.
fn ranked(groups: BTreeMap<(String, &'static str), Group>) -> Vec<Row> {
    let mut rows: Vec<Row> = groups
        .into_iter()
        .filter_map(|((range, style), mut g)| {
            Some(Row {
                range,
                style,
                stats: Stats::of(&mut g.projected)?,
                range_time: i64::try_from(g.range_time).unwrap_or(i64::MAX),
                ops: g.ops,
                levels: g.levels,
                children: g.children,
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        b.stats
            .total
            .cmp(&a.stats.total)
            .then_with(|| a.range.cmp(&b.range))
            .then(a.style.cmp(b.style))
    });
    rows
}

fn table(rows: Vec<Row>, unit: TimeUnit) -> Table {
    let u = unit.suffix();
    let whole = if unit == TimeUnit::Nsec {
        ColumnKind::Int
    } else {
        ColumnKind::Real
    };
    let time = |n: &str, kind| Column::new(format!("{n} ({u})"), kind, Some(u));
    let columns = vec![
        Column::new("Range", ColumnKind::Text, None),
        Column::new("Style", ColumnKind::Text, None),
        time("Total Proj Time", whole),
        time("Total Range Time", whole),
        Column::new("Range Instances", ColumnKind::Int, None),
        time("Proj Avg", ColumnKind::Real),
        time("Proj Med", ColumnKind::Real),
        time("Proj Min", whole),
        time("Proj Max", whole),
        time("Proj StdDev", ColumnKind::Real),
        Column::new("Total GPU Ops", ColumnKind::Int, None),
        Column::new("Avg GPU Ops", ColumnKind::Real, None),
        Column::new("Avg Range Lvl", ColumnKind::Real, None),
        Column::new("Avg Num Child", ColumnKind::Real, None),
    ];
    let frac = |ns: f64| Value::Real(round_half_away(ns, 1) / unit.nanos());
    let int = |n: u64| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
    let rows = rows
        .into_iter()
        .map(|r| {
            let n = r.stats.count as f64;
            let avg = |sum: u64| Value::Real(round_half_away(sum as f64 / n, 1));
            vec![
                Value::Text(r.range),
                Value::Text(r.style.to_owned()),
                time_value(unit, r.stats.total),
                time_value(unit, r.range_time),
                int(r.stats.count),
                frac(r.stats.mean),
                frac(r.stats.median),
                time_value(unit, r.stats.min),
                time_value(unit, r.stats.max),
                frac(r.stats.stddev),
                int(r.ops),
                avg(r.ops),
                avg(r.levels),
                avg(r.children),
            ]
        })
        .collect();
    Table {
        name: NAME.to_owned(),
        columns,
        rows,
    }
}

/// Total projected GPU time of the ranges with the most.
fn figure(rows: &[Row], unit: TimeUnit) -> Option<nsight_recipe_sdk::Figure> {
    if rows.is_empty() {
        return None;
    }
    let bars: Vec<(String, f64)> = rows
        .iter()
        .take(FIGURE_RANGES)
        .map(|r| {
            (
                format!("{} ({})", r.range, r.style),
                r.stats.total as f64 / unit.nanos(),
            )
        })
        .collect();
    Some(svg::bar_chart(
        "nvtx_gpu_proj_sum_total",
        &format!(
            "GPU time projected onto NVTX ranges, {} ranges with the most",
            bars.len()
        ),
        "NVTX range",
        &format!("Total Proj Time ({})", unit.suffix()),
        &bars,
    ))
}
