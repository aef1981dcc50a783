//! The `cuda_memcpy_sync` recipe (NVIDIA's expert-system rule "CUDA Synchronous Memcpy"), as a
//! component of the `recipe` world: memory copies made by synchronous `cudaMemcpy*()` calls,
//! which block the host until the copy is done.
//!
//! ```text
//!  MEMCPY m ⋈ RUNTIME ⋈ StringIds s (LIKE 'cudaMemcpy%', NOT LIKE '%Async%')
//!      minus copies within one device and host-to-device copies of 64 KB or less
//!      ──copies──> one row per copy, longest first
//! ```
//! NVIDIA documents the rule ("not cudaMemcpy*Async; not copies within the same device; not
//! host-to-device copies of a block of 64 KB or less"); its SQL was not available, so the
//! conditions below are ours, written from that sentence (docs/recipes.md).

use nsight_recipe_sdk::{
    copies::{copies_table, longest_first, read_copies, row_limit, time_by_api_figure},
    time_window, Args, Output, Report, Schema, FILTER_ARGS, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(CudaMemcpySync);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const NAME: &str = "cuda_memcpy_sync";
/// nsys's copy kinds: host to device, device to device.
const HTOD: i64 = 1;
const DTOD: i64 = 8;
/// Host-to-device copies up to this size return before the copy is done.
const SMALL_HTOD_BYTES: i64 = 64 * 1024;

struct CudaMemcpySync;

impl Guest for CudaMemcpySync {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "cuda_memcpy_sync: describe");
        RecipeInfo {
            name: NAME.into(),
            display_name: "CUDA Synchronous Memcpy".into(),
            description: "Memory copies made by synchronous cudaMemcpy*() calls, which block the \
                          host until the copy ends (not copies within one device, nor host to \
                          device copies of 64 KB or less): each copy with its duration, start, \
                          memory kinds, size, process, device, context, stream and API, longest \
                          first. cudaMemcpy*Async() lets the host go on."
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
        wit_run(args, memcpy_sync)
    }
}

fn memcpy_sync(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit", "rows", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let unit = args.time_unit()?;
    let limit = row_limit(&args, None)?;
    let mut out = Output::default();
    let schema = Schema::read(report);
    schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    // Within one device: a device-to-device copy whose source and destination device are the
    // same (the copy's device where the export does not say).
    let columns = schema.columns("CUPTI_ACTIVITY_KIND_MEMCPY");
    let has = |c: &str| columns.iter().any(|have| have == c);
    let same_device = if has("srcDeviceId") && has("dstDeviceId") {
        "coalesce(m.srcDeviceId, m.deviceId) = coalesce(m.dstDeviceId, m.deviceId)"
    } else {
        "1"
    };
    let condition = format!(
        "s.value LIKE 'cudaMemcpy%' AND s.value NOT LIKE '%Async%' \
         AND NOT (m.copyKind = {DTOD} AND {same_device}) \
         AND NOT (m.copyKind = {HTOD} AND m.bytes <= {SMALL_HTOD_BYTES})"
    );
    let mut copies = read_copies(&schema, &condition, &window, &mut out)?;
    let figure = time_by_api_figure(&schema, "cuda_memcpy_sync_time", &copies, unit)?;
    let found = longest_first(&mut copies, limit, &mut out);
    out.note(if found > 0 {
        "The copies listed are synchronous memory transfers that block the host (host to \
         device copies of 64 KB or less are not listed). Suggestion: use cudaMemcpy*Async() \
         APIs instead."
    } else {
        "There were no problems detected related to synchronous memcpy operations."
    });
    out.tables.push(copies_table(&schema, NAME, copies, unit)?);
    out.figures.extend(figure);
    Ok(out)
}
