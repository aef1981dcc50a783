//! `analysis`: the analysis service through the gateway (`/analysis/v1`): recipes, jobs, their
//! logs and output files. Command-line definitions, the calls, and the printing of answers;
//! what is printed for tables is decided by the pure functions at the bottom.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use clap::{Args, Subcommand};
use nsight_contracts::{
    analysis::{Job, JobFiles, JobInput, JobList, JobLogs, JobStatus, RecipeList, RecipeView},
    routes::ANALYSIS_V1,
};
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::{
    analysis_inputs::{inputs_request, scope, single_request, Scope, SessionId, SessionInput},
    api::{ApiError, Client},
    download::safe_join,
    render::{human_size, Rendered},
};

#[derive(Debug, Subcommand)]
pub enum AnalysisCommand {
    /// List the recipes the service can run (with --local, or with no configuration file: the
    /// recipes of the local recipes directory).
    List(CatalogArgs),
    /// Describe a recipe and its arguments (with --local, or with no configuration file: from
    /// the local recipes directory).
    Info {
        name: String,
        #[command(flatten)]
        catalog: CatalogArgs,
    },
    /// Create a job running a recipe over a session's reports, or run it here on local files
    /// with --input.
    Run(RunArgs),
    /// Print the address of the Cloud UI's analysis view.
    Ui,
    /// Jobs and what they produced.
    #[command(subcommand)]
    Reports(ReportsCommand),
}

