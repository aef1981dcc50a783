//! The `cuda_gpu_mem_size_sum` recipe (CUDA GPU memory operations by size), as a component of
//! the `recipe` world.
//!
//! ```text
//!  CUPTI_ACTIVITY_KIND_MEMCPY ─ copyKind -> "[CUDA memcpy <label>]" ─┐
//!  CUPTI_ACTIVITY_KIND_MEMSET ─ "[CUDA memset]" ─────────────────────┴─ bytes ─> summary (MB)
//! ```
//! The same operations as `cuda_gpu_mem_time_sum` (`nsight_recipe_sdk::memops`), summarised
//! by size: statistics in bytes, Avg/Med/StdDev rounded to one decimal, then shown in MB
//! (1e6 bytes); rows by total size descending (docs/recipes.md).

use nsight_recipe_sdk::{
    memops::memory_operations, size_summary_table, time_window, Args, Group, Output, Report,
    Schema, SizeSummarySpec, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(MemSizeSum);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

struct MemSizeSum;

const SPEC: SizeSummarySpec = SizeSummarySpec {
    table: "cuda_gpu_mem_size_sum",
    count_header: "Count",
    labels: &["Operation"],
    tie_order: &[0],
    ties: nsight_recipe_sdk::Ties::Labels,
};

impl Guest for MemSizeSum {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "cuda_gpu_mem_size_sum: describe");
        RecipeInfo {
            name: "cuda_gpu_mem_size_sum".into(),
            display_name: "CUDA GPU MemOps Summary (by Size)".into(),
            description: "Bytes moved by GPU memory copies (per copy kind) and set by memsets, \
                          in MB: total, count, average, median, min, max and standard \
                          deviation, sorted by total size."
                .into(),
            // No time columns, so no --timeunit.
            arguments: wit_arguments(
                STATS_ARGUMENTS
                    .iter()
                    .filter(|(name, _, _)| *name != "timeunit"),
            ),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, mem_size_sum)
    }
}

fn mem_size_sum(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["filter-time", "filter-nvtx"])?;
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
            durations: ops.bytes,
        })
        .collect();
    out.tables.push(size_summary_table(&SPEC, groups));
    Ok(out)
}
