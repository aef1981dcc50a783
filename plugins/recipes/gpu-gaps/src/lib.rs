//! The `gpu_gaps` recipe (GPU idle periods), as a component of the `recipe` world.
//!
//! ```text
//!  KERNEL + MEMCPY + MEMSET ─ per (PID, device), by start ─ start > latest end so far ─> gap
//!        └─> gaps longer than --gap ms, longest first ─> table
//! ```
//! A gap is a time between a process's first and last GPU operation on a device when none of
//! its operations runs there (`nsight_recipe_sdk::gpu::gaps`).

use nsight_recipe_sdk::{
    gpu::{gaps, gpu_ops, KERNEL_TABLE, MEMCPY_TABLE, MEMSET_TABLE},
    number_arg, time_value, time_window, Args, Column, ColumnKind, Output, Report, Schema, Table,
    Value, FILTER_ARGS, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(GpuGaps);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const NAME: &str = "gpu_gaps";

struct GpuGaps;

impl Guest for GpuGaps {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "gpu_gaps: describe");
        let own = [(
            "gap",
            "Show idle periods longer than this many milliseconds.",
            Some("500"),
        )];
        RecipeInfo {
            name: NAME.into(),
            display_name: "GPU Gaps".into(),
            description: "GPU idle periods: for each process and device, the times between its \
                          first and last GPU operation (kernel, memory copy, memset) when none \
                          of them runs, longer than the gap threshold, longest first."
                .into(),
            arguments: wit_arguments(own.iter().chain(&STATS_ARGUMENTS)),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, gpu_gaps)
    }
}

fn gpu_gaps(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["gap", "timeunit", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let gap_ms = number_arg(&args, "gap", 500.0)?;
    let min_ns = gap_ms * 1e6;
    let unit = args.time_unit()?;
    let mut out = Output::default();
    let schema = Schema::read(report);
    schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let mut ops = gpu_ops(
        &schema,
        &[
            (KERNEL_TABLE, "the profile has no CUDA kernels"),
            (MEMCPY_TABLE, "the profile has no CUDA memory copies"),
            (MEMSET_TABLE, "the profile has no CUDA memsets"),
        ],
        &window,
        &mut out,
    )?;
    let all = gaps(&mut ops);
    let mut long: Vec<_> = all
        .iter()
        .filter(|g| (g.end - g.start) as f64 > min_ns)
        .collect();
    long.sort_by(|a, b| {
        (b.end - b.start)
            .cmp(&(a.end - a.start))
            .then((a.pid, a.device, a.start).cmp(&(b.pid, b.device, b.start)))
    });
    if !ops.is_empty() {
        out.note(format!(
            "{} of {} idle periods are longer than {gap_ms} ms",
            long.len(),
            all.len()
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
            time("Start"),
            time("End"),
            time("Duration"),
        ],
        rows: long
            .into_iter()
            .map(|g| {
                vec![
                    Value::Int(g.pid),
                    Value::Int(g.device),
                    time_value(unit, g.start),
                    time_value(unit, g.end),
                    time_value(unit, g.end - g.start),
                ]
            })
            .collect(),
    });
    Ok(out)
}
