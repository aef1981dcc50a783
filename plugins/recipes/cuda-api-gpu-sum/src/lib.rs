//! The `cuda_api_gpu_sum` recipe (NVIDIA's "CUDA Summary (API/Kernels/MemOps)"), as a component
//! of the `recipe` world: CUDA API calls, kernels and memory operations in one summary, so their
//! times compare on one scale.
//!
//! ```text
//!  RUNTIME (calls, name without version suffix)  -> CUDA_API    ─┐
//!  KERNEL  (name as --name picks it)             -> CUDA_KERNEL ─┼─ (category, name) -> summary
//!  MEMCPY / MEMSET (memops names)                -> MEMORY_OPER ─┘
//! ```
//! Statistics, rounding and Time (%) as every summary (docs/recipes.md); Time (%) is a share of
//! all the rows listed, calls and GPU work together. A bar chart puts the 20 largest totals of
//! the three categories side by side.

use std::collections::{BTreeMap, BTreeSet};

use nsight_recipe_sdk::{
    memops::memory_operations, string_values, strip_api_version, summary_table, svg, time_window,
    Args, Figure, Group, Output, Report, Schema, SummarySpec, Ties, TimeUnit, Value, Window,
    FILTER_ARGS, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(CudaApiGpuSum);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const NAME: &str = "cuda_api_gpu_sum";
const RUNTIME: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";
const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
/// Event class of CUDA backtrace rows (older exports): copies of calls, not calls.
const BACKTRACE_CLASS: i64 = 67;
/// At most this many bars in the figure.
const FIGURE_BARS: usize = 20;

struct CudaApiGpuSum;

impl Guest for CudaApiGpuSum {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "cuda_api_gpu_sum: describe");
        RecipeInfo {
            name: NAME.into(),
            display_name: "CUDA Summary (API/Kernels/MemOps)".into(),
            description: "CUDA API calls, GPU kernels and GPU memory operations in one summary: \
                          per category and name the count, total, average, median, min, max \
                          and standard deviation, and each one's share of the total, sorted by \
                          total time."
                .into(),
            arguments: wit_arguments(
                STATS_ARGUMENTS
                    .iter()
                    .take(1)
                    .chain(&[(
                        "name",
                        "Kernel names: demangled (full signature), base (short name) or mangled.",
                        Some("demangled"),
                    )])
                    .chain(&STATS_ARGUMENTS[1..]),
            ),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, api_gpu_sum)
    }
}

