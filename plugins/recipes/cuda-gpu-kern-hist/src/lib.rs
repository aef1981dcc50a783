//! The `cuda_gpu_kern_hist` recipe (CUDA GPU kernel duration histogram), as a component of the
//! `recipe` world.
//!
//! ```text
//!  CUPTI_ACTIVITY_KIND_KERNEL ─ end - start ─> histogram(--bins) ─> bin table + SVG bar chart
//! ```
//! Equal-width bins over [shortest, longest] kernel (`nsight_recipe_sdk::histogram`), each
//! shown by the shortest and longest duration (integer ns) it can hold, divided by the
//! `--timeunit`; the share of kernels per bin rounded to one decimal.

use nsight_recipe_sdk::{
    count_arg, histogram, percent, svg::bar_chart, time_value, time_window, Args, Column,
    ColumnKind, Output, Report, Schema, Table, Value, FILTER_ARGS, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(KernHist);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const TABLE: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
const NAME: &str = "cuda_gpu_kern_hist";

struct KernHist;

impl Guest for KernHist {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "cuda_gpu_kern_hist: describe");
        let own = [(
            "bins",
            "Number of equal-width bins between the shortest and the longest kernel (1-10000; \
             at most one per nanosecond of that range).",
            Some("30"),
        )];
        RecipeInfo {
            name: NAME.into(),
            display_name: "CUDA GPU Kernel Duration Histogram".into(),
            description: "Histogram of CUDA kernel durations: equal-width bins from the \
                          shortest to the longest kernel, with the count and share of kernels \
                          in each, as a table and a bar chart."
                .into(),
            arguments: wit_arguments(own.iter().chain(&STATS_ARGUMENTS)),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, kern_hist)
    }
}

fn kern_hist(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["bins", "timeunit", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let bins = count_arg(&args, "bins", 30, 1, 10_000)?;
    let unit = args.time_unit()?;
    let mut out = Output::default();
    let schema = Schema::read(report);
    schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let mut durations = Vec::new();
    if schema
        .require(
            &mut out,
            TABLE,
            &["start", "end"],
            "the profile has no CUDA kernels",
        )
        .is_some()
    {
        let sql = format!(
            "SELECT k.\"end\" - k.start FROM {TABLE} AS k WHERE {}",
            window.sql("k")
        );
        let mut incomplete = 0u64;
        report.query(&sql, &[], &mut |row| {
            match row.first() {
                Some(Value::Int(d)) => durations.push(*d),
                _ => incomplete += 1,
            }
            Ok(())
        })?;
        if incomplete > 0 {
            out.note(format!(
                "{incomplete} kernels have no start or end and are left out"
            ));
        }
    }
    let total = i64::try_from(durations.len()).unwrap_or(i64::MAX);
    let u = unit.suffix();
    let hist = histogram(&durations, bins);
    let rows: Vec<Vec<Value>> = hist
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let count = i64::try_from(b.count).unwrap_or(i64::MAX);
            vec![
                Value::Int(i as i64),
                time_value(unit, b.min),
                time_value(unit, b.max),
                Value::Int(count),
                percent(count, total).map_or(Value::Null, Value::Real),
            ]
        })
        .collect();
    if !rows.is_empty() {
        let bars: Vec<(String, f64)> = rows
            .iter()
            .zip(&hist)
            .map(|(r, b)| {
                let show = |v: &Value| match v {
                    Value::Int(i) => i.to_string(),
                    Value::Real(x) => x.to_string(),
                    _ => String::new(),
                };
                (
                    format!("{} - {} {u}", show(&r[1]), show(&r[2])),
                    b.count as f64,
                )
            })
            .collect();
        out.figures.push(bar_chart(
            NAME,
            &format!("CUDA kernel durations ({total} kernels)"),
            &format!("duration ({u})"),
            "kernels",
            &bars,
        ));
    }
    let time_kind = if u == "ns" {
        ColumnKind::Int
    } else {
        ColumnKind::Real
    };
    out.tables.push(Table {
        name: NAME.into(),
        columns: vec![
            Column::new("Bin", ColumnKind::Int, None),
            Column::new(format!("Min ({u})"), time_kind, Some(u)),
            Column::new(format!("Max ({u})"), time_kind, Some(u)),
            Column::new("Instances", ColumnKind::Int, None),
            Column::new("Instances (%)", ColumnKind::Real, Some("%")),
        ],
        rows,
    });
    Ok(out)
}
