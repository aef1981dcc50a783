//! `analysis run <name> [args..] --input FILE.sqlite [--input FILE2.sqlite] [--output DIR]`:
//! the local form, with no server (a `.nsys-rep`/`.qdrep` input is exported by the nsys on
//! PATH first); and `analysis list`/`analysis info <name>` with no server, from the same
//! recipes directory (with `--local` or `--recipes-dir`, or when there is no configuration). This module is the glue only: it picks the recipes and
//! cache directories, and prints (flags after the recipe's arguments: analysis_flags.rs); the run
//! itself is `nsight_recipe_host::local::run_local` (the service's host, limits and outputs).
//!
//! ```text
//!  RunArgs ──local_request──> LocalRequest ──run_local──> LocalRun ──> tables on stdout,
//!                                                                      load/run times on stderr
//! ```

use std::{
    io::Write as _,
    path::{Path, PathBuf},
};

use nsight_contracts::analysis::{RecipeArgument, RecipeList, RecipeView};
use nsight_recipe_host::{
    local::{describe_local, run_local, LocalError, LocalRequest},
    nsys_export::find_nsys,
    Limits, RecipeInfo,
};

use crate::analysis::{self, AnalysisCommand, CatalogArgs, Outcome, RunArgs};

/// Where the compiled recipes are: `--recipes-dir`/`NSIGHT_RECIPES_DIR`, else
/// `$NSIGHT_WASM_DIR/recipes` (where `cargo xtask build-wasm` puts them), else `recipes/` next
/// to the executable.
fn recipes_dir(given: Option<PathBuf>) -> PathBuf {
    given
        .or_else(|| std::env::var_os("NSIGHT_RECIPES_DIR").map(PathBuf::from))
        .or_else(|| std::env::var_os("NSIGHT_WASM_DIR").map(|d| Path::new(&d).join("recipes")))
        .or_else(|| {
            std::env::current_exe()
                .ok()
                .and_then(|e| e.parent().map(|d| d.join("recipes")))
        })
        .unwrap_or_else(|| PathBuf::from("recipes"))
}

/// The compiled-component cache: `--cache-dir`/`NSIGHT_RECIPE_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/nsight-cloud/compiled`, else `~/.cache/nsight-cloud/compiled`.
fn cache_dir(given: Option<PathBuf>) -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    given
        .or_else(|| env("NSIGHT_RECIPE_CACHE_DIR"))
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("nsight-cloud/compiled")))
        .or_else(|| env("HOME").map(|d| d.join(".cache/nsight-cloud/compiled")))
}

/// The local request when `command` is `run` with `--input` (main.rs has already moved the
/// flags given after the recipe's arguments into their fields); `None` for everything that
/// goes to the server.
pub fn local_request(command: &AnalysisCommand) -> Option<Result<LocalRequest, LocalError>> {
    let AnalysisCommand::Run(run) = command else {
        return None;
    };
    if run.input.is_empty() {
        return None;
    }
    Some(build(run))
}

fn build(run: &RunArgs) -> Result<LocalRequest, LocalError> {
    if !run.session.is_empty() || run.collection.is_some() || run.wait {
        return Err(LocalError::Args(
            "--session, --collection and --wait are for jobs on the server; with --input the \
             recipe runs here on the given files"
                .into(),
        ));
    }
    Ok(LocalRequest {
        recipe: run.name.clone(),
        args: run.args.clone(),
        inputs: run.input.clone(),
        output_dir: run.output_dir.clone(),
        recipes_dir: recipes_dir(run.recipes_dir.clone()),
        cache_dir: cache_dir(run.cache_dir.clone()),
        limits: Limits::default(),
        nsys: find_nsys(std::env::var_os("PATH").as_deref()),
    })
}

/// `analysis list` or `analysis info` answered here: when `--local` or `--recipes-dir` is
/// given, or there is no configuration file (so no server to ask). `None` otherwise.
pub fn catalog_request(
    command: &AnalysisCommand,
    has_config: bool,
) -> Option<(&CatalogArgs, Option<&str>)> {
    let (catalog, only) = match command {
        AnalysisCommand::List(catalog) => (catalog, None),
        AnalysisCommand::Info { name, catalog } => (catalog, Some(name.as_str())),
        _ => return None,
    };
    (catalog.local || catalog.recipes_dir.is_some() || !has_config).then_some((catalog, only))
}

/// The wire form of a recipe's description, as the service serves it.
fn view(info: RecipeInfo) -> RecipeView {
    RecipeView {
        arguments: info
            .arguments
            .into_iter()
            .map(|a| RecipeArgument {
                default: a.default_value,
                description: a.description,
                name: a.name,
            })
            .collect(),
        description: info.description,
        display_name: info.display_name,
        name: info.name,
    }
}

/// Lists or describes the local recipes, with the same tables and JSON as the server's answer;
/// warnings (a component left out, an unusable cache) on stderr.
pub fn catalog(catalog: &CatalogArgs, only: Option<&str>) -> Result<Outcome, LocalError> {
    let dir = recipes_dir(catalog.recipes_dir.clone());
    let cache = cache_dir(catalog.cache_dir.clone());
    let (infos, warnings) = describe_local(&dir, cache.as_deref(), only)?;
    let mut stderr = std::io::stderr().lock();
    for w in &warnings {
        let _ = writeln!(stderr, "warning: {w}");
    }
    let mut views: Vec<RecipeView> = infos.into_iter().map(view).collect();
    let one = if only.is_some() { views.pop() } else { None };
    let (json, table) = match one {
        Some(recipe) => (
            serde_json::to_value(&recipe).unwrap_or_default(),
            analysis::recipe_info(&recipe),
        ),
        None => {
            views.sort_by(|a, b| a.name.cmp(&b.name));
            let list = RecipeList { recipes: views };
            (
                serde_json::to_value(&list).unwrap_or_default(),
                analysis::recipes_table(&list),
            )
        }
    };
    Ok(Outcome {
        json,
        table,
        failed: false,
    })
}

/// Runs the local form and prints the tables (or JSON) on stdout, the load and run times and
/// any warning on stderr.
pub fn run(request: Result<LocalRequest, LocalError>, json: bool) -> Result<(), LocalError> {
    let done = run_local(&request?)?;
    let mut stderr = std::io::stderr().lock();
    for w in &done.warnings {
        let _ = writeln!(stderr, "warning: {w}");
    }
    let _ = writeln!(stderr, "{}", done.load_line());
    let text = if json {
        format!(
            "{}\n",
            serde_json::to_string_pretty(&done.to_json()).unwrap_or_default()
        )
    } else {
        done.to_text()
    };
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_cache_dir_wins() {
        assert_eq!(
            cache_dir(Some(PathBuf::from("/c"))),
            Some(PathBuf::from("/c"))
        );
    }
}
