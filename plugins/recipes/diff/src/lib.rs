//! The `diff` recipe: two reports' CUDA kernel statistics side by side, as a component of the
//! `multi-recipe` world (wit/recipe.wit). RECIPES.md says only that `diff` "compares two runs
//! of the same statistical recipe"; ours compares `cuda_gpu_kern_sum` (docs/recipes.md).
//!
//! ```text
//!  map(report 0) ── kernels::kernel_summary ──> partial A ─┐
//!  map(report 1) ── kernels::kernel_summary ──> partial B ─┴─ reduce ── compare::diff_table
//! ```

mod compare;
mod kernels;

use nsight_recipe_sdk::{Args, Output, Report, STATS_ARGUMENTS};

/// The canonical-ABI glue generated from the `multi-recipe` world of wit/recipe.wit.
#[allow(
    unsafe_code,
    reason = "wit-bindgen generates the canonical ABI glue as unsafe fns"
)]
mod component {
    wit_bindgen::generate!({
        world: "multi-recipe",
        path: "../../../wit",
    });

    use super::Diff;
    export!(Diff);

    pub use nsight::recipe::host::{log, Level};
}

/// The SDK's edge to the bindings, kept in a module so that every item of it is used.
mod glue {
    use super::component;
    nsight_recipe_sdk::wit_glue!(component);

    /// Runs the map step on this sandbox's report.
    pub fn map(args: Vec<(String, String)>) -> Result<component::Output, String> {
        wit_run(args, super::map)
    }

    /// The SDK form of a partial result.
    pub fn from_wit(o: component::Output) -> nsight_recipe_sdk::Output {
        use component::nsight::recipe::types as w;
        let column = |c: w::Column| nsight_recipe_sdk::Column {
            name: c.name,
            kind: match c.kind {
                w::ColumnKind::Int => nsight_recipe_sdk::ColumnKind::Int,
                w::ColumnKind::Real => nsight_recipe_sdk::ColumnKind::Real,
                w::ColumnKind::Text => nsight_recipe_sdk::ColumnKind::Text,
            },
            unit: c.unit,
        };
        nsight_recipe_sdk::Output {
            tables: o
                .tables
                .into_iter()
                .map(|t| nsight_recipe_sdk::Table {
                    name: t.name,
                    columns: t.columns.into_iter().map(column).collect(),
                    rows: t
                        .rows
                        .into_iter()
                        .map(|r| r.into_iter().map(sdk_value).collect())
                        .collect(),
                })
                .collect(),
            notes: o.notes,
            figures: Vec::new(),
        }
    }

    pub fn to_wit(o: nsight_recipe_sdk::Output) -> component::Output {
        to_wit_output(o)
    }
}

use component::{log, Level, RecipeInfo};

/// The arguments `diff` accepts (both reports get the same ones).
const KNOWN: &[&str] = &["timeunit", "name"];

struct Diff;

impl component::Guest for Diff {
    fn describe() -> RecipeInfo {
        RecipeInfo {
            name: "diff".into(),
            display_name: "CUDA GPU Kernel Summary Diff".into(),
            description: "Compares the CUDA kernel statistics (cuda_gpu_kern_sum) of two \
                          reports per kernel name: each statistic in report A, in report B \
                          and the change B - A; kernels in only one report are listed too. \
                          Give exactly two reports, A first."
                .into(),
            arguments: glue::wit_arguments(STATS_ARGUMENTS.iter().take(1).chain(&[(
                "name",
                "Kernel names: demangled (full signature), base (short name) or mangled.",
                Some("demangled"),
            )])),
        }
    }

    fn map(
        args: Vec<(String, String)>,
        index: u32,
        count: u32,
    ) -> Result<component::Output, String> {
        if count != 2 {
            return Err(format!(
                "diff compares exactly two reports (A, then B); got {count}"
            ));
        }
        log(Level::Debug, &format!("diff: map report {index}"));
        glue::map(args)
    }

    fn reduce(
        args: Vec<(String, String)>,
        partials: Vec<(String, component::Output)>,
    ) -> Result<component::Output, String> {
        glue::log_panics();
        let partials: Vec<(String, Output)> = partials
            .into_iter()
            .map(|(label, o)| (label, glue::from_wit(o)))
            .collect();
        reduce(&args, &partials).map(glue::to_wit)
    }
}

fn map(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, KNOWN)?;
    args.time_unit()?;
    kernels::kernel_summary(report, &args)
}

fn reduce(args: &[(String, String)], partials: &[(String, Output)]) -> Result<Output, String> {
    let args = Args::parse(args, KNOWN)?;
    let unit = args.time_unit()?;
    let [(label_a, a), (label_b, b)] = partials else {
        return Err(format!(
            "diff compares exactly two reports (A, then B); got {}",
            partials.len()
        ));
    };
    let (sa, sb) = (
        compare::read_partial(label_a, a)?,
        compare::read_partial(label_b, b)?,
    );
    let mut out = Output::default();
    out.note(format!("A is {label_a}, B is {label_b}; every Δ is B - A"));
    for (label, partial) in partials {
        for note in &partial.notes {
            out.note(format!("{label}: {note}"));
        }
    }
    let only_a = sa.keys().filter(|k| !sb.contains_key(*k)).count();
    let only_b = sb.keys().filter(|k| !sa.contains_key(*k)).count();
    if only_a + only_b > 0 {
        out.note(format!(
            "{only_a} kernel names only in A ({label_a}), {only_b} only in B ({label_b})"
        ));
    }
    out.tables.push(compare::diff_table(&sa, &sb, unit));
    Ok(out)
}