/// Where `analysis list` and `analysis info` find the recipes when there is no server.
#[derive(Debug, Default, Args)]
pub struct CatalogArgs {
    /// Describe the recipes here, from the compiled recipes directory, with no server (the
    /// default when there is no configuration file).
    #[arg(long)]
    pub local: bool,
    /// The compiled recipes (implies --local) [default: $NSIGHT_RECIPES_DIR, else
    /// $NSIGHT_WASM_DIR/recipes, else recipes/ next to this program].
    #[arg(long, value_name = "DIR")]
    pub recipes_dir: Option<PathBuf>,
    /// With --local: the compiled-component cache [default: $NSIGHT_RECIPE_CACHE_DIR, else
    /// ~/.cache/nsight-cloud/compiled].
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The recipe, e.g. nvtx_sum.
    pub name: String,
    /// The recipe's own arguments, e.g. --timeunit usec (this command's own flags may come
    /// before or after them; after `--` everything is the recipe's).
    #[arg(allow_hyphen_values = true, trailing_var_arg = true)]
    pub args: Vec<String>,
    /// The session whose reports to analyse [default: the active one, else the latest];
    /// UUID:COLLECTION for one of its collections. Repeat it for a recipe over several (diff:
    /// the first is A, the second B), up to 16.
    #[arg(long, value_name = "UUID[:COLLECTION]")]
    pub session: Vec<SessionInput>,
    /// Only this collection's reports (with at most one --session).
    #[arg(long, value_name = "ID")]
    pub collection: Option<String>,
    /// Wait for the job to finish and print its tables' files.
    #[arg(long)]
    pub wait: bool,
    /// Run the recipe here, with no server, on this report (repeat for several): an
    /// `nsys export --type sqlite` file, or a .nsys-rep/.qdrep that nsys (on PATH) exports first.
    #[arg(long, value_name = "FILE.sqlite")]
    pub input: Vec<PathBuf>,
    /// With --input: where to write the CSVs, SVG figures, notebook.ipynb and notebook.html
    /// [default: a new ./<recipe>-<n>].
    #[arg(long = "output", value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// With --input: the compiled recipes [default: $NSIGHT_RECIPES_DIR, else
    /// $NSIGHT_WASM_DIR/recipes, else recipes/ next to this program].
    #[arg(long, value_name = "DIR")]
    pub recipes_dir: Option<PathBuf>,
    /// With --input: the compiled-component cache [default: $NSIGHT_RECIPE_CACHE_DIR, else
    /// ~/.cache/nsight-cloud/compiled].
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

impl RunArgs {
    /// No recipe and nothing set (a placeholder while the parsed one is rewritten).
    pub fn empty() -> Self {
        Self {
            name: String::new(),
            args: Vec::new(),
            session: Vec::new(),
            collection: None,
            wait: false,
            input: Vec::new(),
            output_dir: None,
            recipes_dir: None,
            cache_dir: None,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum ReportsCommand {
    /// List jobs, newest first.
    List {
        /// Only jobs in this state: queued, running, succeeded, failed, cancelled.
        #[arg(long)]
        status: Option<String>,
    },
    /// A job's details.
    Info { id: Uuid },
    /// A job's log lines.
    Logs { id: Uuid },
    /// Download a job's output files into DIR/<job id>/.
    Download {
        id: Uuid,
        #[arg(short = 'o', long = "output-dir", default_value = ".")]
        output_dir: PathBuf,
    },
    /// Print the address of a job's notebook rendered as HTML.
    Open { id: Uuid },
    /// Cancel a queued or running job.
    Cancel { id: Uuid },
    /// Delete a finished job and its files.
    Delete { id: Uuid },
}

/// What a command produced: the JSON answer (for `--output json`) and the table.
#[derive(Debug)]
pub struct Outcome {
    pub json: Value,
    pub table: Rendered,
    /// The job did not succeed (exit code 1).
    pub failed: bool,
}

fn parse<T: for<'de> Deserialize<'de>>(value: &Value, url: &str) -> Result<T, ApiError> {
    serde_json::from_value(value.clone()).map_err(|source| ApiError::Decode {
        url: url.to_owned(),
        source,
    })
}

fn body(reply: &crate::api::Reply) -> Result<Value, ApiError> {
    reply.parse::<Value>()
}

/// Runs one `analysis` command. `session` resolves the default session when `run` needs it.
pub fn run(
    client: &Client,
    tag: &str,
    command: &AnalysisCommand,
    session: impl FnOnce(Option<Uuid>) -> Result<Uuid, crate::Failure>,
) -> Result<Outcome, crate::Failure> {
    match command {
        AnalysisCommand::List(_) => {
            let value = body(&client.analysis_get("/recipes", &[])?)?;
            let list: RecipeList = parse(&value, &client.analysis_url("/recipes"))?;
            Ok(Outcome {
                table: recipes_table(&list),
                json: value,
                failed: false,
            })
        }
        AnalysisCommand::Info { name, .. } => {
            let path = format!("/recipes/{name}");
            let value = body(&client.analysis_get(&path, &[])?)?;
            let recipe: RecipeView = parse(&value, &client.analysis_url(&path))?;
            Ok(Outcome {
                table: recipe_info(&recipe),
                json: value,
                failed: false,
            })
        }
        AnalysisCommand::Run(args) => {
            let request = match scope(&args.session, args.collection.as_deref())
                .map_err(crate::Failure::Usage)?
            {
                Scope::One {
                    session: given,
                    collection,
                } => {
                    // A launch-mode session is not the coordinator's: used as given.
                    let id = match given {
                        Some(SessionId::Launch(id)) => id,
                        Some(SessionId::Coordinator(u)) => session(Some(u))?.to_string(),
                        None => session(None)?.to_string(),
                    };
                    single_request(&args.name, &args.args, tag, &id, collection.as_deref())
                }
                Scope::Several(inputs) => inputs_request(&args.name, &args.args, tag, &inputs),
            };
            let url = client.analysis_url("/jobs");
            let mut value = body(&client.analysis_post("/jobs", &request)?)?;
            if args.wait {
                let job: Job = parse(&value, &url)?;
                value = wait_for(client, job.id)?;
            }
            let job: Job = parse(&value, &url)?;
            Ok(Outcome {
                table: job_table(&job, client),
                failed: args.wait && job.status != JobStatus::Succeeded,
                json: value,
            })
        }
        AnalysisCommand::Ui => {
            let url = client
                .analysis_url("/")
                .replace(&format!("{ANALYSIS_V1}/"), "/#/analysis");
            let table = text(format!("{url}\n"));
            Ok(Outcome {
                json: json!({ "url": url }),
                table,
                failed: false,
            })
        }
        AnalysisCommand::Reports(command) => reports(client, command),
    }
}

fn wait_for(client: &Client, id: Uuid) -> Result<Value, crate::Failure> {
    let started = Instant::now();
    let mut delay = Duration::from_millis(100);
    loop {
        let path = format!("/jobs/{id}");
        let value = body(&client.analysis_get(&path, &[])?)?;
        let job: Job = parse(&value, &client.analysis_url(&path))?;
        if job.status.is_terminal() {
            return Ok(value);
        }
        if started.elapsed() > Duration::from_secs(3600) {
            return Ok(value);
        }
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}

fn reports(client: &Client, command: &ReportsCommand) -> Result<Outcome, crate::Failure> {
    let ok = |json: Value, table: Rendered| Outcome {
        json,
        table,
        failed: false,
    };
    match command {
        ReportsCommand::List { status } => {
            let query: Vec<(&str, &str)> = status.iter().map(|s| ("status", s.as_str())).collect();
            let value = body(&client.analysis_get("/jobs", &query)?)?;
            let jobs: JobList = parse(&value, &client.analysis_url("/jobs"))?;
            Ok(ok(value, jobs_table(&jobs.jobs)))
        }
        ReportsCommand::Info { id } => {
            let value = body(&client.analysis_get(&format!("/jobs/{id}"), &[])?)?;
            let job: Job = parse(&value, &client.analysis_url("/jobs"))?;
            Ok(ok(value, job_table(&job, client)))
        }
        ReportsCommand::Logs { id } => {
            let path = format!("/jobs/{id}/logs");
            let value = body(&client.analysis_get(&path, &[])?)?;
            let logs: JobLogs = parse(&value, &client.analysis_url(&path))?;
            Ok(ok(value, logs_table(&logs)))
        }
        ReportsCommand::Download { id, output_dir } => {
            let value = body(&client.analysis_get(&format!("/jobs/{id}/files"), &[])?)?;
            let files: JobFiles = parse(&value, &client.analysis_url("/files"))?;
            let dir = output_dir.join(id.to_string());
            let mut table = Rendered::default();
            let mut written = Vec::new();
            for file in &files.files {
                let path = save_file(client, *id, &dir, &file.name)?;
                table.out.push_str(&format!(
                    "downloaded {} ({})\n",
                    path.display(),
                    human_size(file.size)
                ));
                written.push(json!({ "path": path, "size": file.size }));
            }
            Ok(ok(json!({ "job": id, "files": written }), table))
        }
        ReportsCommand::Open { id } => {
            let url = client.analysis_url(&format!("/jobs/{id}/notebook.html"));
            let table = text(format!("{url}\n"));
            Ok(ok(json!({ "url": url }), table))
        }
        ReportsCommand::Cancel { id } => {
            let value = body(&client.analysis_post(&format!("/jobs/{id}/cancel"), &json!({}))?)?;
            let table = text(format!("cancel requested for job {id}\n"));
            Ok(ok(value, table))
        }
        ReportsCommand::Delete { id } => {
            let reply = client.analysis_delete(&format!("/jobs/{id}"))?;
            let value = if reply.body.trim().is_empty() {
                json!({ "deleted": id })
            } else {
                body(&reply)?
            };
            let table = text(format!("deleted job {id}\n"));
            Ok(ok(value, table))
        }
    }
}

fn save_file(client: &Client, id: Uuid, dir: &Path, name: &str) -> Result<PathBuf, crate::Failure> {
    let path = safe_join(dir, name).map_err(|e| crate::Failure::Downloads(vec![e]))?;
    let io = |e: std::io::Error| {
        crate::Failure::Downloads(vec![crate::download::DownloadError::Io {
            path: path.display().to_string(),
            source: e,
        }])
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let url = client.analysis_url(&format!("/jobs/{id}/files/{name}"));
    let mut response = client.get_stream(&url)?;
    let part = path.with_extension("part");
    let mut file = std::fs::File::create(&part).map_err(io)?;
    std::io::copy(&mut response, &mut file).map_err(io)?;
    std::fs::rename(&part, &path).map_err(io)?;
    Ok(path)
}

// ---- pure rendering ----

/// A table that is one block of text.
fn text(out: String) -> Rendered {
    Rendered {
        out,
        ..Rendered::default()
    }
}

fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() && c != '\t' { '?' } else { c })
        .collect()
}

/// `analysis list`.
pub fn recipes_table(list: &RecipeList) -> Rendered {
    let mut r = Rendered::default();
    let rows: Vec<(String, String)> = list
        .recipes
        .iter()
        .map(|x| {
            (
                clean(&x.name),
                clean(x.description.lines().next().unwrap_or("")),
            )
        })
        .collect();
    let width = rows.iter().map(|r| r.0.len()).max().unwrap_or(4).max(4);
    r.out
        .push_str(&format!("{:<width$}  DESCRIPTION\n", "NAME"));
    for (name, first_line) in rows {
        r.out.push_str(&format!("{name:<width$}  {first_line}\n"));
    }
    r
}

/// `analysis info`.
pub fn recipe_info(recipe: &RecipeView) -> Rendered {
    let mut r = Rendered::default();
    r.out.push_str(&format!(
        "{} ({})\n{}\n",
        clean(&recipe.name),
        clean(&recipe.display_name),
        clean(&recipe.description)
    ));
    for a in &recipe.arguments {
        let default = match &a.default {
            Some(s) => format!(" [default: {}]", clean(s)),
            None => String::new(),
        };
        r.out.push_str(&format!(
            "  --{}  {}{default}\n",
            clean(&a.name),
            clean(&a.description)
        ));
    }
    r
}

/// `analysis reports logs`: one line per entry, `LEVEL message`.
pub fn logs_table(logs: &JobLogs) -> Rendered {
    let mut r = Rendered::default();
    for line in &logs.lines {
        r.out.push_str(&format!(
            "{:<5} {}\n",
            clean(&line.level),
            clean(&line.message)
        ));
    }
    r
}

/// One job, with where its notebook and files are.
pub fn job_table(job: &Job, client: &Client) -> Rendered {
    let mut r = Rendered::default();
    let recipe = if job.args.is_empty() {
        clean(&job.recipe)
    } else {
        clean(&format!("{} {}", job.recipe, job.args.join(" ")))
    };
    r.out.push_str(&format!(
        "Job {} ({recipe}) on {}: {}\n",
        job.id,
        clean(&job_scope(job)),
        job.status.as_str()
    ));
    if let Some(reason) = &job.reason {
        r.out.push_str(&format!("  reason: {}\n", clean(reason)));
    }
    for note in &job.notes {
        r.warnings.push(clean(note));
    }
    for file in &job.files {
        r.out.push_str(&format!(
            "  {}  {}\n",
            clean(&file.name),
            human_size(file.size)
        ));
    }
    if job.status == JobStatus::Succeeded {
        r.out.push_str(&format!(
            "  notebook: {}\n  download: nsight-cloud analysis reports download {}\n",
            client.analysis_url(&format!("/jobs/{}/notebook.html", job.id)),
            job.id
        ));
    } else if !job.status.is_terminal() {
        r.out.push_str(&format!(
            "  follow it with: nsight-cloud analysis reports info {}\n",
            job.id
        ));
    }
    r
}

/// What a job reads: `session S`, `session S collection C`, or `sessions S1, S2:C2` for
/// several inputs.
fn job_scope(job: &Job) -> String {
    let one = |i: &JobInput| match &i.collection {
        Some(c) => format!("{}:{c}", i.session),
        None => i.session.clone(),
    };
    match job.inputs.as_slice() {
        [] => format!("session {}", job.session),
        [i] => match &i.collection {
            Some(c) => format!("session {} collection {c}", i.session),
            None => format!("session {}", i.session),
        },
        several => format!(
            "sessions {}",
            several.iter().map(one).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// `analysis reports list`.
pub fn jobs_table(jobs: &[Job]) -> Rendered {
    let mut r = Rendered::default();
    r.out
        .push_str("ID                                    STATUS     RECIPE              SESSION\n");
    for job in jobs {
        r.out.push_str(&format!(
            "{}  {:<9}  {:<18}  {}\n",
            job.id,
            job.status.as_str(),
            clean(&job.recipe),
            clean(&match job.inputs.len() {
                0 | 1 => job.session.clone(),
                n => format!("{} (+{})", job.session, n - 1),
            })
        ));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipe_tables_show_names_first_lines_and_arguments() {
        let list: RecipeList = serde_json::from_value(json!({"recipes": [
            {"name": "nvtx_sum", "displayName": "NVTX", "arguments": [],
             "description": "NVTX range summary\nmore"},
            {"name": "sql", "displayName": "SQL", "arguments": [],
             "description": "Run\u{1b}[31m SQL"}]}))
        .unwrap();
        let out = recipes_table(&list).out;
        assert!(out.contains("nvtx_sum  NVTX range summary\n"), "{out}");
        assert!(!out.contains("more"));
        assert!(
            !out.contains('\u{1b}'),
            "control characters are not printed"
        );
        let info: RecipeView = serde_json::from_value(json!({"name": "nvtx_sum",
            "displayName": "NVTX Range Summary", "description": "d",
            "arguments": [{"name": "timeunit", "description": "unit", "default": "nsec"}]}))
        .unwrap();
        assert!(recipe_info(&info)
            .out
            .contains("--timeunit  unit [default: nsec]"));
    }

    #[test]
    fn log_lines_show_level_and_message() {
        let logs: JobLogs = serde_json::from_value(json!({"lines": [
            {"time": 1, "level": "info", "message": "running nvtx_sum"},
            {"time": 2, "level": "error", "message": "failed:\u{1b}[31m x"}]}))
        .unwrap();
        assert_eq!(
            logs_table(&logs).out,
            "info  running nvtx_sum\nerror failed:?[31m x\n"
        );
    }
}
