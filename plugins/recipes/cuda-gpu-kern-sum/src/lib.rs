//! The `cuda_gpu_kern_sum` recipe (CUDA GPU kernel summary), as a component of the `recipe`
//! world.
//!
//! ```text
//!  CUPTI_ACTIVITY_KIND_KERNEL ⋈ StringIds ─ name -> durations (end - start) ─> summary
//! ```
//! Names are `demangledName` by default; `--name base` uses `shortName` and `--name mangled`
//! uses `mangledName`, each falling back to the demangled name where missing (NVIDIA's
//! `cuda_gpu_kern_sum:base` and `:mangled`). `--name nvtx-name` (alone or with a variant,
//! `nvtx-name:base`) prefixes each name with the innermost NVTX push/pop range around the CUDA
//! API call that launched the kernel, as `<range>:<kernel>` (`nsight_recipe_sdk::enclosing`;
//! NVIDIA's `:nvtx-name`). Rows are read in columnar batches (`query_columns`: durations and
//! name ids as whole `Vec<i64>`s) and grouped by name id; the names are read once per distinct
//! id (`string_values`). The statistics and their order come from
//! `nsight-recipe-sdk` (docs/recipes.md).

use std::collections::{hash_map::Entry, BTreeSet, HashMap};

use nsight_recipe_sdk::{
    enclosing::{LaunchCalls, PushPopRanges},
    string_values, summary_table, time_window, Args, FastMap, Group, Output, Report, Schema,
    SummarySpec, Window, FILTER_ARGS, STATS_ARGUMENTS,
};

nsight_recipe_sdk::recipe_component!(KernSum);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const TABLE: &str = "CUPTI_ACTIVITY_KIND_KERNEL";

struct KernSum;

impl Guest for KernSum {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "cuda_gpu_kern_sum: describe");
        RecipeInfo {
            name: "cuda_gpu_kern_sum".into(),
            display_name: "CUDA GPU Kernel Summary".into(),
            description: "Time spent executing each CUDA kernel on the GPU, per kernel name: \
                          count, total, average, median, min, max and standard deviation, \
                          sorted by total time."
                .into(),
            arguments: wit_arguments(
                STATS_ARGUMENTS
                    .iter()
                    .take(1)
                    .chain(&[(
                        "name",
                        "Kernel names: demangled (full signature), base (short name) or mangled; \
                     nvtx-name (alone or as nvtx-name:base) prefixes the innermost NVTX range \
                     around the launch.",
                        Some("demangled"),
                    )])
                    .chain(&STATS_ARGUMENTS[1..]),
            ),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, kern_sum)
    }
}

fn kern_sum(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["timeunit", "name", FILTER_ARGS[0], FILTER_ARGS[1]])?;
    let (name_column, nvtx_name) = parse_name(args.get("name").unwrap_or("demangled"))?;
    let spec = SummarySpec {
        table: "cuda_gpu_kern_sum",
        count_header: "Instances",
        labels: &["Name"],
        tie_order: &[0],
        ties: nsight_recipe_sdk::Ties::CountThenLabels,
        unit: args.time_unit()?,
    };
    let mut out = Output::default();
    let schema = Schema::read(report);
    let strings = schema.check_nsys_export(&mut out);
    let window = time_window(&args, &schema, &mut out)?;
    let groups = match schema.require(
        &mut out,
        TABLE,
        &["start", "end", "demangledName"],
        "the profile has no CUDA kernels",
    ) {
        Some(columns) if strings => {
            let prefixes = if nvtx_name {
                Prefixes::read(&schema, &columns, &mut out)?
            } else {
                None
            };
            kernels(
                report,
                &columns,
                name_column,
                prefixes.as_ref(),
                &window,
                &mut out,
            )?
        }
        _ => Vec::new(),
    };
    out.tables.push(summary_table(&spec, groups));
    Ok(out)
}

/// `--name`: a variant (`demangled`, `base`, `mangled`) and/or `nvtx-name`, joined by `:`.
/// Returns the name column (None for demangled) and whether to prefix NVTX ranges.
fn parse_name(value: &str) -> Result<(Option<&'static str>, bool), String> {
    let bad = || {
        format!(
            "--name {value}: expected demangled, base or mangled, optionally with nvtx-name \
             (e.g. nvtx-name or nvtx-name:base)"
        )
    };
    let (mut column, mut variant, mut nvtx) = (None, false, false);
    for part in value.split(':') {
        let c = match part {
            "nvtx-name" if !nvtx => {
                nvtx = true;
                continue;
            }
            "demangled" => None,
            "base" => Some("shortName"),
            "mangled" => Some("mangledName"),
            _ => return Err(bad()),
        };
        if variant {
            return Err(bad());
        }
        (column, variant) = (c, true);
    }
    Ok((column, nvtx))
}

/// What `nvtx-name` needs: the launch calls and the push/pop ranges.
struct Prefixes {
    calls: LaunchCalls,
    ranges: PushPopRanges,
}

impl Prefixes {
    /// `None` (with notes) when the report lacks something; names are then not prefixed.
    fn read(
        schema: &Schema<'_>,
        kernel_columns: &[String],
        out: &mut Output,
    ) -> Result<Option<Self>, String> {
        for c in ["globalPid", "correlationId"] {
            if !kernel_columns.iter().any(|have| have == c) {
                out.note(format!(
                    "column {TABLE}.{c} not in this report; kernels are not prefixed with NVTX \
                     ranges"
                ));
                return Ok(None);
            }
        }
        // The ranges first: most reports without NVTX have many runtime calls.
        let Some(ranges) = PushPopRanges::read(schema, out)? else {
            return Ok(None);
        };
        let Some(calls) = LaunchCalls::read(schema, out)? else {
            return Ok(None);
        };
        Ok(Some(Self { calls, ranges }))
    }

