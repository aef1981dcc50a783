//! The `nvtx_kern_sum` recipe (NVTX range kernel summary, NVIDIA's `nvtx_kern_sum` stats
//! report), as a component of the `recipe` world: what the GPU ran inside each NVTX range.
//!
//! ```text
//!  KERNEL ⟕ RUNTIME (correlationId, process) ──launch call──> ThreadRanges::containing
//!     (every NVTX range on the call's thread around the call) ──> (range, kernel) pairs
//!     ──> groups by (PID, TID, range, style, kernel) ──> Stats of the kernel durations
//! ```
//! A kernel counts in every range around the CUDA API call that launched it (a stack of
//! push/pop ranges: all of them), even when it runs past the range's end. Kernels without a
//! launch call or without a range around it are listed too, with an empty range (and, without
//! a call, an empty PID and TID), as NVIDIA's LEFT JOINs give them. Rounding as the summaries.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use nsight_recipe_sdk::{
    round_half_away, string_values, svg, time_value, time_window, Args, Column, ColumnKind,
    KernelName, Output, Report, Schema, Stats, Table, TimeUnit, Value, Window, FILTER_ARGS,
    KERNEL_NAME_ARGUMENT, STATS_ARGUMENTS,
};

use nsight_recipe_sdk::thread_ranges::ThreadRanges;

nsight_recipe_sdk::recipe_component!(NvtxKernSum);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const NAME: &str = "nvtx_kern_sum";
const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
const RUNTIME: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";
const NVTX: &str = "NVTX_EVENTS";
/// Ranges drawn in the figure, most kernel time first.
const FIGURE_RANGES: usize = 20;

struct NvtxKernSum;

impl Guest for NvtxKernSum {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "nvtx_kern_sum: describe");
        RecipeInfo {
            name: NAME.into(),
            display_name: "NVTX Range Kernel Summary".into(),
            description: "The CUDA kernels launched inside each NVTX range, per range, process, \
                          thread and kernel name: how many range and kernel instances, and the \
                          kernels' total, average, median, min, max and standard deviation. A \
                          kernel counts in every range around its launch call."
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
        wit_run(args, nvtx_kern_sum)
    }
}

/// What identifies a row: PID, TID (None without a launch call), range label (None without an
/// enclosing range), kernel name.
type Key = (Option<i64>, Option<i64>, Option<usize>, String);
/// [`Key`] before names are looked up: the kernel name id instead of the name.
type IdKey = (Option<i64>, Option<i64>, Option<usize>, Option<i64>);

/// The pairs of one row.
#[derive(Default)]
struct Pairs {
    ranges: HashSet<i64>,
    kernels: HashSet<i64>,
    durations: Vec<i64>,
}

fn nvtx_kern_sum(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit", "name", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let unit = args.time_unit()?;
    let kernel_name = KernelName::parse(&args)?;
    let mut out = Output::default();
    let schema = Schema::read(report);
    let strings = schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let nvtx = schema.require(
        &mut out,
        NVTX,
        &["start", "end", "eventType", "globalTid"],
        "the profile has no NVTX data",
    );
    let kernel = schema.require(
        &mut out,
        KERNEL,
        &[
            "start",
            "end",
            "correlationId",
            "globalPid",
            "demangledName",
        ],
        "the profile has no CUDA kernels",
    );
    let runtime = schema.require(
        &mut out,
        RUNTIME,
        &["start", "end", "correlationId", "globalTid"],
        "the profile has no CUDA API calls",
    );
    let (rows, labels) = match (nvtx, kernel, runtime) {
        (Some(nvtx), Some(kernel), Some(runtime)) if strings => {
            let column = kernel_name.column_in(&kernel, &mut out);
            let ranges = ThreadRanges::read(&schema, &nvtx, strings)?;
            let has_class = runtime.iter().any(|c| c == "eventClass");
            let pairs = pairs(report, &ranges, column, has_class, &window, &mut out)?;
            (pairs, ranges.labels)
        }
        _ => (BTreeMap::new(), Vec::new()),
    };
    let rows = ranked(rows, &labels);
    out.figures.extend(figure(&rows, unit));
    out.tables.push(table(rows, unit));
    Ok(out)
}

