//! Running a recipe on local report files with no server: the CLI's
//! `nsight-cloud analysis run <name> --input FILE.sqlite...`. The same host and limits as the
//! service's jobs, the same checks before the recipe, the same CSV, notebook and HTML outputs,
//! written to a local directory instead of storage. Also `analysis list`/`info` with no server
//! ([`describe_local`]): the recipes of the local recipes directory.
//!
//! ```text
//!  LocalRequest ──find <recipes-dir>/<name>.wasm──> RecipeHost::load_traced (disk cache)
//!      │ describe ──> parse_args (as the service) ──> check every input (SQLite? nsys export?)
//!      v
//!  recipe world:       run(args) once per input        ─┐
//!  multi-recipe world: map over the inputs, then reduce ─┴─> CSVs + notebook.ipynb + notebook.html
//! ```
//! Exit codes for the CLI ([`LocalError::exit_code`]): 2 for what the user typed (unknown
//! recipe, bad arguments, no input, no recipes directory), 1 for inputs the recipe cannot read
//! and for failed runs.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    time::Instant,
};

use serde_json::{json, Value as Json};

use crate::{
    args::{error_chain, parse_args},
    nsys_export,
    render::{self, JobHeader, ReportResult},
    table_to_csv, Limits, LoadSource, QueryLimits, RecipeHost, RecipeHostError, RecipeInfo,
    RecipeKind, ReportDb,
};

/// What to run.
#[derive(Debug, Clone)]
pub struct LocalRequest {
    pub recipe: String,
    /// Command-line style recipe arguments (`--timeunit usec`).
    pub args: Vec<String>,
    pub inputs: Vec<PathBuf>,
    /// Where to write the outputs; `None`: a new `<recipe>-<n>` in the current directory.
    pub output_dir: Option<PathBuf>,
    pub recipes_dir: PathBuf,
    /// The compiled-component cache; `None`: compile in memory only.
    pub cache_dir: Option<PathBuf>,
    pub limits: Limits,
    /// The `nsys` that exports `.nsys-rep`/`.qdrep` inputs (`nsys_export`); `None`: such inputs
    /// are refused with the command that exports them.
    pub nsys: Option<PathBuf>,
}

/// What a local run produced.
#[derive(Debug)]
pub struct LocalRun {
    pub info: RecipeInfo,
    pub reports: Vec<ReportResult>,
    pub output_dir: PathBuf,
    pub files: Vec<PathBuf>,
    pub load: LoadSource,
    pub load_ms: u128,
    pub run_ms: u128,
    /// Things that did not stop the run (e.g. an unusable cache directory).
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("cannot read the recipes directory {path}: {reason}; point --recipes-dir (or NSIGHT_RECIPES_DIR) at the compiled recipes (`cargo xtask build-wasm` puts them in $NSIGHT_WASM_DIR/recipes)")]
    RecipesDir { path: String, reason: String },
    #[error("unknown recipe `{name}`; the recipes in {dir} are: {known}")]
    UnknownRecipe {
        name: String,
        dir: String,
        known: String,
    },
    #[error("{0}")]
    Args(String),
    #[error(
        "no input: give the reports to analyse with --input FILE.sqlite (repeat it for several)"
    )]
    NoInput,
    #[error("input {path}: {reason}")]
    Input { path: String, reason: String },
    #[error("recipe {recipe} cannot be used: {reason}")]
    Component { recipe: String, reason: String },
    #[error("recipe {recipe} failed: {reason}")]
    Run { recipe: String, reason: String },
    #[error("cannot write {path}: {reason}")]
    Write { path: String, reason: String },
}

impl LocalError {
    /// 2: the command line is wrong; 1: the inputs or the run failed.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::RecipesDir { .. }
            | Self::UnknownRecipe { .. }
            | Self::Args(_)
            | Self::NoInput => 2,
            Self::Input { .. } | Self::Component { .. } | Self::Run { .. } | Self::Write { .. } => {
                1
            }
        }
    }
}

/// The recipe names the directory offers (its `*.wasm` file stems), sorted.
pub fn recipe_files(dir: &Path) -> Result<Vec<String>, LocalError> {
    let entries = std::fs::read_dir(dir).map_err(|e| LocalError::RecipesDir {
        path: dir.display().to_string(),
        reason: e.to_string(),
    })?;
    let names: BTreeSet<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "wasm") && p.is_file())
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    Ok(names.into_iter().collect())
}

