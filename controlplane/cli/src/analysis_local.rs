//! `analysis run <name> [args..] --input FILE.sqlite [--input FILE2.sqlite] [--output DIR]`:
//! the local form, with no server. This module is the glue only: it picks the recipes and
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

use nsight_recipe_host::{
    local::{run_local, LocalError, LocalRequest},
    Limits,
};

use crate::analysis::{AnalysisCommand, RunArgs};

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
