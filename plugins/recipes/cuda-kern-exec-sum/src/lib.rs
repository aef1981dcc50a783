//! The `cuda_kern_exec_sum` recipe (CUDA kernel launch and execution time summary, NVIDIA's
//! `cuda_kern_exec_sum` stats report), as a component of the `recipe` world.
//!
//! ```text
//!  KERNEL ⋈ RUNTIME (correlationId, process) ──launches──> (PID, TID, device, API, kernel)
//!       -> total / API / queue / kernel durations ──Stats──> one row per group, TAvg descending
//! ```
//! Per group: Count, QCount (launches whose kernel started at or after the call's end), then
//! Avg, Med, Min, Max and StdDev of the total time (call start to the later of the call's and
//! the kernel's end), the API time (the call), the queue time (call end to kernel start, only
//! where that is 0 or more; NULL when no launch has one) and the kernel time. Rounding as the
//! summaries (docs/recipes.md).

mod launches;

use nsight_recipe_sdk::{
    round_half_away, svg, time_value, time_window, Args, Column, ColumnKind, KernelName, Output,
    Report, Schema, Stats, Table, TimeUnit, Value, FILTER_ARGS, KERNEL_NAME_ARGUMENT,
    STATS_ARGUMENTS,
};

use crate::launches::{read_launches, LaunchKey, Phases, KERNEL, RUNTIME};

nsight_recipe_sdk::recipe_component!(KernExecSum);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const NAME: &str = "cuda_kern_exec_sum";
/// Rows drawn in the figure, longest TAvg first.
const FIGURE_ROWS: usize = 20;

struct KernExecSum;

impl Guest for KernExecSum {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "cuda_kern_exec_sum: describe");
        RecipeInfo {
            name: NAME.into(),
            display_name: "CUDA Kernel Launch & Exec Time Summary".into(),
            description: "Launch and execution of CUDA kernels per process, thread, device, API \
                          call and kernel: the time of the launching API call, the queue time \
                          from the call's end to the kernel's start, the kernel's time and the \
                          total, each as average, median, min, max and standard deviation, \
                          sorted by average total time."
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
        wit_run(args, kern_exec_sum)
    }
}

fn kern_exec_sum(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit", "name", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let unit = args.time_unit()?;
    let kernel_name = KernelName::parse(&args)?;
    let mut out = Output::default();
    let schema = Schema::read(report);
    let strings = schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let launch_columns = ["start", "end", "correlationId"];
    let kernel = schema.require(
        &mut out,
        KERNEL,
        &[
            &launch_columns[..],
            &["deviceId", "globalPid", "demangledName"],
        ]
        .concat(),
        "the profile has no CUDA kernels",
    );
    let runtime = schema.require(
        &mut out,
        RUNTIME,
        &[&launch_columns[..], &["globalTid", "nameId"]].concat(),
        "the profile has no CUDA API calls",
    );
    let groups = match (kernel, runtime) {
        (Some(kernel), Some(runtime)) if strings => {
            let column = kernel_name.column_in(&kernel, &mut out);
            let has_class = runtime.iter().any(|c| c == "eventClass");
            read_launches(report, column, has_class, &window, &mut out)?
        }
        _ => Default::default(),
    };
    let rows = ranked(groups);
    out.figures.extend(figure(&rows, unit));
    out.tables.push(table(rows, unit));
    Ok(out)
}

/// The statistics of one group's four phases.
struct Row {
    key: LaunchKey,
    count: usize,
    queued: usize,
    total: Stats,
    api: Stats,
    queue: Option<Stats>,
    kernel: Stats,
}

