//! The `cuda_gpu_mem_time_sum` recipe (CUDA GPU memory operations by time), as a component of
//! the `recipe` world.
//!
//! ```text
//!  CUPTI_ACTIVITY_KIND_MEMCPY ─ copyKind -> "[CUDA memcpy <label>]" ─┐
//!  CUPTI_ACTIVITY_KIND_MEMSET ─ "[CUDA memset]" ─────────────────────┴─ durations ─> summary
//! ```
//! Operation names and the copy-kind labels come from `nsight_recipe_sdk::memops`; the
//! statistics and their order from `nsight-recipe-sdk` (docs/recipes.md).

use nsight_recipe_sdk::{
    memops::memory_operations, summary_table, time_window, Args, Group, Output, Report, Schema,
    SummarySpec, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(MemTimeSum);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

struct MemTimeSum;

impl Guest for MemTimeSum {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "cuda_gpu_mem_time_sum: describe");
        RecipeInfo {
            name: "cuda_gpu_mem_time_sum".into(),
            display_name: "CUDA GPU MemOps Summary (by Time)".into(),
            description: "Time the GPU spent on memory copies (per copy kind) and memsets: \
                          count, total, average, median, min, max and standard deviation, \
                          sorted by total time."
                .into(),
            arguments: wit_arguments(&STATS_ARGUMENTS),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, mem_time_sum)
    }
}

fn mem_time_sum(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit", "filter-time", "filter-nvtx"])?;
    let spec = SummarySpec {
        table: "cuda_gpu_mem_time_sum",
        count_header: "Count",
        labels: &["Operation"],
        tie_order: &[0],
        ties: nsight_recipe_sdk::Ties::Labels,
        unit: args.time_unit()?,
    };
    let mut out = Output::default();
    let schema = Schema::read(report);
    schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let groups: Vec<Group> = memory_operations(&schema, &window, &mut out)?
        .unwrap_or_default()
        .into_iter()
        .map(|(name, ops)| Group {
            labels: vec![name],
            id: 0,
            durations: ops.durations,
        })
        .collect();
    out.tables.push(summary_table(&spec, groups));
    Ok(out)
}
