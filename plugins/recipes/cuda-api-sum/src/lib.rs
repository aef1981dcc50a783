//! The `cuda_api_sum` recipe (CUDA API summary), as a component of the `recipe` world.
//!
//! ```text
//!  CUPTI_ACTIVITY_KIND_RUNTIME ⋈ StringIds ─ nameId -> durations (end - start) ─> summary
//! ```
//! Calls are grouped by `nameId`; the shown name drops the API version suffix
//! (`cudaMalloc_v3020` -> `cudaMalloc`). Rows of event class 67 (CUDA backtrace, in older
//! exports: a second copy of each call, named without the suffix) are not calls and are left
//! out with a note. The statistics and their order come from `nsight-recipe-sdk`
//! (docs/recipes.md).

use nsight_recipe_sdk::{
    strip_api_version, summary_table, time_window, Args, Group, GroupsById, Output, Report, Schema,
    SummarySpec, Value, Window, FILTER_ARGS, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(ApiSum);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const TABLE: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";
/// `TRACE_PROCESS_EVENT_CUDABACKTRACE` in `ENUM_NSYS_EVENT_CLASS`.
const BACKTRACE_CLASS: i64 = 67;

struct ApiSum;

impl Guest for ApiSum {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "cuda_api_sum: describe");
        RecipeInfo {
            name: "cuda_api_sum".into(),
            display_name: "CUDA API Summary".into(),
            description: "Time spent in each CUDA runtime and driver API function on the CPU: \
                          number of calls, total, average, median, min, max and standard \
                          deviation, sorted by total time."
                .into(),
            arguments: wit_arguments(&STATS_ARGUMENTS),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, api_sum)
    }
}

fn api_sum(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let spec = SummarySpec {
        table: "cuda_api_sum",
        count_header: "Num Calls",
        labels: &["Name"],
        tie_order: &[0],
        ties: nsight_recipe_sdk::Ties::Id,
        unit: args.time_unit()?,
    };
    let mut out = Output::default();
    let schema = Schema::read(report);
    let strings = schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let groups = match schema.require(
        &mut out,
        TABLE,
        &["start", "end", "nameId"],
        "the profile has no CUDA API calls",
    ) {
        Some(columns) if strings => calls(report, &columns, &window, &mut out)?,
        _ => Vec::new(),
    };
    out.tables.push(summary_table(&spec, groups));
    Ok(out)
}

fn calls(
    report: &dyn Report,
    columns: &[String],
    window: &Window,
    out: &mut Output,
) -> Result<Vec<Group>, String> {
    let class = if columns.iter().any(|c| c == "eventClass") {
        "r.eventClass"
    } else {
        "NULL"
    };
    let sql = format!(
        "SELECT r.end - r.start, r.nameId, s.value, {class} FROM {TABLE} AS r \
         LEFT JOIN StringIds AS s ON s.id = r.nameId WHERE {}",
        window.sql("r")
    );
    let mut groups = GroupsById::default();
    let (mut backtraces, mut incomplete) = (0u64, 0u64);
    report.query(&sql, &[], &mut |row| {
        let [duration, name_id, name, class] = row else {
            return Err(format!("unexpected row from {TABLE}: {row:?}"));
        };
        if class.as_int() == Some(BACKTRACE_CLASS) {
            backtraces += 1;
            return Ok(());
        }
        let (Value::Int(duration), Some(name_id)) = (duration, name_id.as_int()) else {
            incomplete += 1;
            return Ok(());
        };
        groups.add(
            name_id,
            || vec![strip_api_version(name.as_text().unwrap_or_default()).to_owned()],
            *duration,
        );
        Ok(())
    })?;
    if backtraces > 0 {
        out.note(format!(
            "{backtraces} rows of event class {BACKTRACE_CLASS} (CUDA backtrace, a copy of a \
             call) are not counted as calls"
        ));
    }
    if incomplete > 0 {
        out.note(format!(
            "{incomplete} calls have no start, end or name and are left out"
        ));
    }
    Ok(groups.into_groups())
}