/// One row per group with launches, by rounded TAvg descending, then PID, TID, device, API
/// name and kernel name (NVIDIA's `ORDER BY 6 DESC` over rows grouped in that order).
fn ranked(groups: impl IntoIterator<Item = (LaunchKey, Phases)>) -> Vec<Row> {
    let mut rows: Vec<Row> = groups
        .into_iter()
        .filter_map(|(key, mut p)| {
            Some(Row {
                count: p.total.len(),
                queued: p.queue.len(),
                total: Stats::of(&mut p.total)?,
                api: Stats::of(&mut p.api)?,
                queue: Stats::of(&mut p.queue),
                kernel: Stats::of(&mut p.kernel)?,
                key,
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        round_half_away(b.total.mean, 1)
            .total_cmp(&round_half_away(a.total.mean, 1))
            .then_with(|| a.key.cmp(&b.key))
    });
    rows
}

fn columns(unit: TimeUnit) -> Vec<Column> {
    let u = unit.suffix();
    let whole = if unit == TimeUnit::Nsec {
        ColumnKind::Int
    } else {
        ColumnKind::Real
    };
    let mut columns = vec![
        Column::new("PID", ColumnKind::Int, None),
        Column::new("TID", ColumnKind::Int, None),
        Column::new("DevId", ColumnKind::Int, None),
        Column::new("Count", ColumnKind::Int, None),
        Column::new("QCount", ColumnKind::Int, None),
    ];
    for phase in ["T", "A", "Q", "K"] {
        for (stat, kind) in [
            ("Avg", ColumnKind::Real),
            ("Med", ColumnKind::Real),
            ("Min", whole),
            ("Max", whole),
            ("StdDev", ColumnKind::Real),
        ] {
            columns.push(Column::new(format!("{phase}{stat} ({u})"), kind, Some(u)));
        }
    }
    columns.push(Column::new("API Name", ColumnKind::Text, None));
    columns.push(Column::new("Kernel Name", ColumnKind::Text, None));
    columns
}

/// Avg, Med, Min, Max, StdDev in `unit` (Avg, Med, StdDev rounded to one decimal in ns first);
/// NULLs without statistics.
fn stat_values(stats: Option<&Stats>, unit: TimeUnit) -> [Value; 5] {
    let Some(s) = stats else {
        return [
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
        ];
    };
    let frac = |ns: f64| Value::Real(round_half_away(ns, 1) / unit.nanos());
    [
        frac(s.mean),
        frac(s.median),
        time_value(unit, s.min),
        time_value(unit, s.max),
        frac(s.stddev),
    ]
}

fn table(rows: Vec<Row>, unit: TimeUnit) -> Table {
    let count = |n: usize| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
    let rows = rows
        .into_iter()
        .map(|r| {
            let mut row = vec![
                Value::Int(r.key.pid),
                Value::Int(r.key.tid),
                Value::Int(r.key.device),
                count(r.count),
                count(r.queued),
            ];
            for stats in [
                Some(&r.total),
                Some(&r.api),
                r.queue.as_ref(),
                Some(&r.kernel),
            ] {
                row.extend(stat_values(stats, unit));
            }
            row.push(Value::Text(r.key.api));
            row.push(Value::Text(r.key.kernel));
            row
        })
        .collect();
    Table {
        name: NAME.to_owned(),
        columns: columns(unit),
        rows,
    }
}

/// Average total launch time of the longest groups, as a bar chart.
fn figure(rows: &[Row], unit: TimeUnit) -> Option<nsight_recipe_sdk::Figure> {
    if rows.is_empty() {
        return None;
    }
    let bars: Vec<(String, f64)> = rows
        .iter()
        .take(FIGURE_ROWS)
        .map(|r| {
            (
                format!(
                    "{} via {} (PID {}, TID {}, device {})",
                    r.key.kernel, r.key.api, r.key.pid, r.key.tid, r.key.device
                ),
                r.total.mean / unit.nanos(),
            )
        })
        .collect();
    Some(svg::bar_chart(
        "cuda_kern_exec_sum_tavg",
        &format!(
            "Average launch-to-end time, {} longest of {} groups",
            bars.len(),
            rows.len()
        ),
        "group (by average total time)",
        &format!("TAvg ({})", unit.suffix()),
        &bars,
    ))
}