/// Every kernel inside `window` with each range around its launch call, grouped by [`Key`].
fn pairs(
    report: &dyn Report,
    ranges: &ThreadRanges,
    name_column: &str,
    has_class: bool,
    window: &Window,
    out: &mut Output,
) -> Result<BTreeMap<Key, Pairs>, String> {
    // Backtrace rows (event class 67, older exports) are copies of calls, not launches.
    let not_backtrace = if has_class {
        "AND r.eventClass IS NOT 67"
    } else {
        ""
    };
    let sql = format!(
        "SELECT k.rowid, k.\"end\" - k.start, coalesce(k.{name_column}, k.demangledName), \
         r.globalTid, r.start, r.\"end\" \
         FROM {KERNEL} AS k LEFT JOIN {RUNTIME} AS r \
           ON k.correlationId = r.correlationId \
          AND k.globalPid = (r.globalTid & -16777216) {not_backtrace} \
         WHERE {}",
        window.sql("k")
    );
    // Grouped by kernel name id first; names are looked up once per id at the end.
    let mut by_id: BTreeMap<IdKey, Pairs> = BTreeMap::new();
    let mut incomplete = 0u64;
    report.query(&sql, &[], &mut |row| {
        let int = |i: usize| row.get(i).and_then(Value::as_int);
        let (Some(kernel), Some(duration)) = (int(0), int(1)) else {
            incomplete += 1;
            return Ok(());
        };
        let name = int(2);
        let call = match (int(3), int(4), int(5)) {
            (Some(tid), Some(start), Some(end)) => Some((tid, start, end)),
            _ => None,
        };
        let mut add = |key, range: Option<i64>| {
            let p: &mut Pairs = by_id.entry(key).or_default();
            p.ranges.extend(range);
            p.kernels.insert(kernel);
            p.durations.push(duration);
        };
        let Some((tid, start, end)) = call else {
            add((None, None, None, name), None);
            return Ok(());
        };
        let (pid, thread) = (Some(tid / 0x100_0000 % 0x100_0000), Some(tid % 0x100_0000));
        let mut any = false;
        for range in ranges.containing(tid, start, end) {
            any = true;
            add((pid, thread, Some(range.label), name), Some(range.id));
        }
        if !any {
            add((pid, thread, None, name), None);
        }
        Ok(())
    })?;
    if incomplete > 0 {
        out.note(format!(
            "{incomplete} kernels have no start or end and are left out"
        ));
    }
    let ids: BTreeSet<i64> = by_id.keys().filter_map(|k| k.3).collect();
    let names = string_values(report, &ids)?;
    let mut grouped: BTreeMap<Key, Pairs> = BTreeMap::new();
    for ((pid, tid, label, name), p) in by_id {
        let name = name
            .and_then(|i| names.get(&i))
            .cloned()
            .unwrap_or_default();
        let into = grouped.entry((pid, tid, label, name)).or_default();
        into.ranges.extend(p.ranges);
        into.kernels.extend(p.kernels);
        into.durations.extend(p.durations);
    }
    Ok(grouped)
}

/// One output row before formatting.
struct Row {
    range: Option<(String, &'static str)>,
    pid: Option<i64>,
    tid: Option<i64>,
    range_instances: usize,
    kernel_instances: usize,
    stats: Stats,
    kernel: String,
}

/// Rows by range name (none first), PID, TID (none first), total descending (NVIDIA's
/// `ORDER BY 1, 3, 4, 7 DESC`), then style and kernel name.
fn ranked(groups: BTreeMap<Key, Pairs>, labels: &[(String, &'static str)]) -> Vec<Row> {
    let mut rows: Vec<Row> = groups
        .into_iter()
        .filter_map(|((pid, tid, label, kernel), mut p)| {
            Some(Row {
                range: label.and_then(|l| labels.get(l)).cloned(),
                pid,
                tid,
                range_instances: p.ranges.len(),
                kernel_instances: p.kernels.len(),
                stats: Stats::of(&mut p.durations)?,
                kernel,
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        let name = |r: &Row| r.range.as_ref().map(|(n, _)| n.clone());
        let style = |r: &Row| r.range.as_ref().map(|(_, s)| *s);
        name(a)
            .cmp(&name(b))
            .then(a.pid.cmp(&b.pid))
            .then(a.tid.cmp(&b.tid))
            .then(b.stats.total.cmp(&a.stats.total))
            .then(style(a).cmp(&style(b)))
            .then_with(|| a.kernel.cmp(&b.kernel))
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
        Column::new("NVTX Range", ColumnKind::Text, None),
        Column::new("Style", ColumnKind::Text, None),
        Column::new("PID", ColumnKind::Int, None),
        Column::new("TID", ColumnKind::Int, None),
        Column::new("NVTX Inst", ColumnKind::Int, None),
        Column::new("Kern Inst", ColumnKind::Int, None),
        time("Total Time", whole),
        time("Avg", ColumnKind::Real),
        time("Med", ColumnKind::Real),
        time("Min", whole),
        time("Max", whole),
        time("StdDev", ColumnKind::Real),
        Column::new("Kernel Name", ColumnKind::Text, None),
    ];
    let count = |n: usize| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
    let opt = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
    let frac = |ns: f64| Value::Real(round_half_away(ns, 1) / unit.nanos());
    let rows = rows
        .into_iter()
        .map(|r| {
            let (range, style) = match r.range {
                Some((n, s)) => (Value::Text(n), Value::Text(s.to_owned())),
                None => (Value::Null, Value::Null),
            };
            vec![
                range,
                style,
                opt(r.pid),
                opt(r.tid),
                count(r.range_instances),
                count(r.kernel_instances),
                time_value(unit, r.stats.total),
                frac(r.stats.mean),
                frac(r.stats.median),
                time_value(unit, r.stats.min),
                time_value(unit, r.stats.max),
                frac(r.stats.stddev),
                Value::Text(r.kernel),
            ]
        })
        .collect();
    Table {
        name: NAME.to_owned(),
        columns,
        rows,
    }
}

/// Kernel time per NVTX range name (summed over processes, threads and kernels), most first.
fn figure(rows: &[Row], unit: TimeUnit) -> Option<nsight_recipe_sdk::Figure> {
    let mut per_range: BTreeMap<&str, i128> = BTreeMap::new();
    for r in rows {
        if let Some((name, _)) = &r.range {
            *per_range.entry(name).or_default() += i128::from(r.stats.total);
        }
    }
    if per_range.is_empty() {
        return None;
    }
    let mut bars: Vec<(&str, i128)> = per_range.into_iter().collect();
    bars.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let shown = bars.len().min(FIGURE_RANGES);
    let bars: Vec<(String, f64)> = bars
        .into_iter()
        .take(FIGURE_RANGES)
        .map(|(name, total)| (name.to_owned(), total as f64 / unit.nanos()))
        .collect();
    Some(svg::bar_chart(
        "nvtx_kern_sum_ranges",
        &format!("Kernel time inside NVTX ranges ({shown} ranges with the most)"),
        "NVTX range",
        &format!("kernel time ({})", unit.suffix()),
        &bars,
    ))
}
