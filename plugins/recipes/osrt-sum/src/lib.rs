//! The `osrt_sum` recipe (OS runtime library summary), as a component of the `recipe` world.
//!
//! ```text
//!  OSRT_API (eventClass 27) ⋈ StringIds ─ nameId -> durations (end - start) ─> summary
//! ```
//! Calls are the `OSRT_API` rows of event class 27 (OS runtime calls), grouped by `nameId` and
//! shown by name; rows of other classes are left out with a note. The statistics and their
//! order come from `nsight-recipe-sdk` (docs/recipes.md).

use nsight_recipe_sdk::{
    summary_table, time_window, Args, Group, GroupsById, Output, Report, Schema, SummarySpec,
    Value, Window, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(OsrtSum);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const TABLE: &str = "OSRT_API";
/// The event class of OS runtime calls.
const OSRT_CLASS: i64 = 27;

struct OsrtSum;

impl Guest for OsrtSum {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "osrt_sum: describe");
        RecipeInfo {
            name: "osrt_sum".into(),
            display_name: "OS Runtime Summary".into(),
            description: "Time spent in each traced OS runtime library function (pthread, \
                          poll, read, ioctl, ...): number of calls, total, average, median, \
                          min, max and standard deviation, sorted by total time."
                .into(),
            arguments: wit_arguments(&STATS_ARGUMENTS),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, osrt_sum)
    }
}

fn osrt_sum(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit", "filter-time", "filter-nvtx"])?;
    let spec = SummarySpec {
        table: "osrt_sum",
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
        &["start", "end", "nameId", "eventClass"],
        "the profile has no OS runtime library trace",
    ) {
        Some(_) if strings => calls(report, &window, &mut out)?,
        _ => Vec::new(),
    };
    out.tables.push(summary_table(&spec, groups));
    Ok(out)
}

fn calls(report: &dyn Report, window: &Window, out: &mut Output) -> Result<Vec<Group>, String> {
    let sql = format!(
        "SELECT o.\"end\" - o.start, o.nameId, s.value, o.eventClass FROM {TABLE} AS o \
         LEFT JOIN StringIds AS s ON s.id = o.nameId WHERE {}",
        window.sql("o")
    );
    let mut groups = GroupsById::default();
    let (mut other, mut incomplete) = (0u64, 0u64);
    report.query(&sql, &[], &mut |row| {
        let [duration, name_id, name, class] = row else {
            return Err(format!("unexpected row from {TABLE}: {row:?}"));
        };
        if class.as_int() != Some(OSRT_CLASS) {
            other += 1;
            return Ok(());
        }
        let (Value::Int(duration), Some(name_id)) = (duration, name_id.as_int()) else {
            incomplete += 1;
            return Ok(());
        };
        groups.add(
            name_id,
            || vec![name.as_text().unwrap_or_default().to_owned()],
            *duration,
        );
        Ok(())
    })?;
    if other > 0 {
        out.note(format!(
            "{other} rows of {TABLE} are not of event class {OSRT_CLASS} (OS runtime call) and \
             are left out"
        ));
    }
    if incomplete > 0 {
        out.note(format!(
            "{incomplete} calls have no start, end or name and are left out"
        ));
    }
    Ok(groups.into_groups())
}
