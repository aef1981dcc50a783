//! The `nccl_sum` recipe (NCCL Summary), as a component of the `recipe` world.
//!
//! ```text
//!  NVTX_EVENTS (ranges, not the default domain) ─ nvtx::Domains ─ nccl::is_nccl_range
//!        └─ by function name ─> summary_table `nccl_sum`         + bar chart of Total
//!  CUPTI_ACTIVITY_KIND_KERNEL ─ short name ─ nccl::is_nccl_kernel
//!        └─ by kernel name (--name) ─> summary_table `nccl_kern_sum` + bar chart of Total
//! ```
//! NVIDIA documents the recipe as "a summary of NCCL functions and their execution times";
//! NCCL annotates each of its API calls with an NVTX range in its own domain (`NCCL`), and
//! its kernels' names start with `nccl`. Both tables use the statistics and rounding of the
//! summaries (`nsight-recipe-sdk`); a report without NCCL gives notes and empty tables.

use std::collections::{BTreeSet, HashMap};

use nsight_recipe_sdk::{
    nccl::{is_nccl_kernel, is_nccl_range},
    nvtx::{Domains, EventTypes, NvtxSql, NVTX_TABLE},
    round_half_away, string_values, summary_table,
    svg::bar_chart,
    time_window, Args, Group, KernelName, Output, Report, Schema, SummarySpec, Table, Ties,
    TimeUnit, Value, Window, FILTER_ARGS, KERNEL_NAME_ARGUMENT, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(NcclSum);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const NAME: &str = "nccl_sum";
const KERNEL_SUM: &str = "nccl_kern_sum";
const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
/// Bars in each chart.
const MAX_BARS: usize = 20;

struct NcclSum;

impl Guest for NcclSum {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "nccl_sum: describe");
        RecipeInfo {
            name: NAME.into(),
            display_name: "NCCL Summary".into(),
            description: "A summary of NCCL functions and their execution times: the NVTX \
                          ranges NCCL records for its API calls, per function, and the NCCL \
                          kernels on the GPU, per kernel name: count, total, average, median, \
                          min, max and standard deviation, sorted by total time."
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
        wit_run(args, nccl_sum)
    }
}

fn spec(table: &'static str, unit: TimeUnit) -> SummarySpec {
    SummarySpec {
        table,
        count_header: "Instances",
        labels: &["Name"],
        tie_order: &[0],
        ties: Ties::CountThenLabels,
        unit,
    }
}

fn nccl_sum(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit", "name", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let unit = args.time_unit()?;
    let kernel_name = KernelName::parse(&args)?;
    let mut out = Output::default();
    let schema = Schema::read(report);
    let strings = schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;

    let functions = match schema.require(
        &mut out,
        NVTX_TABLE,
        &["start", "end", "eventType"],
        "the profile has no NVTX data; NCCL records its calls as NVTX ranges when traced with \
         -t nvtx",
    ) {
        Some(columns) => nccl_ranges(&schema, &columns, strings, &window)?,
        None => Vec::new(),
    };
    if functions.is_empty() && schema.has_table(NVTX_TABLE) {
        out.note(
            "no NCCL NVTX ranges (domain NCCL, or ranges named nccl* in an unnamed domain) in \
             this report; the nccl_sum table is empty",
        );
    }
    let kernels = match schema.require(
        &mut out,
        KERNEL,
        &["start", "end", "demangledName"],
        "the profile has no CUDA kernels",
    ) {
        Some(columns) if strings => {
            let column = kernel_name.column_in(&columns, &mut out);
            nccl_kernels(&schema, &columns, column, &window)?
        }
        _ => Vec::new(),
    };
    if kernels.is_empty() && schema.has_table(KERNEL) {
        out.note(
            "no NCCL kernels (names starting with 'nccl') in this report; the nccl_kern_sum \
             table is empty",
        );
    }
    let tables = [
        summary_table(&spec(NAME, unit), functions),
        summary_table(&spec(KERNEL_SUM, unit), kernels),
    ];
    for (table, what) in tables.iter().zip(["NCCL functions", "NCCL kernels"]) {
        chart(table, what, unit, &mut out);
    }
    out.tables.extend(tables);
    Ok(out)
}

