//! The `cuda_gpu_kern_pace` recipe (CUDA GPU Kernel Pacing), as a component of the `recipe`
//! world: how regularly one kernel, named by `--name`, runs through the application. Each of
//! its instances marks an iteration; the recipe lists them in start order with their
//! duration, the gap since the previous instance ended and the sum of the gaps so far, adds
//! the statistics of durations and gaps, and draws both over the iterations.
//!
//! ```text
//!  StringIds (value = --name) ─ ids ─> CUPTI_ACTIVITY_KIND_KERNEL (demangledName, else shortName)
//!        └─ rows by (start, end, rowid) ─> iterations table ─> stats table + SVG line chart
//! ```
//! This module owns the argument rules and the table shapes; the statistics and rounding are
//! the SDK's (`Stats`, `round_half_away`), the drawing is `chart`'s. It must not read other
//! tables than the kernels and `StringIds`.

mod chart;

use std::collections::BTreeSet;

use nsight_recipe_sdk::{
    round_half_away, string_values, time_value, time_window, Args, Column, ColumnKind, Output,
    Report, Schema, Stats, Table, TimeUnit, Value, FILTER_ARGS, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(KernPace);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const TABLE: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
const NAME: &str = "cuda_gpu_kern_pace";
/// How many kernel names an error about `--name` lists.
const NAMES_SHOWN: usize = 10;

struct KernPace;

impl Guest for KernPace {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "cuda_gpu_kern_pace: describe");
        let own = [(
            "name",
            "Name of the kernel whose instances mark the iterations (required): its demangled \
             name, or its short name when no kernel has that demangled name.",
            None,
        )];
        RecipeInfo {
            name: NAME.into(),
            display_name: "CUDA GPU Kernel Pacing".into(),
            description: "The progress and consistency of one CUDA kernel through the \
                          application: each instance in start order with its duration, the gap \
                          since the previous instance ended and the gaps so far; statistics of \
                          both, and a chart of both over the iterations."
                .into(),
            arguments: wit_arguments(own.iter().chain(&STATS_ARGUMENTS)),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, kern_pace)
    }
}

/// One instance of the kernel.
struct Instance {
    start: i64,
    end: i64,
    pid: Option<i64>,
    device: Option<i64>,
    stream: Option<i64>,
}

