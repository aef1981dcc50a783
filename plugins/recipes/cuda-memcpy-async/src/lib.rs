//! The `cuda_memcpy_async` recipe (NVIDIA's expert-system rule "CUDA Async Memcpy with
//! Pageable Memory"), as a component of the `recipe` world: asynchronous copies that became
//! synchronous because one side is pageable host memory.
//!
//! ```text
//!  MEMCPY (srcKind or dstKind pageable) ⋈ RUNTIME (correlationId) ⋈ StringIds
//!      (call name LIKE 'cudaMemcpy%Async%') ──> one row per copy, longest first
//! ```
//! The join is NVIDIA's: by `correlationId` alone. Memory kinds are labelled from
//! `ENUM_CUDA_MEM_KIND` (nsys's numbering, 0 = Pageable), else from the same labels built in.

use nsight_recipe_sdk::{
    copies::{copies_table, longest_first, read_copies, row_limit, time_by_api_figure},
    time_window, Args, Output, Report, Schema, FILTER_ARGS, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(CudaMemcpyAsync);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const NAME: &str = "cuda_memcpy_async";
/// nsys's memory kind of pageable host memory.
const PAGEABLE: i64 = 0;

struct CudaMemcpyAsync;

impl Guest for CudaMemcpyAsync {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "cuda_memcpy_async: describe");
        RecipeInfo {
            name: NAME.into(),
            display_name: "CUDA Async Memcpy with Pageable Memory".into(),
            description: "Asynchronous memory copies (cudaMemcpy*Async) from or to pageable host \
                          memory, which the driver runs synchronously: each copy with its \
                          duration, start, memory kinds, size, process, device, context, stream \
                          and API, longest first. Pinned host memory avoids them."
                .into(),
            arguments: wit_arguments(
                STATS_ARGUMENTS
                    .iter()
                    .take(1)
                    .chain(&[(
                        "rows",
                        "At most this many rows (the longest copies); -1 for all.",
                        Some("-1"),
                    )])
                    .chain(&STATS_ARGUMENTS[1..]),
            ),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, memcpy_async)
    }
}

fn memcpy_async(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit", "rows", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let unit = args.time_unit()?;
    let limit = row_limit(&args, None)?;
    let mut out = Output::default();
    let schema = Schema::read(report);
    schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let condition = format!(
        "(m.srcKind = {PAGEABLE} OR m.dstKind = {PAGEABLE}) \
         AND s.value LIKE 'cudaMemcpy%Async%'"
    );
    let mut copies = read_copies(&schema, &condition, &window, &mut out)?;
    let figure = time_by_api_figure(&schema, "cuda_memcpy_async_time", &copies, unit)?;
    let found = longest_first(&mut copies, limit, &mut out);
    out.note(if found > 0 {
        "The APIs listed use PAGEABLE memory, which makes asynchronous CUDA memcpy operations \
         block and run synchronously, leading to low GPU utilization. Suggestion: if \
         applicable, use PINNED memory instead."
    } else {
        "There were no problems detected related to memcpy operations using pageable memory."
    });
    out.tables.push(copies_table(&schema, NAME, copies, unit)?);
    out.figures.extend(figure);
    Ok(out)
}
