//! The `nvtx_sum` recipe (NVTX range summary), as a component of the `recipe` world.
//!
//! ```text
//!  ENUM_NSYS_EVENT_TYPE ─ event type ids (59/70 PushPop, 60/71 StartEnd, 75 domain create)
//!  NVTX_EVENTS (domain create) ─ (domainId, PID) -> domain name
//!  NVTX_EVENTS (ranges) ⋈ StringIds ─ (style, "<domain>:<text>") -> durations ─> summary
//! ```
//! Event types, range text and domain names come from `nsight_recipe_sdk::nvtx`. Ranges
//! without an end are left out with a note; marks are not ranges. The statistics and
//! their order come from `nsight-recipe-sdk` (docs/recipes.md).

use std::collections::HashMap;

use nsight_recipe_sdk::{
    nvtx::{Domains, EventTypes, NvtxSql, NVTX_TABLE as TABLE},
    summary_table, time_window, Args, Group, Output, Report, Schema, SummarySpec, Value, Window,
    FILTER_ARGS, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(NvtxSum);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

struct NvtxSum;

impl Guest for NvtxSum {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "nvtx_sum: describe");
        RecipeInfo {
            name: "nvtx_sum".into(),
            display_name: "NVTX Range Summary".into(),
            description: "Time spent in each NVTX range (push/pop and start/end), per range name \
                          and style: count, total, average, median, min, max and standard \
                          deviation, sorted by total time."
                .into(),
            arguments: wit_arguments(&STATS_ARGUMENTS),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, nvtx_sum)
    }
}

fn nvtx_sum(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let spec = SummarySpec {
        table: "nvtx_sum",
        count_header: "Instances",
        labels: &["Style", "Range"],
        tie_order: &[1, 0],
        ties: nsight_recipe_sdk::Ties::CountDescThenLabels,
        unit: args.time_unit()?,
    };
    let mut out = Output::default();
    let schema = Schema::read(report);
    let strings = schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let groups = match schema.require(
        &mut out,
        TABLE,
        &["start", "end", "eventType"],
        "the profile has no NVTX data",
    ) {
        Some(columns) => ranges(&schema, &columns, strings, &window, &mut out)?,
        None => Vec::new(),
    };
    out.tables.push(summary_table(&spec, groups));
    Ok(out)
}

fn ranges(
    schema: &Schema<'_>,
    columns: &[String],
    strings: bool,
    window: &Window,
    out: &mut Output,
) -> Result<Vec<Group>, String> {
    let report = schema.report();
    let types = EventTypes::read(schema)?;
    let sql = NvtxSql::new(columns, strings);
    let domains = Domains::read(report, &types, &sql)?;

    let mut groups: HashMap<(bool, String), Group> = HashMap::new();
    let (mut open, mut unnamed) = (0u64, 0u64);
    let q = format!(
        "SELECT e.start, e.end, e.eventType, {}, {}, {} FROM {TABLE} AS e {} \
         WHERE e.eventType IN ({}) AND (e.\"end\" IS NULL OR {})",
        sql.domain,
        sql.tid,
        sql.text,
        sql.join,
        types.range_list(),
        window.sql("e")
    );
    report.query(&q, &[], &mut |row| {
        let [start, end, Value::Int(kind), d, t, text] = row else {
            return Err(format!("unexpected row from {TABLE}: {row:?}"));
        };
        let (Value::Int(start), Value::Int(end)) = (start, end) else {
            open += 1;
            return Ok(());
        };
        let push_pop = types.push_pop.contains(kind);
        let d = d.as_int().unwrap_or(0);
        let domain_name = match domains.name(d, t.as_int().unwrap_or(0)) {
            Some(name) => name,
            None => {
                if d != 0 {
                    unnamed += 1;
                }
                ""
            }
        };
        let range = format!("{domain_name}:{}", text.as_text().unwrap_or_default());
        let g = groups
            .entry((push_pop, range))
            .or_insert_with_key(|(push_pop, range)| Group {
                labels: vec![
                    if *push_pop { "PushPop" } else { "StartEnd" }.into(),
                    range.clone(),
                ],
                ..Group::default()
            });
        g.durations.push(end - start);
        Ok(())
    })?;
    if open > 0 {
        out.note(format!(
            "{open} NVTX ranges have no end (still open when the capture stopped) and are \
             left out"
        ));
    }
    if unnamed > 0 {
        out.note(format!(
            "{unnamed} NVTX ranges belong to a domain with no NvtxDomainCreate event in this \
             report; they are shown with an empty domain name"
        ));
    }
    Ok(groups.into_values().collect())
}
