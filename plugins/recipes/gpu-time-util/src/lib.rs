//! The `gpu_time_util` recipe (GPU time utilization), as a component of the `recipe` world.
//!
//! ```text
//!  CUPTI_ACTIVITY_KIND_KERNEL ─ per (PID, device) span ─ --chunks equal parts ─ busy ns / part
//!        └─> parts with In Use (%) < --threshold ─> table; every part ─> one bar chart per span
//! ```
//! The span of a (process, device) runs from its first kernel's start to its last kernel's
//! end; concurrent kernels add up, so a part can be more than 100 % in use
//! (`nsight_recipe_sdk::gpu::utilization`).

use nsight_recipe_sdk::{
    count_arg,
    gpu::{gpu_ops, utilization, KERNEL_TABLE},
    number_arg, round_half_away,
    svg::bar_chart,
    time_value, time_window, Args, Column, ColumnKind, Output, Report, Schema, Table, Value,
    FILTER_ARGS, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(TimeUtil);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const NAME: &str = "gpu_time_util";
/// At most this many bar charts (one per process and device).
const MAX_FIGURES: usize = 16;

struct TimeUtil;

impl Guest for TimeUtil {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "gpu_time_util: describe");
        let own = [
            (
                "threshold",
                "Show the parts in use less than this percentage of their time.",
                Some("50"),
            ),
            (
                "chunks",
                "Number of equal parts each process and device span is split into (1-10000).",
                Some("30"),
            ),
        ];
        RecipeInfo {
            name: NAME.into(),
            display_name: "GPU Time Utilization".into(),
            description: "Time regions of low GPU use: for each process and device, the span \
                          from the first kernel to the end of the last is split into equal \
                          parts and each part's kernel time is summed; the parts below the \
                          threshold are listed. Concurrent kernels can sum past 100 %."
                .into(),
            arguments: wit_arguments(own.iter().chain(&STATS_ARGUMENTS)),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, time_util)
    }
}

fn time_util(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(
        args,
        &[
            "threshold",
            "chunks",
            "timeunit",
            FILTER_ARGS[0],
            FILTER_ARGS[1],
        ],
    )?;
    let threshold = number_arg(&args, "threshold", 50.0)?;
    let chunks = count_arg(&args, "chunks", 30, 1, 10_000)?;
    let unit = args.time_unit()?;
    let mut out = Output::default();
    let schema = Schema::read(report);
    schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let mut ops = gpu_ops(
        &schema,
        &[(KERNEL_TABLE, "the profile has no CUDA kernels")],
        &window,
        &mut out,
    )?;
    let parts = utilization(&mut ops, chunks);
    let low: Vec<_> = parts.iter().filter(|c| c.percent() < threshold).collect();
    let spans = parts
        .chunk_by(|a, b| (a.pid, a.device) == (b.pid, b.device))
        .collect::<Vec<_>>();
    if !parts.is_empty() {
        out.note(format!(
            "{} of {} parts ({} per process and device span, {} spans) are in use less than \
             {threshold} % of their time",
            low.len(),
            parts.len(),
            chunks,
            spans.len()
        ));
    }
    for span in spans.iter().take(MAX_FIGURES) {
        let bars: Vec<(String, f64)> = span
            .iter()
            .map(|c| (format!("part {}", c.index), round_half_away(c.percent(), 1)))
            .collect();
        out.figures.push(bar_chart(
            &format!("{NAME}_pid{}_device{}", span[0].pid, span[0].device),
            &format!(
                "Kernel time in use, PID {} device {}",
                span[0].pid, span[0].device
            ),
            "part of the span",
            "in use (%)",
            &bars,
        ));
    }
    let u = unit.suffix();
    let time_kind = if u == "ns" {
        ColumnKind::Int
    } else {
        ColumnKind::Real
    };
    let time = |name: &str| Column::new(format!("{name} ({u})"), time_kind, Some(u));
    out.tables.push(Table {
        name: NAME.into(),
        columns: vec![
            Column::new("PID", ColumnKind::Int, None),
            Column::new("Device", ColumnKind::Int, None),
            Column::new("Chunk", ColumnKind::Int, None),
            time("Start"),
            time("End"),
            time("Duration"),
            Column::new("In Use (%)", ColumnKind::Real, Some("%")),
        ],
        rows: low
            .into_iter()
            .map(|c| {
                vec![
                    Value::Int(c.pid),
                    Value::Int(c.device),
                    Value::Int(i64::from(c.index)),
                    time_value(unit, c.start),
                    time_value(unit, c.end),
                    time_value(unit, c.end - c.start),
                    Value::Real(round_half_away(c.percent(), 1)),
                ]
            })
            .collect(),
    });
    Ok(out)
}