/// Opens `path` as the service does before a run: a readable SQLite file with `StringIds`.
pub fn check_input(path: &Path) -> Result<(), LocalError> {
    let input = |reason: String| LocalError::Input {
        path: path.display().to_string(),
        reason,
    };
    if !path.is_file() {
        return Err(input(if path.exists() {
            "not a file".into()
        } else {
            "no such file".into()
        }));
    }
    let db = ReportDb::open(path, QueryLimits::default()).map_err(|e| input(error_chain(&e)))?;
    let tables = db.tables().map_err(|e| input(e.to_string()))?;
    if !tables.iter().any(|t| t == "StringIds") {
        return Err(input(
            "not an Nsight Systems SQLite export (it has no StringIds table); export reports \
             with `nsys export --type sqlite`"
                .into(),
        ));
    }
    Ok(())
}

/// A file-name-safe form of a recipe's table name or a report's stem.
fn safe_name(raw: &str) -> String {
    let s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let s = s.trim_start_matches('.');
    if s.is_empty() {
        "table".into()
    } else {
        s.to_owned()
    }
}

/// The first `<recipe>-<n>` (n = 1, 2, ...) that does not exist in `base`.
fn fresh_dir(base: &Path, recipe: &str) -> PathBuf {
    (1u32..)
        .map(|n| base.join(format!("{}-{n}", safe_name(recipe))))
        .find(|p| !p.exists())
        .unwrap_or_else(|| base.join(safe_name(recipe)))
}

/// A host for local use: with the compiled-component cache when it is usable (else a warning).
fn local_host(
    limits: Limits,
    cache_dir: Option<&Path>,
    warnings: &mut Vec<String>,
) -> Result<RecipeHost, RecipeHostError> {
    match cache_dir {
        Some(dir) => RecipeHost::with_cache_dir(limits, dir).or_else(|e| {
            warnings.push(format!("{}; compiling without it", error_chain(&e)));
            RecipeHost::new(limits)
        }),
        None => RecipeHost::new(limits),
    }
}

/// What the local recipes directory offers, for `analysis list` and `analysis info` with no
/// server: every recipe described by its component (or only `only`), by file name. A component
/// that does not load or describe itself is left out with a warning when listing all, and is
/// the error when it is the one asked for.
pub fn describe_local(
    recipes_dir: &Path,
    cache_dir: Option<&Path>,
    only: Option<&str>,
) -> Result<(Vec<RecipeInfo>, Vec<String>), LocalError> {
    let known = recipe_files(recipes_dir)?;
    if let Some(name) = only.filter(|n| !known.iter().any(|k| k == n)) {
        return Err(LocalError::UnknownRecipe {
            name: name.to_owned(),
            dir: recipes_dir.display().to_string(),
            known: if known.is_empty() {
                "(none)".into()
            } else {
                known.join(", ")
            },
        });
    }
    let mut warnings = Vec::new();
    let component_err = |recipe: &str, e: RecipeHostError| LocalError::Component {
        recipe: recipe.to_owned(),
        reason: error_chain(&e),
    };
    let host = local_host(Limits::default(), cache_dir, &mut warnings)
        .map_err(|e| component_err("(host)", e))?;
    let mut infos = Vec::new();
    for name in known
        .iter()
        .filter(|k| only.is_none_or(|o| o == k.as_str()))
    {
        let path = recipes_dir.join(format!("{name}.wasm"));
        match host
            .load_traced(&path)
            .and_then(|(component, _)| host.describe(&component))
        {
            Ok(info) => infos.push(info),
            Err(e) if only.is_some() => return Err(component_err(name, e)),
            Err(e) => warnings.push(format!("{name}: left out: {}", error_chain(&e))),
        }
    }
    Ok((infos, warnings))
}

