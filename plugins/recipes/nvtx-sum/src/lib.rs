//! The `nvtx_sum` recipe (NVTX range summary), as a component of the `recipe` world.
//!
//! ```text
//!  ENUM_NSYS_EVENT_TYPE ─ event type ids (59/70 PushPop, 60/71 StartEnd, 75 domain create)
//!  NVTX_EVENTS (domain create) ─ (domainId, PID) -> domain name
//!  NVTX_EVENTS (ranges) ⋈ StringIds ─ (style, "<domain>:<text>") -> durations ─> summary
//! ```
//! Ranges without an end are left out with a note; marks are not ranges. The statistics and
//! their order come from `nsight-recipe-sdk` (docs/recipes.md).

use std::collections::HashMap;

use nsight_recipe_sdk::{
    summary_columns, summary_table, Args, Group, Output, Report, Schema, SummarySpec, Table, Value,
};

nsight_recipe_sdk::recipe_component!(NvtxSum);

use component::{log, Argument, Guest, Level, Output as WitOutput, RecipeInfo};

const TABLE: &str = "NVTX_EVENTS";

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
            arguments: vec![Argument {
                name: "timeunit".into(),
                description: "Unit of the time columns: nsec, usec, msec or sec.".into(),
                default_value: Some("nsec".into()),
            }],
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, nvtx_sum)
    }
}

fn nvtx_sum(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit"])?;
    let spec = SummarySpec {
        table: "nvtx_sum",
        count_header: "Instances",
        labels: &["Style", "Range"],
        tie_order: &[1, 0],
        unit: args.time_unit()?,
    };
    let mut out = Output::default();
    let schema = Schema::read(report);
    let strings = schema.check_nsys_export(&mut out);
    let groups = match schema.require(
        &mut out,
        TABLE,
        &["start", "end", "eventType"],
        "the profile has no NVTX data",
    ) {
        Some(columns) => ranges(&schema, &columns, strings, &mut out)?,
        None => Vec::new(),
    };
    if groups.is_empty() {
        out.tables.push(Table {
            name: spec.table.into(),
            columns: summary_columns(&spec),
            rows: Vec::new(),
        });
    } else {
        out.tables.push(summary_table(&spec, groups));
    }
    Ok(out)
}

/// NVTX event type ids for the two range styles and for domain creation.
struct EventTypes {
    push_pop: Vec<i64>,
    start_end: Vec<i64>,
    domain_create: Vec<i64>,
}

/// Reads the ids from `ENUM_NSYS_EVENT_TYPE` when the report has it, else uses the ids of
/// current exports (59/70 push/pop, 60/71 start/end, 75 domain create).
fn event_types(schema: &Schema<'_>) -> Result<EventTypes, String> {
    let mut t = EventTypes {
        push_pop: Vec::new(),
        start_end: Vec::new(),
        domain_create: Vec::new(),
    };
    if schema.has_table("ENUM_NSYS_EVENT_TYPE") {
        schema.report().query(
            "SELECT id, name FROM ENUM_NSYS_EVENT_TYPE",
            &[],
            &mut |row| {
                if let [Value::Int(id), Value::Text(name)] = row {
                    match name.as_str() {
                        "NvtxPushPopRange" | "NvtxtPushPopRange" => t.push_pop.push(*id),
                        "NvtxStartEndRange" | "NvtxtStartEndRange" => t.start_end.push(*id),
                        "NvtxDomainCreate" => t.domain_create.push(*id),
                        _ => {}
                    }
                }
                Ok(())
            },
        )?;
    }
    if t.push_pop.is_empty() && t.start_end.is_empty() {
        t = EventTypes {
            push_pop: vec![59, 70],
            start_end: vec![60, 71],
            domain_create: vec![75],
        };
    }
    Ok(t)
}

/// PID of a `globalTid`.
fn pid(global_tid: i64) -> i64 {
    global_tid / 0x100_0000 % 0x100_0000
}

/// The SQL expression for an event's text: StringIds[textId], else `text`.
fn text_expr(columns: &[String], strings: bool) -> &'static str {
    let has = |c: &str| columns.iter().any(|have| have == c);
    match (has("textId") && strings, has("text")) {
        (true, true) => "coalesce(s.value, e.text)",
        (true, false) => "s.value",
        (false, true) => "e.text",
        (false, false) => "NULL",
    }
}

fn ranges(
    schema: &Schema<'_>,
    columns: &[String],
    strings: bool,
    out: &mut Output,
) -> Result<Vec<Group>, String> {
    let report = schema.report();
    let types = event_types(schema)?;
    let has = |c: &str| columns.iter().any(|have| have == c);
    let text = text_expr(columns, strings);
    let join = if has("textId") && strings {
        "LEFT JOIN StringIds AS s ON s.id = e.textId"
    } else {
        ""
    };
    let domain = if has("domainId") { "e.domainId" } else { "0" };
    let tid = if has("globalTid") { "e.globalTid" } else { "0" };
    let ids = |v: &[i64]| {
        let list: Vec<String> = v.iter().map(i64::to_string).collect();
        list.join(",")
    };

    // (domainId, PID) -> (start, name) of the earliest domain creation.
    let mut domains: HashMap<(i64, i64), (i64, String)> = HashMap::new();
    if !types.domain_create.is_empty() {
        let sql = format!(
            "SELECT {domain}, {tid}, e.start, {text} FROM {TABLE} AS e {join} \
             WHERE e.eventType IN ({})",
            ids(&types.domain_create)
        );
        report.query(&sql, &[], &mut |row| {
            if let [d, t, Value::Int(start), name] = row {
                let key = (d.as_int().unwrap_or(0), pid(t.as_int().unwrap_or(0)));
                let name = name.as_text().unwrap_or_default().to_owned();
                let e = domains.entry(key).or_insert((*start, name.clone()));
                if *start < e.0 {
                    *e = (*start, name);
                }
            }
            Ok(())
        })?;
    }

    let mut groups: HashMap<(bool, String), Group> = HashMap::new();
    let (mut open, mut unnamed) = (0u64, 0u64);
    let sql = format!(
        "SELECT e.start, e.end, e.eventType, {domain}, {tid}, {text} FROM {TABLE} AS e {join} \
         WHERE e.eventType IN ({}, {})",
        ids(&types.push_pop),
        ids(&types.start_end)
    );
    report.query(&sql, &[], &mut |row| {
        let [start, end, Value::Int(kind), d, t, text] = row else {
            return Err(format!("unexpected row from {TABLE}: {row:?}"));
        };
        let (Value::Int(start), Value::Int(end)) = (start, end) else {
            open += 1;
            return Ok(());
        };
        let push_pop = types.push_pop.contains(kind);
        let d = d.as_int().unwrap_or(0);
        let domain_name = match domains.get(&(d, pid(t.as_int().unwrap_or(0)))) {
            Some((_, name)) => name.as_str(),
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
