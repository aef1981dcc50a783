//! `analysis run <name> [args..] --input FILE.sqlite [--input FILE2.sqlite] [--output DIR]`:
//! the local form, with no server. This module is the glue only: it splits the local flags
//! from the recipe's arguments, picks the recipes and cache directories, and prints; the run
//! itself is `nsight_analysis::local::run_local` (the service's host, limits and outputs).
//!
//! ```text
//!  RunArgs ──local_request──> LocalRequest ──run_local──> LocalRun ──> tables on stdout,
//!                                                                      load/run times on stderr
//! ```

use std::{
    io::Write as _,
    path::{Path, PathBuf},
};

use nsight_analysis::{
    local::{run_local, LocalError, LocalRequest},
    Limits,
};

use crate::analysis::{AnalysisCommand, RunArgs};

/// The flags of the local form that may also come after the recipe's arguments (which clap
/// collects as trailing values).
const LOCAL_FLAGS: [&str; 4] = ["input", "output", "recipes-dir", "cache-dir"];

/// The recipe arguments without the local flags, and the local flags found among them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Split {
    pub recipe_args: Vec<String>,
    pub inputs: Vec<PathBuf>,
    pub output: Option<PathBuf>,
    pub recipes_dir: Option<PathBuf>,
    pub cache_dir: Option<PathBuf>,
}

/// Takes `--input X`, `--input=X` (and the other [`LOCAL_FLAGS`]) out of `args`.
pub fn split_local_flags(args: &[String]) -> Result<Split, LocalError> {
    let mut split = Split::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let flag = arg.strip_prefix("--").and_then(|f| {
            let (name, value) = f.split_once('=').map_or((f, None), |(n, v)| (n, Some(v)));
            LOCAL_FLAGS.contains(&name).then_some((name, value))
        });
        let Some((name, value)) = flag else {
            split.recipe_args.push(arg.clone());
            continue;
        };
        let value = match value {
            Some(v) => v.to_owned(),
            None => rest
                .next()
                .cloned()
                .ok_or_else(|| LocalError::Args(format!("--{name} needs a value")))?,
        };
        let value = PathBuf::from(value);
        match name {
            "input" => split.inputs.push(value),
            "output" => split.output = Some(value),
            "recipes-dir" => split.recipes_dir = Some(value),
            _ => split.cache_dir = Some(value),
        }
    }
    Ok(split)
}

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

/// The local request when `command` is `run` with `--input` (given before or after the
/// recipe's arguments); `None` for everything that goes to the server.
pub fn local_request(command: &AnalysisCommand) -> Option<Result<LocalRequest, LocalError>> {
    let AnalysisCommand::Run(run) = command else {
        return None;
    };
    let split = match split_local_flags(&run.args) {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    if run.input.is_empty() && split.inputs.is_empty() {
        return None;
    }
    Some(build(run, split))
}

fn build(run: &RunArgs, split: Split) -> Result<LocalRequest, LocalError> {
    if !run.session.is_empty() || run.collection.is_some() || run.wait {
        return Err(LocalError::Args(
            "--session, --collection and --wait are for jobs on the server; with --input the \
             recipe runs here on the given files"
                .into(),
        ));
    }
    Ok(LocalRequest {
        recipe: run.name.clone(),
        args: split.recipe_args,
        inputs: run.input.iter().cloned().chain(split.inputs).collect(),
        output_dir: split.output.or_else(|| run.output_dir.clone()),
        recipes_dir: recipes_dir(split.recipes_dir.or_else(|| run.recipes_dir.clone())),
        cache_dir: cache_dir(split.cache_dir.or_else(|| run.cache_dir.clone())),
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

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn local_flags_come_out_of_the_recipe_arguments() {
        let s = split_local_flags(&strings(&[
            "--timeunit",
            "usec",
            "--input",
            "a.sqlite",
            "--input=b.sqlite",
            "--output",
            "out",
            "--name=base",
        ]))
        .unwrap();
        assert_eq!(
            s.recipe_args,
            strings(&["--timeunit", "usec", "--name=base"])
        );
        assert_eq!(
            s.inputs,
            [PathBuf::from("a.sqlite"), PathBuf::from("b.sqlite")]
        );
        assert_eq!(s.output, Some(PathBuf::from("out")));
        let err = split_local_flags(&strings(&["--input"])).unwrap_err();
        assert_eq!(err.to_string(), "--input needs a value");
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn an_explicit_cache_dir_wins() {
        assert_eq!(
            cache_dir(Some(PathBuf::from("/c"))),
            Some(PathBuf::from("/c"))
        );
    }
}