/// Runs the request: finds, loads and describes the recipe, checks the inputs, runs, writes the
/// outputs. Blocks for as long as the recipe runs.
pub fn run_local(req: &LocalRequest) -> Result<LocalRun, LocalError> {
    let known = recipe_files(&req.recipes_dir)?;
    if !known.contains(&req.recipe) {
        return Err(LocalError::UnknownRecipe {
            name: req.recipe.clone(),
            dir: req.recipes_dir.display().to_string(),
            known: if known.is_empty() {
                "(none)".into()
            } else {
                known.join(", ")
            },
        });
    }
    let component_path = req.recipes_dir.join(format!("{}.wasm", req.recipe));
    let component_err = |e: RecipeHostError| LocalError::Component {
        recipe: req.recipe.clone(),
        reason: error_chain(&e),
    };
    let mut warnings = Vec::new();
    let host =
        local_host(req.limits, req.cache_dir.as_deref(), &mut warnings).map_err(component_err)?;
    let started = Instant::now();
    let (component, load) = host.load_traced(&component_path).map_err(component_err)?;
    let load_ms = started.elapsed().as_millis();
    if let LoadSource::Recompiled(reason) = &load {
        warnings.push(format!(
            "the compiled-component cache entry of {} was unusable ({reason}); compiled again",
            req.recipe
        ));
    }
    let info = host.describe(&component).map_err(component_err)?;
    let pairs = parse_args(&req.args, &info).map_err(LocalError::Args)?;
    if req.inputs.is_empty() {
        return Err(LocalError::NoInput);
    }
    // Report files (.nsys-rep, .qdrep) are read through their SQLite export.
    let mut inputs = Vec::with_capacity(req.inputs.len());
    for input in &req.inputs {
        let sqlite = nsys_export::sqlite_input(input, req.nsys.as_deref())?;
        warnings.extend(sqlite.warning);
        check_input(&sqlite.path)?;
        inputs.push(sqlite.path);
    }
    let run_err = |e: RecipeHostError| LocalError::Run {
        recipe: info.name.clone(),
        reason: error_chain(&e),
    };
    let started = Instant::now();
    let labels = input_labels(&inputs);
    let mut outputs = Vec::new();
    match host.kind(&component) {
        RecipeKind::Single => {
            for (input, label) in inputs.iter().zip(&labels) {
                let out = host
                    .run(&component, input, &pairs)
                    .map_err(|e| LocalError::Run {
                        recipe: info.name.clone(),
                        reason: format!("{label}: {}", error_chain(&e)),
                    })?;
                outputs.push((label.clone(), Some(label.clone()), out));
            }
        }
        RecipeKind::Multi => {
            let out = host
                .run_reports(&component, &inputs, &pairs)
                .map_err(run_err)?;
            outputs.push((labels.join(", "), None, out));
        }
    }
    let run_ms = started.elapsed().as_millis();
    let reports: Vec<ReportResult> = outputs
        .into_iter()
        .map(|(key, stem, out)| {
            let file = |name: &str, ext: &str| match &stem {
                Some(s) => format!("{}_{}.{ext}", safe_name(s), safe_name(name)),
                None => format!("{}.{ext}", safe_name(name)),
            };
            ReportResult {
                tables: out
                    .tables
                    .into_iter()
                    .map(|t| (file(&t.name, "csv"), t))
                    .collect(),
                figures: out
                    .figures
                    .into_iter()
                    .map(|f| (file(&f.name, "svg"), f))
                    .collect(),
                notes: out.notes,
                key,
            }
        })
        .collect();
    let output_dir = req
        .output_dir
        .clone()
        .unwrap_or_else(|| fresh_dir(Path::new("."), &req.recipe));
    let files = write_outputs(&output_dir, &info, &req.args, &reports)?;
    Ok(LocalRun {
        info,
        reports,
        output_dir,
        files,
        load,
        load_ms,
        run_ms,
        warnings,
    })
}

/// Each input's label: its file stem, or `<n>_<stem>` for all when two stems are equal.
fn input_labels(inputs: &[PathBuf]) -> Vec<String> {
    let stems: Vec<String> = inputs
        .iter()
        .map(|p| {
            p.file_stem().map_or_else(
                || p.display().to_string(),
                |s| s.to_string_lossy().into_owned(),
            )
        })
        .collect();
    if stems.iter().collect::<BTreeSet<_>>().len() == stems.len() {
        stems
    } else {
        stems
            .into_iter()
            .enumerate()
            .map(|(i, s)| format!("{}_{s}", i + 1))
            .collect()
    }
}