/// Durations by (category, name).
type Groups = BTreeMap<(&'static str, String), Vec<i64>>;

fn api_gpu_sum(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit", "name", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let name = args.get("name").unwrap_or("demangled");
    let name_column = match name {
        "demangled" => "demangledName",
        "base" => "shortName",
        "mangled" => "mangledName",
        _ => {
            return Err(format!(
                "--name {name}: expected demangled, base or mangled"
            ))
        }
    };
    let spec = SummarySpec {
        table: NAME,
        count_header: "Instances",
        labels: &["Category", "Operation"],
        // NVIDIA's ORDER BY total only, over rows grouped by name: ties by name.
        tie_order: &[1, 0],
        ties: Ties::Labels,
        unit: args.time_unit()?,
    };
    let mut out = Output::default();
    let schema = Schema::read(report);
    let strings = schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let mut groups = Groups::new();
    if strings {
        if let Some(columns) = schema.require(
            &mut out,
            RUNTIME,
            &["start", "end", "nameId"],
            "no CUDA API calls are listed",
        ) {
            api_calls(report, &columns, &window, &mut groups, &mut out)?;
        }
        if let Some(columns) = schema.require(
            &mut out,
            KERNEL,
            &["start", "end", "demangledName"],
            "no kernels are listed",
        ) {
            let column = if columns.iter().any(|c| c == name_column) {
                name_column
            } else {
                out.note(format!(
                    "column {KERNEL}.{name_column} not in this report (older export); kernels \
                     are named by their demangled names"
                ));
                "demangledName"
            };
            kernels(report, column, &window, &mut groups)?;
        }
        if let Some(ops) = memory_operations(&schema, &window, &mut out)? {
            for (name, ops) in ops {
                groups
                    .entry(("MEMORY_OPER", name))
                    .or_default()
                    .extend(ops.durations);
            }
        }
    }
    out.figures.extend(figure(&groups, spec.unit));
    let groups: Vec<Group> = groups
        .into_iter()
        .map(|((category, name), durations)| Group {
            labels: vec![category.to_owned(), name],
            id: 0,
            durations,
        })
        .collect();
    out.tables.push(summary_table(&spec, groups));
    Ok(out)
}

/// The largest total times, API calls and GPU work on one scale: `<category>: <name>`, largest
/// first (ties by category and name); none without rows.
fn figure(groups: &Groups, unit: TimeUnit) -> Option<Figure> {
    if groups.is_empty() {
        return None;
    }
    let mut totals: Vec<(String, i64)> = groups
        .iter()
        .map(|((category, name), durations)| {
            (format!("{category}: {name}"), durations.iter().sum())
        })
        .collect();
    totals.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let bars: Vec<(String, f64)> = totals
        .iter()
        .take(FIGURE_BARS)
        .map(|(label, total)| (label.clone(), *total as f64 / unit.nanos()))
        .collect();
    Some(svg::bar_chart(
        "cuda_api_gpu_sum_total",
        &format!(
            "Total time, the {} largest of {} API calls, kernels and memory operations",
            bars.len(),
            totals.len()
        ),
        "category: operation",
        &format!("Total time ({})", unit.suffix()),
        &bars,
    ))
}

/// Reads `(id, duration)` rows of `sql` into durations by id.
fn by_id(report: &dyn Report, sql: &str) -> Result<BTreeMap<i64, Vec<i64>>, String> {
    let mut by_id: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    report.query(sql, &[], &mut |row| {
        if let [Value::Int(id), Value::Int(d)] = row {
            by_id.entry(*id).or_default().push(*d);
        }
        Ok(())
    })?;
    Ok(by_id)
}

/// CUDA API calls by name without its version suffix (backtrace rows left out).
fn api_calls(
    report: &dyn Report,
    columns: &[String],
    window: &Window,
    groups: &mut Groups,
    out: &mut Output,
) -> Result<(), String> {
    let not_backtrace = if columns.iter().any(|c| c == "eventClass") {
        format!("r.eventClass IS NOT {BACKTRACE_CLASS}")
    } else {
        "1".to_owned()
    };
    let calls = by_id(
        report,
        &format!(
            "SELECT r.nameId, r.\"end\" - r.start FROM {RUNTIME} AS r WHERE {not_backtrace} AND {}",
            window.sql("r")
        ),
    )?;
    let names = string_values(report, &calls.keys().copied().collect::<BTreeSet<_>>())?;
    let mut unnamed = 0usize;
    for (id, durations) in calls {
        let Some(name) = names.get(&id) else {
            unnamed += durations.len();
            continue;
        };
        groups
            .entry(("CUDA_API", strip_api_version(name).to_owned()))
            .or_default()
            .extend(durations);
    }
    if unnamed > 0 {
        out.note(format!(
            "{unnamed} CUDA API calls have no name in StringIds and are left out"
        ));
    }
    Ok(())
}

/// Kernels by name: `column`, else the demangled name.
fn kernels(
    report: &dyn Report,
    column: &str,
    window: &Window,
    groups: &mut Groups,
) -> Result<(), String> {
    let kernels = by_id(
        report,
        &format!(
            "SELECT coalesce(k.{column}, k.demangledName), k.\"end\" - k.start FROM {KERNEL} AS k \
             WHERE {}",
            window.sql("k")
        ),
    )?;
    let names = string_values(report, &kernels.keys().copied().collect::<BTreeSet<_>>())?;
    for (id, durations) in kernels {
        let name = names.get(&id).cloned().unwrap_or_default();
        groups
            .entry(("CUDA_KERNEL", name))
            .or_default()
            .extend(durations);
    }
    Ok(())
}
