//! The `cuda_gpu_kern_pace` recipe (CUDA GPU Kernel Pacing), as a component of the `recipe`
//! world: how regularly one kernel, named by `--name`, runs through the application. Each of
//! its instances marks an iteration; the recipe lists them in start order with their
//! duration, the gap since the previous instance ended and the sum of the gaps so far, adds
//! the statistics of durations and gaps, and draws both over the iterations.
//!
//! ```text
//!  StringIds (value = --name) ─ ids ─> CUPTI_ACTIVITY_KIND_KERNEL (demangledName, else shortName)
//!        └─ rows by (start, end, rowid) ─> iterations table ─> stats table + SVG line chart
//! ```
//! This module owns the argument rules and which kernels count; the tables, statistics and
//! chart are the SDK's (`nsight_recipe_sdk::pace`). It must not read other tables than the
//! kernels and `StringIds`.

use std::collections::BTreeSet;

use nsight_recipe_sdk::{
    pace::{pace_output, Instance},
    string_values, time_window, Args, Output, Report, Schema, Value, FILTER_ARGS, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(KernPace);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const TABLE: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
const NAME: &str = "cuda_gpu_kern_pace";
/// How many kernel names an error about `--name` lists.
const NAMES_SHOWN: usize = 10;

struct KernPace;

impl Guest for KernPace {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "cuda_gpu_kern_pace: describe");
        let own = [(
            "name",
            "Name of the kernel whose instances mark the iterations (required): its demangled \
             name, or its short name when no kernel has that demangled name.",
            None,
        )];
        RecipeInfo {
            name: NAME.into(),
            display_name: "CUDA GPU Kernel Pacing".into(),
            description: "The progress and consistency of one CUDA kernel through the \
                          application: each instance in start order with its duration, the gap \
                          since the previous instance ended and the gaps so far; statistics of \
                          both, and a chart of both over the iterations."
                .into(),
            arguments: wit_arguments(own.iter().chain(&STATS_ARGUMENTS)),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, kern_pace)
    }
}

