//! The `cuda_gpu_kern_sum` recipe (CUDA GPU kernel summary), as a component of the `recipe`
//! world.
//!
//! ```text
//!  CUPTI_ACTIVITY_KIND_KERNEL ⋈ StringIds ─ name -> durations (end - start) ─> summary
//! ```
//! Names are `demangledName` by default; `--name base` uses `shortName` and `--name mangled`
//! uses `mangledName`, each falling back to the demangled name where missing (NVIDIA's
//! `cuda_gpu_kern_sum:base` and `:mangled`). The statistics and their order come from
//! `nsight-recipe-sdk` (docs/recipes.md).

use std::collections::HashMap;

use nsight_recipe_sdk::{
    summary_columns, summary_table, Args, Group, Output, Report, Schema, SummarySpec, Table, Value,
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
            arguments: vec![
                Argument {
                    name: "timeunit".into(),
                    description: "Unit of the time columns: nsec, usec, msec or sec.".into(),
                    default_value: Some("nsec".into()),
                },
                Argument {
                    name: "name".into(),
                    description: "Kernel names: demangled (full signature), base (short name) \
                                  or mangled."
                        .into(),
                    default_value: Some("demangled".into()),
                },
            ],
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, kern_sum)
    }
}

fn kern_sum(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit", "name"])?;
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
    let groups = match schema.require(
        &mut out,
        TABLE,
        &["start", "end", "demangledName"],
        "the profile has no CUDA kernels",
    ) {
        Some(columns) if strings => kernels(report, &columns, name_column, &mut out)?,
        _ => Vec::new(),
    };
    if groups.is_empty() {
        out.tables.push(Table {
            name: spec.table.into(),
            columns: summary_columns(&spec),
            rows: Vec::new(),
        });
    } else {
        out.tables.push(summary_table(&spec, groups));
    }
    Ok(out)
}

fn kernels(
    report: &dyn Report,
    columns: &[String],
    name_column: Option<&str>,
    out: &mut Output,
) -> Result<Vec<Group>, String> {
    let (name, join) = match name_column {
        Some(c) if columns.iter().any(|have| have == c) => (
            "coalesce(n.value, d.value)",
            format!("LEFT JOIN StringIds AS n ON n.id = k.{c}"),
        ),
        Some(c) => {
            out.note(format!(
                "column {TABLE}.{c} not in this report (older export); kernels are named by \
                 their demangled names"
            ));
            ("d.value", String::new())
        }
        None => ("d.value", String::new()),
    };
    let sql = format!(
        "SELECT k.end - k.start, {name} FROM {TABLE} AS k \
         LEFT JOIN StringIds AS d ON d.id = k.demangledName {join}"
    );
    let mut groups: HashMap<String, Vec<i64>> = HashMap::new();
    let mut incomplete = 0u64;
    report.query(&sql, &[], &mut |row| {
        match row {
            [Value::Int(duration), name] => groups
                .entry(name.as_text().unwrap_or_default().to_owned())
                .or_default()
                .push(*duration),
            _ => incomplete += 1,
        }
        Ok(())
    })?;
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