/// NCCL's NVTX ranges (with an end, inside the window) grouped by their text.
fn nccl_ranges(
    schema: &Schema<'_>,
    columns: &[String],
    strings: bool,
    window: &Window,
) -> Result<Vec<Group>, String> {
    if !columns.iter().any(|c| c == "domainId") {
        // Every range is in the default domain, where NCCL never records.
        return Ok(Vec::new());
    }
    let report = schema.report();
    let types = EventTypes::read(schema)?;
    let sql = NvtxSql::new(columns, strings);
    let domains = Domains::read(report, &types, &sql)?;
    let q = format!(
        "SELECT e.start, e.\"end\", {}, {}, {} FROM {NVTX_TABLE} AS e {} \
         WHERE e.eventType IN ({}) AND e.domainId <> 0 AND e.\"end\" IS NOT NULL AND {}",
        sql.domain,
        sql.tid,
        sql.text,
        sql.join,
        types.range_list(),
        window.sql("e")
    );
    let mut groups: HashMap<String, Group> = HashMap::new();
    report.query(&q, &[], &mut |row| {
        let [Value::Int(start), Value::Int(end), d, t, text] = row else {
            return Ok(());
        };
        let d = d.as_int().unwrap_or(0);
        let text = text.as_text().unwrap_or_default();
        if is_nccl_range(d, domains.name(d, t.as_int().unwrap_or(0)), text) {
            groups
                .entry(text.to_owned())
                .or_insert_with_key(|name| Group {
                    labels: vec![name.clone()],
                    ..Group::default()
                })
                .durations
                .push(end - start);
        }
        Ok(())
    })?;
    Ok(groups.into_values().collect())
}

/// The NCCL kernels (short name, else demangled name, starting with `nccl`) inside the
/// window, grouped by the name in `column` (the demangled name where it is NULL).
fn nccl_kernels(
    schema: &Schema<'_>,
    columns: &[String],
    column: &str,
    window: &Window,
) -> Result<Vec<Group>, String> {
    let kind = if columns.iter().any(|c| c == "shortName") {
        "coalesce(k.shortName, k.demangledName)"
    } else {
        "k.demangledName"
    };
    let sql = format!(
        "SELECT k.\"end\" - k.start, {kind}, coalesce(k.{column}, k.demangledName) \
         FROM {KERNEL} AS k WHERE k.start IS NOT NULL AND k.\"end\" IS NOT NULL AND {}",
        window.sql("k")
    );
    // (kind id, name id) -> durations.
    let mut by_ids: HashMap<(Option<i64>, Option<i64>), Vec<i64>> = HashMap::new();
    schema.report().query(&sql, &[], &mut |row| {
        if let [Value::Int(d), kind, name] = row {
            by_ids
                .entry((kind.as_int(), name.as_int()))
                .or_default()
                .push(*d);
        }
        Ok(())
    })?;
    let ids: BTreeSet<i64> = by_ids
        .keys()
        .flat_map(|(a, b)| [*a, *b])
        .flatten()
        .collect();
    let names = string_values(schema.report(), &ids)?;
    let name = |id: Option<i64>| id.and_then(|i| names.get(&i)).map(String::as_str);
    let mut groups: HashMap<&str, Group> = HashMap::new();
    for ((kind, label), durations) in by_ids {
        if !name(kind).is_some_and(is_nccl_kernel) {
            continue;
        }
        let label = name(label).unwrap_or_default();
        groups
            .entry(label)
            .or_insert_with(|| Group {
                labels: vec![label.to_owned()],
                ..Group::default()
            })
            .durations
            .extend(durations);
    }
    Ok(groups.into_values().collect())
}

/// A bar chart of the Total column of `table` (its first rows), when it has rows.
fn chart(table: &Table, what: &str, unit: TimeUnit, out: &mut Output) {
    if table.rows.is_empty() {
        return;
    }
    let name_at = table.columns.len() - 1;
    let bars: Vec<(String, f64)> = table
        .rows
        .iter()
        .take(MAX_BARS)
        .map(|row| {
            let total = match &row[1] {
                Value::Int(i) => *i as f64,
                Value::Real(x) => round_half_away(*x, 3),
                _ => 0.0,
            };
            (row[name_at].as_text().unwrap_or_default().to_owned(), total)
        })
        .collect();
    out.figures.push(bar_chart(
        &table.name,
        &format!("{what}: total time"),
        "by total time",
        &format!("total time ({})", unit.suffix()),
        &bars,
    ));
}