fn kern_pace(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["name", "timeunit", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let unit = args.time_unit()?;
    let wanted = args.get("name").map(str::to_owned);
    let mut out = Output::default();
    let schema = Schema::read(report);
    schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let mut instances = Vec::new();
    let columns = schema.require(
        &mut out,
        TABLE,
        &["start", "end", "demangledName"],
        "the profile has no CUDA kernels",
    );
    if let Some(columns) = columns {
        let has = |c: &str| columns.iter().any(|have| have == c);
        let Some(wanted) = wanted.as_deref().filter(|w| !w.is_empty()) else {
            return Err(format!(
                "cuda_gpu_kern_pace needs --name KERNEL (the kernel whose instances mark the \
                 iterations); {}",
                known_names(report)?
            ));
        };
        let ids = name_ids(report, wanted)?;
        let by = ["demangledName", "shortName"]
            .into_iter()
            .filter(|c| has(c))
            .find_map(|c| match count_named(report, c, &ids) {
                Ok(0) => None,
                Ok(_) => Some(Ok(c)),
                Err(e) => Some(Err(e)),
            })
            .transpose()?;
        let Some(by) = by else {
            return Err(format!(
                "no kernel named {wanted:?} in this report (neither a demangled nor a short \
                 name); {}",
                known_names(report)?
            ));
        };
        let mut opt = |c: &str, expr: &str| {
            if has(c) {
                expr.to_owned()
            } else {
                out.note(format!("column {TABLE}.{c} not in this report; left empty"));
                "NULL".to_owned()
            }
        };
        let pid = opt("globalPid", "k.globalPid / 16777216 % 16777216");
        let device = opt("deviceId", "k.deviceId");
        let stream = opt("streamId", "k.streamId");
        let marks = vec!["?"; ids.len()].join(",");
        let params: Vec<Value> = ids.iter().map(|&i| Value::Int(i)).collect();
        let sql = format!(
            "SELECT k.start, k.\"end\", {pid}, {device}, {stream} FROM {TABLE} AS k \
             WHERE k.{by} IN ({marks}) AND k.start IS NOT NULL AND k.\"end\" IS NOT NULL \
             AND {} ORDER BY k.start, k.\"end\", k.rowid",
            window.sql("k")
        );
        report.query(&sql, &params, &mut |row| {
            let int = |i: usize| match row.get(i) {
                Some(Value::Int(v)) => Some(*v),
                _ => None,
            };
            if let (Some(start), Some(end)) = (int(0), int(1)) {
                instances.push(Instance {
                    start,
                    end,
                    pid: int(2),
                    device: int(3),
                    stream: int(4),
                });
            }
            Ok(())
        })?;
        if by == "shortName" {
            out.note(format!(
                "{wanted:?} is a short kernel name (no kernel has that demangled name): every \
                 kernel with that short name counts"
            ));
        }
        if instances.is_empty() {
            out.note(format!(
                "kernel {wanted:?} has no instance inside the time window; nothing to pace"
            ));
        }
    }
    let (durations, gaps) = pace(&instances);
    out.tables
        .push(iterations_table(unit, &instances, &durations, &gaps));
    let mut d: Vec<i64> = durations.clone();
    let mut g: Vec<i64> = gaps.iter().flatten().copied().collect();
    out.tables.push(stats_table(
        unit,
        &[("Duration", Stats::of(&mut d)), ("Gap", Stats::of(&mut g))],
    ));
    if instances.len() > 1 {
        let scale = |v: i64| v as f64 / unit.nanos();
        let u = unit.suffix();
        out.figures.push(chart::line_chart(
            NAME,
            &format!(
                "Pace of {} ({} iterations)",
                shorten(wanted.as_deref().unwrap_or_default()),
                instances.len()
            ),
            "iteration",
            &format!("time ({u})"),
            &[
                ("duration", durations.iter().map(|&v| scale(v)).collect()),
                (
                    "gap since previous end",
                    gaps.iter().map(|g| g.map_or(f64::NAN, scale)).collect(),
                ),
            ],
        ));
    }
    Ok(out)
}

/// `name` cut to 60 characters (with an ellipsis) for the chart's title; template kernel
/// names run to hundreds.
fn shorten(name: &str) -> String {
    const MAX: usize = 60;
    if name.chars().count() <= MAX {
        name.to_owned()
    } else {
        let mut short: String = name.chars().take(MAX - 1).collect();
        short.push('\u{2026}');
        short
    }
}

/// Each instance's duration, and its gap since the previous instance ended (none for the
/// first; negative when the two overlap, on different streams).
fn pace(instances: &[Instance]) -> (Vec<i64>, Vec<Option<i64>>) {
    let durations = instances.iter().map(|i| i.end - i.start).collect();
    let gaps = instances
        .iter()
        .enumerate()
        .map(|(n, i)| {
            n.checked_sub(1)
                .and_then(|p| instances.get(p))
                .map(|prev| i.start - prev.end)
        })
        .collect();
    (durations, gaps)
}

fn time_kind(unit: TimeUnit) -> ColumnKind {
    if unit == TimeUnit::Nsec {
        ColumnKind::Int
    } else {
        ColumnKind::Real
    }
}

fn iterations_table(
    unit: TimeUnit,
    instances: &[Instance],
    durations: &[i64],
    gaps: &[Option<i64>],
) -> Table {
    let u = unit.suffix();
    let kind = time_kind(unit);
    let opt = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
    let mut accum = 0i64;
    let rows = instances
        .iter()
        .zip(durations)
        .zip(gaps)
        .enumerate()
        .map(|(n, ((i, &d), &g))| {
            accum = accum.saturating_add(g.unwrap_or(0));
            vec![
                Value::Int(i64::try_from(n).unwrap_or(i64::MAX)),
                time_value(unit, i.start),
                time_value(unit, i.end),
                time_value(unit, d),
                g.map_or(Value::Null, |g| time_value(unit, g)),
                time_value(unit, accum),
                opt(i.pid),
                opt(i.device),
                opt(i.stream),
            ]
        })
        .collect();
    let time = |name: &str| Column::new(format!("{name} ({u})"), kind, Some(u));
    Table {
        name: NAME.into(),
        columns: vec![
            Column::new("Iteration", ColumnKind::Int, None),
            time("Start"),
            time("End"),
            time("Duration"),
            time("Gap"),
            time("Gap Accum"),
            Column::new("PID", ColumnKind::Int, None),
            Column::new("Device", ColumnKind::Int, None),
            Column::new("Stream", ColumnKind::Int, None),
        ],
        rows,
    }
}

/// Count, Avg, Med, Min, Max, StdDev of durations and gaps, rounded as the summaries (one
/// decimal in ns, then divided for another unit).
fn stats_table(unit: TimeUnit, stats: &[(&str, Option<Stats>)]) -> Table {
    let u = unit.suffix();
    let kind = time_kind(unit);
    let real = |x: f64| Value::Real(round_half_away(x, 1) / unit.nanos());
    let rows = stats
        .iter()
        .filter_map(|(what, s)| s.map(|s| (what, s)))
        .map(|(what, s)| {
            vec![
                Value::Text((*what).to_owned()),
                Value::Int(i64::try_from(s.count).unwrap_or(i64::MAX)),
                real(s.mean),
                real(s.median),
                time_value(unit, s.min),
                time_value(unit, s.max),
                real(s.stddev),
            ]
        })
        .collect();
    let time = |name: &str, kind| Column::new(format!("{name} ({u})"), kind, Some(u));
    Table {
        name: format!("{NAME}_stats"),
        columns: vec![
            Column::new("Measure", ColumnKind::Text, None),
            Column::new("Count", ColumnKind::Int, None),
            time("Avg", ColumnKind::Real),
            time("Med", ColumnKind::Real),
            time("Min", kind),
            time("Max", kind),
            time("StdDev", ColumnKind::Real),
        ],
        rows,
    }
}

/// The `StringIds` ids whose value is `name`.
fn name_ids(report: &dyn Report, name: &str) -> Result<BTreeSet<i64>, String> {
    let mut ids = BTreeSet::new();
    report.query(
        "SELECT id FROM StringIds WHERE value = ?",
        &[Value::Text(name.to_owned())],
        &mut |row| {
            if let Some(Value::Int(id)) = row.first() {
                ids.insert(*id);
            }
            Ok(())
        },
    )?;
    Ok(ids)
}

/// How many kernels have `column` among `ids`.
fn count_named(report: &dyn Report, column: &str, ids: &BTreeSet<i64>) -> Result<i64, String> {
    if ids.is_empty() {
        return Ok(0);
    }
    let marks = vec!["?"; ids.len()].join(",");
    let params: Vec<Value> = ids.iter().map(|&i| Value::Int(i)).collect();
    let mut n = 0;
    report.query(
        &format!("SELECT count(*) FROM {TABLE} WHERE {column} IN ({marks})"),
        &params,
        &mut |row| {
            if let Some(Value::Int(c)) = row.first() {
                n = *c;
            }
            Ok(())
        },
    )?;
    Ok(n)
}

/// "the report's kernels, most instances first: a (12), b (3), ... and N more" (demangled
/// names), for errors about `--name`.
fn known_names(report: &dyn Report) -> Result<String, String> {
    let mut counts: Vec<(i64, i64)> = Vec::new();
    report.query(
        &format!(
            "SELECT demangledName, count(*) FROM {TABLE} WHERE demangledName IS NOT NULL \
             GROUP BY demangledName ORDER BY 2 DESC, 1"
        ),
        &[],
        &mut |row| {
            if let [Value::Int(id), Value::Int(n)] = row {
                counts.push((*id, *n));
            }
            Ok(())
        },
    )?;
    if counts.is_empty() {
        return Ok("the report has no named kernels".to_owned());
    }
    let shown: BTreeSet<i64> = counts.iter().take(NAMES_SHOWN).map(|c| c.0).collect();
    let names = string_values(report, &shown)?;
    let mut list: Vec<String> = counts
        .iter()
        .take(NAMES_SHOWN)
        .map(|(id, n)| {
            let name = names.get(id).map_or("?", String::as_str);
            format!("{name:?} ({n})")
        })
        .collect();
    if counts.len() > NAMES_SHOWN {
        list.push(format!("and {} more", counts.len() - NAMES_SHOWN));
    }
    Ok(format!(
        "the report's kernels, most instances first: {}",
        list.join(", ")
    ))
}