    /// The range text around the launch of the kernel with these ids, if any.
    fn of(&self, global_pid: i64, correlation_id: i64) -> Option<&str> {
        let call = self.calls.get(global_pid, correlation_id)?;
        self.ranges.innermost(call)
    }
}

/// A kernel's group before names are looked up: (chosen name id, demangled name id, NVTX range).
type Key<'p> = (Option<i64>, Option<i64>, Option<&'p str>);

/// Durations grouped by [`Key`], in order of first appearance.
#[derive(Default)]
struct IdGroups<'p> {
    index: FastMap<Key<'p>, usize>,
    keys: Vec<Key<'p>>,
    durations: Vec<Vec<i64>>,
}

impl<'p> IdGroups<'p> {
    /// The index of `key`'s group, added if new.
    fn of(&mut self, key: Key<'p>) -> usize {
        *self.index.entry(key).or_insert_with(|| {
            self.keys.push(key);
            self.durations.push(Vec::new());
            self.keys.len() - 1
        })
    }
}

fn kernels(
    report: &dyn Report,
    columns: &[String],
    name_column: Option<&str>,
    prefixes: Option<&Prefixes>,
    window: &Window,
    out: &mut Output,
) -> Result<Vec<Group>, String> {
    // Rows carry name ids only (the chosen column's only when it is not the demangled one);
    // the names are read once per distinct id afterwards. Read in columnar batches.
    let mut select = vec!["k.end - k.start".to_owned(), "k.demangledName".to_owned()];
    let name_at = match name_column {
        Some(c) if columns.iter().any(|have| have == c) => {
            select.push(format!("k.{c}"));
            Some(select.len() - 1)
        }
        Some(c) => {
            out.note(format!(
                "column {TABLE}.{c} not in this report (older export); kernels are named by \
                 their demangled names"
            ));
            None
        }
        None => None,
    };
    let launch_at = prefixes.map(|_| {
        select.push("k.globalPid".into());
        select.push("k.correlationId".into());
        select.len() - 2
    });
    let sql = format!(
        "SELECT {} FROM {TABLE} AS k WHERE {}",
        select.join(", "),
        window.sql("k")
    );
    let mut groups = IdGroups::default();
    let mut incomplete = 0u64;
    report.query_columns(&sql, &[], &mut |columns| {
        let (durations, demangled) = (&columns[0], &columns[1]);
        if let (Some(d), Some(ids), None, None) = (
            durations.all_ints(),
            demangled.all_ints(),
            name_at,
            launch_at,
        ) {
            // The common case: every row complete, grouped by the demangled name id alone.
            let mut last: Option<(i64, usize)> = None;
            for (&duration, &id) in d.iter().zip(ids) {
                let g = match last {
                    Some((l, g)) if l == id => g,
                    _ => {
                        let g = groups.of((None, Some(id), None));
                        last = Some((id, g));
                        g
                    }
                };
                groups.durations[g].push(duration);
            }
            return Ok(());
        }
        let none = || Box::new(std::iter::repeat(None)) as Box<dyn Iterator<Item = Option<i64>>>;
        let names = name_at.map_or_else(none, |i| columns[i].ints());
        let pids = launch_at.map_or_else(none, |i| columns[i].ints());
        let correlations = launch_at.map_or_else(none, |i| columns[i + 1].ints());
        let rows = durations
            .ints()
            .zip(demangled.ints())
            .zip(names)
            .zip(pids.zip(correlations));
        for (((duration, demangled), name), (pid, correlation)) in rows {
            let Some(duration) = duration else {
                incomplete += 1;
                continue;
            };
            let range = prefixes.and_then(|p| p.of(pid?, correlation?));
            let g = groups.of((name, demangled, range));
            groups.durations[g].push(duration);
        }
        Ok(())
    })?;
    let ids: BTreeSet<i64> = groups
        .keys
        .iter()
        .flat_map(|(n, d, _)| n.iter().chain(d.iter()).copied())
        .collect();
    let strings = string_values(report, &ids)?;
    let lookup = |id: Option<i64>| id.and_then(|i| strings.get(&i));
    // The chosen name, else the demangled one, else empty (as a LEFT JOIN and coalesce),
    // after the NVTX range's text and a colon when there is one.
    let mut by_label: HashMap<String, Vec<i64>> = HashMap::new();
    for ((name, demangled, range), durations) in groups.keys.into_iter().zip(groups.durations) {
        let label = lookup(name)
            .or_else(|| lookup(demangled))
            .cloned()
            .unwrap_or_default();
        let label = match range {
            Some(r) => format!("{r}:{label}"),
            None => label,
        };
        match by_label.entry(label) {
            Entry::Vacant(e) => {
                e.insert(durations);
            }
            Entry::Occupied(mut e) => e.get_mut().extend(durations),
        }
    }
    if incomplete > 0 {
        out.note(format!(
            "{incomplete} kernels have no start or end and are left out"
        ));
    }
    Ok(by_label
        .into_iter()
        .map(|(name, durations)| Group {
            labels: vec![name],
            id: 0,
            durations,
        })
        .collect())
}
