//! The `cuda_gpu_kern_sum` recipe (CUDA GPU kernel summary), as a component of the `recipe`
//! world.
//!
//! ```text
//!  CUPTI_ACTIVITY_KIND_KERNEL ⋈ StringIds ─ name -> durations (end - start) ─> summary
//! ```
//! Names are `demangledName` by default; `--name base` uses `shortName` and `--name mangled`
//! uses `mangledName`, each falling back to the demangled name where missing (NVIDIA's
//! `cuda_gpu_kern_sum:base` and `:mangled`). Rows are read with name ids and grouped by them;
//! the names are read once per distinct id (`string_values`). The statistics and their order come from
//! `nsight-recipe-sdk` (docs/recipes.md).

use std::collections::{BTreeSet, HashMap};

use nsight_recipe_sdk::{
    string_values, summary_table, time_window, Args, Group, Output, Report, Schema, SummarySpec,
    Value, Window, FILTER_ARGS, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(KernSum);

use component::{log, Argument, Guest, Level, Output as WitOutput, RecipeInfo};

const TABLE: &str = "CUPTI_ACTIVITY_KIND_KERNEL";

struct KernSum;

impl Guest for KernSum {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "cuda_gpu_kern_sum: describe");
        RecipeInfo {
            name: "cuda_gpu_kern_sum".into(),
            display_name: "CUDA GPU Kernel Summary".into(),
            description: "Time spent executing each CUDA kernel on the GPU, per kernel name: \
                          count, total, average, median, min, max and standard deviation, \
                          sorted by total time."
                .into(),
            arguments: STATS_ARGUMENTS
                .iter()
                .take(1)
                .chain(&[(
                    "name",
                    "Kernel names: demangled (full signature), base (short name) or mangled.",
                    Some("demangled"),
                )])
                .chain(&STATS_ARGUMENTS[1..])
                .map(|(name, description, default)| Argument {
                    name: (*name).into(),
                    description: (*description).into(),
                    default_value: default.map(Into::into),
                })
                .collect(),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, kern_sum)
    }
}

fn kern_sum(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit", "name", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let name_column = match args.get("name").unwrap_or("demangled") {
        "demangled" => None,
        "base" => Some("shortName"),
        "mangled" => Some("mangledName"),
        other => {
            return Err(format!(
                "--name {other}: expected demangled, base or mangled"
            ))
        }
    };
    let spec = SummarySpec {
        table: "cuda_gpu_kern_sum",
        count_header: "Instances",
        labels: &["Name"],
        tie_order: &[0],
        unit: args.time_unit()?,
    };
    let mut out = Output::default();
    let schema = Schema::read(report);
    let strings = schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let groups = match schema.require(
        &mut out,
        TABLE,
        &["start", "end", "demangledName"],
        "the profile has no CUDA kernels",
    ) {
        Some(columns) if strings => kernels(report, &columns, name_column, &window, &mut out)?,
        _ => Vec::new(),
    };
    out.tables.push(summary_table(&spec, groups));
    Ok(out)
}

fn kernels(
    report: &dyn Report,
    columns: &[String],
    name_column: Option<&str>,
    window: &Window,
    out: &mut Output,
) -> Result<Vec<Group>, String> {
    let name_id = match name_column {
        Some(c) if columns.iter().any(|have| have == c) => format!(", k.{c}"),
        Some(c) => {
            out.note(format!(
                "column {TABLE}.{c} not in this report (older export); kernels are named by \
                 their demangled names"
            ));
            String::new()
        }
        None => String::new(),
    };
    // Rows carry name ids only (the chosen column's only when it is not the demangled one);
    // the names are read once per distinct id afterwards.
    let sql = format!(
        "SELECT k.end - k.start, k.demangledName{name_id} FROM {TABLE} AS k WHERE {}",
        window.sql("k")
    );
    let mut by_ids: HashMap<(Option<i64>, Option<i64>), Vec<i64>> = HashMap::new();
    let mut incomplete = 0u64;
    report.query(&sql, &[], &mut |row| {
        match row {
            [Value::Int(duration), demangled] => by_ids
                .entry((None, demangled.as_int()))
                .or_default()
                .push(*duration),
            [Value::Int(duration), demangled, name] => by_ids
                .entry((name.as_int(), demangled.as_int()))
                .or_default()
                .push(*duration),
            _ => incomplete += 1,
        }
        Ok(())
    })?;
    let ids: BTreeSet<i64> = by_ids
        .keys()
        .flat_map(|(n, d)| n.iter().chain(d.iter()).copied())
        .collect();
    let strings = string_values(report, &ids)?;
    let lookup = |id: Option<i64>| id.and_then(|i| strings.get(&i));
    // The chosen name, else the demangled one, else empty (as a LEFT JOIN and coalesce).
    let mut groups: HashMap<String, Vec<i64>> = HashMap::new();
    for ((name, demangled), durations) in by_ids {
        let label = lookup(name).or_else(|| lookup(demangled)).cloned();
        groups
            .entry(label.unwrap_or_default())
            .or_default()
            .extend(durations);
    }
    if incomplete > 0 {
        out.note(format!(
            "{incomplete} kernels have no start or end and are left out"
        ));
    }
    Ok(groups
        .into_iter()
        .map(|(name, durations)| Group {
            labels: vec![name],
            id: 0,
            durations,
        })
        .collect())
}
