//! The `nvtx_pace` recipe (NVTX Pacing), as a component of the `recipe` world: how regularly
//! one NVTX range, named by `--name`, recurs through the application. Each of its instances
//! marks an iteration; the tables and chart are those of `cuda_gpu_kern_pace`
//! (`nsight_recipe_sdk::pace`).
//!
//! ```text
//!  NVTX_EVENTS (push/pop and start/end ranges with an end, text = --name, any domain)
//!        └─ rows by (start, end, rowid) ─> iterations table ─> stats table + SVG line chart
//! ```
//! This module owns the argument rules and which ranges count (range styles and text by the
//! SDK's `nvtx` rules); it must not read other tables than `NVTX_EVENTS`, its enum and
//! `StringIds`.

use nsight_recipe_sdk::{
    nvtx::{EventTypes, NvtxSql, NVTX_TABLE as TABLE},
    pace::{pace_output, Instance},
    time_window, Args, Output, Report, Schema, Value, FILTER_ARGS, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(NvtxPace);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const NAME: &str = "nvtx_pace";
/// How many range names an error about `--name` lists.
const NAMES_SHOWN: usize = 10;

struct NvtxPace;

impl Guest for NvtxPace {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "nvtx_pace: describe");
        let own = [(
            "name",
            "Text of the NVTX range whose instances mark the iterations (required; push/pop or \
             start/end ranges, in any domain).",
            None,
        )];
        RecipeInfo {
            name: NAME.into(),
            display_name: "NVTX Pacing".into(),
            description: "The progress and consistency of one NVTX range through the \
                          application: each instance in start order with its duration, the gap \
                          since the previous instance ended and the gaps so far; statistics of \
                          both, and a chart of both over the iterations."
                .into(),
            arguments: wit_arguments(own.iter().chain(&STATS_ARGUMENTS)),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, nvtx_pace)
    }
}

fn nvtx_pace(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["name", "timeunit", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let unit = args.time_unit()?;
    let wanted = args.get("name").map(str::to_owned);
    let mut out = Output::default();
    let schema = Schema::read(report);
    let strings = schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let mut instances = Vec::new();
    if let Some(columns) = schema.require(
        &mut out,
        TABLE,
        &["start", "end", "eventType"],
        "the profile has no NVTX ranges",
    ) {
        let types = EventTypes::read(&schema)?;
        let sql = NvtxSql::new(&columns, strings);
        let ranges = format!(
            "FROM {TABLE} AS e {} WHERE e.eventType IN ({}) AND e.start IS NOT NULL \
             AND e.\"end\" IS NOT NULL",
            sql.join,
            types.range_list()
        );
        let Some(wanted) = wanted.as_deref().filter(|w| !w.is_empty()) else {
            return Err(format!(
                "nvtx_pace needs --name RANGE (the NVTX range whose instances mark the \
                 iterations); {}",
                known_names(report, &ranges, sql.text)?
            ));
        };
        let q = format!(
            "SELECT e.start, e.\"end\", {tid}, {domain} {ranges} AND {text} = ? AND {} \
             ORDER BY e.start, e.\"end\", e.rowid",
            window.sql("e"),
            tid = sql.tid,
            domain = sql.domain,
            text = sql.text,
        );
        report.query(&q, &[Value::Text(wanted.to_owned())], &mut |row| {
            let int = |i: usize| match row.get(i) {
                Some(Value::Int(v)) => Some(*v),
                _ => None,
            };
            if let (Some(start), Some(end)) = (int(0), int(1)) {
                let tid = int(2);
                instances.push(Instance {
                    start,
                    end,
                    pid: tid.map(|t| t / 0x100_0000 % 0x100_0000),
                    place: tid.map(|t| t % 0x100_0000),
                    lane: int(3),
                });
            }
            Ok(())
        })?;
        if instances.is_empty() {
            let mut n = 0;
            report.query(
                &format!("SELECT count(*) {ranges} AND {} = ?", sql.text),
                &[Value::Text(wanted.to_owned())],
                &mut |row| {
                    if let Some(Value::Int(c)) = row.first() {
                        n = *c;
                    }
                    Ok(())
                },
            )?;
            if n == 0 {
                return Err(format!(
                    "no NVTX range named {wanted:?} in this report; {}",
                    known_names(report, &ranges, sql.text)?
                ));
            }
            out.note(format!(
                "range {wanted:?} has no instance inside the time window; nothing to pace"
            ));
        }
    }
    pace_output(
        &mut out,
        NAME,
        wanted.as_deref().unwrap_or_default(),
        unit,
        &instances,
        ["PID", "TID", "Domain ID"],
    );
    Ok(out)
}

/// "the report's NVTX ranges, most instances first: a (12), b (3), ... and N more", for
/// errors about `--name`.
fn known_names(report: &dyn Report, ranges: &str, text: &str) -> Result<String, String> {
    let mut counts: Vec<(String, i64)> = Vec::new();
    report.query(
        &format!(
            "SELECT {text} AS t, count(*) {ranges} AND t IS NOT NULL GROUP BY t \
             ORDER BY 2 DESC, 1"
        ),
        &[],
        &mut |row| {
            if let [Value::Text(t), Value::Int(n)] = row {
                counts.push((t.clone(), *n));
            }
            Ok(())
        },
    )?;
    if counts.is_empty() {
        return Ok("the report has no named NVTX ranges".to_owned());
    }
    let mut list: Vec<String> = counts
        .iter()
        .take(NAMES_SHOWN)
        .map(|(t, n)| format!("{t:?} ({n})"))
        .collect();
    if counts.len() > NAMES_SHOWN {
        list.push(format!("and {} more", counts.len() - NAMES_SHOWN));
    }
    Ok(format!(
        "the report's NVTX ranges, most instances first: {}",
        list.join(", ")
    ))
}