fn kern_pace(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["name", "timeunit", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let unit = args.time_unit()?;
    let wanted = args.get("name").map(str::to_owned);
    let mut out = Output::default();
    let schema = Schema::read(report);
    schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let mut instances = Vec::new();
    let columns = schema.require(
        &mut out,
        TABLE,
        &["start", "end", "demangledName"],
        "the profile has no CUDA kernels",
    );
    if let Some(columns) = columns {
        let has = |c: &str| columns.iter().any(|have| have == c);
        let Some(wanted) = wanted.as_deref().filter(|w| !w.is_empty()) else {
            return Err(format!(
                "cuda_gpu_kern_pace needs --name KERNEL (the kernel whose instances mark the \
                 iterations); {}",
                known_names(report)?
            ));
        };
        let ids = name_ids(report, wanted)?;
        let by = ["demangledName", "shortName"]
            .into_iter()
            .filter(|c| has(c))
            .find_map(|c| match count_named(report, c, &ids) {
                Ok(0) => None,
                Ok(_) => Some(Ok(c)),
                Err(e) => Some(Err(e)),
            })
            .transpose()?;
        let Some(by) = by else {
            return Err(format!(
                "no kernel named {wanted:?} in this report (neither a demangled nor a short \
                 name); {}",
                known_names(report)?
            ));
        };
        let mut opt = |c: &str, expr: &str| {
            if has(c) {
                expr.to_owned()
            } else {
                out.note(format!("column {TABLE}.{c} not in this report; left empty"));
                "NULL".to_owned()
            }
        };
        let pid = opt("globalPid", "k.globalPid / 16777216 % 16777216");
        let device = opt("deviceId", "k.deviceId");
        let stream = opt("streamId", "k.streamId");
        let marks = vec!["?"; ids.len()].join(",");
        let params: Vec<Value> = ids.iter().map(|&i| Value::Int(i)).collect();
        let sql = format!(
            "SELECT k.start, k.\"end\", {pid}, {device}, {stream} FROM {TABLE} AS k \
             WHERE k.{by} IN ({marks}) AND k.start IS NOT NULL AND k.\"end\" IS NOT NULL \
             AND {} ORDER BY k.start, k.\"end\", k.rowid",
            window.sql("k")
        );
        report.query(&sql, &params, &mut |row| {
            let int = |i: usize| match row.get(i) {
                Some(Value::Int(v)) => Some(*v),
                _ => None,
            };
            if let (Some(start), Some(end)) = (int(0), int(1)) {
                instances.push(Instance {
                    start,
                    end,
                    pid: int(2),
                    place: int(3),
                    lane: int(4),
                });
            }
            Ok(())
        })?;
        if by == "shortName" {
            out.note(format!(
                "{wanted:?} is a short kernel name (no kernel has that demangled name): every \
                 kernel with that short name counts"
            ));
        }
        if instances.is_empty() {
            out.note(format!(
                "kernel {wanted:?} has no instance inside the time window; nothing to pace"
            ));
        }
    }
    pace_output(
        &mut out,
        NAME,
        wanted.as_deref().unwrap_or_default(),
        unit,
        &instances,
        ["PID", "Device", "Stream"],
    );
    Ok(out)
}

/// The `StringIds` ids whose value is `name`.
fn name_ids(report: &dyn Report, name: &str) -> Result<BTreeSet<i64>, String> {
    let mut ids = BTreeSet::new();
    report.query(
        "SELECT id FROM StringIds WHERE value = ?",
        &[Value::Text(name.to_owned())],
        &mut |row| {
            if let Some(Value::Int(id)) = row.first() {
                ids.insert(*id);
            }
            Ok(())
        },
    )?;
    Ok(ids)
}

/// How many kernels have `column` among `ids`.
fn count_named(report: &dyn Report, column: &str, ids: &BTreeSet<i64>) -> Result<i64, String> {
    if ids.is_empty() {
        return Ok(0);
    }
    let marks = vec!["?"; ids.len()].join(",");
    let params: Vec<Value> = ids.iter().map(|&i| Value::Int(i)).collect();
    let mut n = 0;
    report.query(
        &format!("SELECT count(*) FROM {TABLE} WHERE {column} IN ({marks})"),
        &params,
        &mut |row| {
            if let Some(Value::Int(c)) = row.first() {
                n = *c;
            }
            Ok(())
        },
    )?;
    Ok(n)
}

/// "the report's kernels, most instances first: a (12), b (3), ... and N more" (demangled
/// names), for errors about `--name`.
fn known_names(report: &dyn Report) -> Result<String, String> {
    let mut counts: Vec<(i64, i64)> = Vec::new();
    report.query(
        &format!(
            "SELECT demangledName, count(*) FROM {TABLE} WHERE demangledName IS NOT NULL \
             GROUP BY demangledName ORDER BY 2 DESC, 1"
        ),
        &[],
        &mut |row| {
            if let [Value::Int(id), Value::Int(n)] = row {
                counts.push((*id, *n));
            }
            Ok(())
        },
    )?;
    if counts.is_empty() {
        return Ok("the report has no named kernels".to_owned());
    }
    let shown: BTreeSet<i64> = counts.iter().take(NAMES_SHOWN).map(|c| c.0).collect();
    let names = string_values(report, &shown)?;
    let mut list: Vec<String> = counts
        .iter()
        .take(NAMES_SHOWN)
        .map(|(id, n)| {
            let name = names.get(id).map_or("?", String::as_str);
            format!("{name:?} ({n})")
        })
        .collect();
    if counts.len() > NAMES_SHOWN {
        list.push(format!("and {} more", counts.len() - NAMES_SHOWN));
    }
    Ok(format!(
        "the report's kernels, most instances first: {}",
        list.join(", ")
    ))
}