fn write_outputs(
    dir: &Path,
    info: &RecipeInfo,
    args: &[String],
    reports: &[ReportResult],
) -> Result<Vec<PathBuf>, LocalError> {
    let write = |path: PathBuf, bytes: &[u8]| {
        std::fs::write(&path, bytes)
            .map(|()| path.clone())
            .map_err(|e| LocalError::Write {
                path: path.display().to_string(),
                reason: e.to_string(),
            })
    };
    std::fs::create_dir_all(dir).map_err(|e| LocalError::Write {
        path: dir.display().to_string(),
        reason: e.to_string(),
    })?;
    let mut files = Vec::new();
    for report in reports {
        for (file, table) in &report.tables {
            files.push(write(dir.join(file), table_to_csv(table).as_bytes())?);
        }
        for (file, figure) in &report.figures {
            files.push(write(dir.join(file), figure.svg.as_bytes())?);
        }
    }
    let header = JobHeader {
        id: uuid::Uuid::new_v4(),
        recipe: info,
        args,
        tag: "local",
        session: "files",
        collection: None,
    };
    let notebook =
        serde_json::to_string_pretty(&render::notebook(&header, reports)).unwrap_or_default();
    files.push(write(dir.join("notebook.ipynb"), notebook.as_bytes())?);
    // The service's page links the CSVs and SVGs under files/; here they sit next to it. Every
    // recipe string in the page is escaped, so only the page's own links match.
    let html = render::html(&header, reports).replace("<a href=\"files/", "<a href=\"");
    files.push(write(dir.join("notebook.html"), html.as_bytes())?);
    Ok(files)
}

impl LocalRun {
    /// The tables as aligned text, with each report's notes, for a terminal.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for report in &self.reports {
            out.push_str(&format!("== {}\n", report.key));
            for note in &report.notes {
                out.push_str(&format!("note: {note}\n"));
            }
            for (file, table) in &report.tables {
                out.push_str(&format!("-- {} ({file})\n", table.name));
                out.push_str(&render::text_table(table));
                out.push_str("\n\n");
            }
        }
        out.push_str(&format!(
            "wrote {} files to {}\n",
            self.files.len(),
            self.output_dir.display()
        ));
        out
    }

    /// The run as JSON (`--output json`).
    pub fn to_json(&self) -> Json {
        let reports: Vec<Json> = self
            .reports
            .iter()
            .map(|r| {
                json!({
                    "key": r.key,
                    "notes": r.notes,
                    "tables": r.tables.iter().map(|(file, t)| json!({
                        "name": t.name, "file": file, "rows": t.rows.len(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({
            "recipe": self.info.name,
            "outputDir": self.output_dir.display().to_string(),
            "files": self.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
            "reports": reports,
        })
    }

    /// One line on how the component was loaded, for stderr.
    pub fn load_line(&self) -> String {
        let how = match &self.load {
            LoadSource::Memory | LoadSource::Disk => "loaded from the compile cache".to_owned(),
            LoadSource::Compiled => "compiled".to_owned(),
            LoadSource::Recompiled(_) => "compiled again (cache entry unusable)".to_owned(),
        };
        format!(
            "recipe {}: component {how} in {} ms, ran in {} ms",
            self.info.name, self.load_ms, self.run_ms
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_file_safe() {
        assert_eq!(safe_name("cuda_gpu_kern_sum"), "cuda_gpu_kern_sum");
        assert_eq!(safe_name("../../etc/passwd"), "_.._etc_passwd");
        assert_eq!(safe_name("..."), "table");
        assert_eq!(safe_name("a b/c"), "a_b_c");
    }

    #[test]
    fn labels_stay_unique() {
        let l = input_labels(&[PathBuf::from("x/a.sqlite"), PathBuf::from("y/b.sqlite")]);
        assert_eq!(l, ["a", "b"]);
        let l = input_labels(&[PathBuf::from("x/a.sqlite"), PathBuf::from("y/a.sqlite")]);
        assert_eq!(l, ["1_a", "2_a"]);
    }

    #[test]
    fn usage_errors_exit_2_and_input_errors_1() {
        assert_eq!(LocalError::NoInput.exit_code(), 2);
        let input = LocalError::Input {
            path: "x".into(),
            reason: "no such file".into(),
        };
        assert_eq!(input.exit_code(), 1);
    }
}
