//! The map step: one report's CUDA kernel statistics per kernel name, exactly as
//! `cuda_gpu_kern_sum` computes them (docs/recipes.md), always in nanoseconds.
//!
//! ```text
//!  CUPTI_ACTIVITY_KIND_KERNEL ⋈ StringIds ─ name -> durations (end - start) ─> summary (ns)
//! ```

use std::collections::{BTreeSet, HashMap};

use nsight_recipe_sdk::{
    string_values, summary_table, Args, Group, Output, Report, Schema, SummarySpec, TimeUnit, Value,
};

const TABLE: &str = "CUPTI_ACTIVITY_KIND_KERNEL";

/// The name of the partial table `map` returns.
pub const PARTIAL: &str = "cuda_gpu_kern_sum";

/// The name column `--name` selects: `None` for the demangled name.
pub fn name_column(args: &Args) -> Result<Option<&'static str>, String> {
    match args.get("name").unwrap_or("demangled") {
        "demangled" => Ok(None),
        "base" => Ok(Some("shortName")),
        "mangled" => Ok(Some("mangledName")),
        other => Err(format!(
            "--name {other}: expected demangled, base or mangled"
        )),
    }
}

/// One report's kernel summary in nanoseconds (the `cuda_gpu_kern_sum` table), with notes for
/// what the report lacks.
pub fn kernel_summary(report: &dyn Report, args: &Args) -> Result<Output, String> {
    let name_column = name_column(args)?;
    let spec = SummarySpec {
        table: PARTIAL,
        count_header: "Instances",
        labels: &["Name"],
        tie_order: &[0],
        ties: nsight_recipe_sdk::Ties::CountThenLabels,
        unit: TimeUnit::Nsec,
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
    out.tables.push(summary_table(&spec, groups));
    Ok(out)
}

fn kernels(
    report: &dyn Report,
    columns: &[String],
    name_column: Option<&str>,
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
    let sql = format!("SELECT k.end - k.start, k.demangledName{name_id} FROM {TABLE} AS k");
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
