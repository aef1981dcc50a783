//! Runs one job: waits for a permit (the concurrency limit), fetches the `.sqlite` reports of
//! each of the job's inputs (a session, or one collection of it) to temp files, runs the recipe
//! off the async runtime (`spawn_blocking`), then writes the CSVs, the notebook and the HTML
//! page to storage and records the outcome.
//!
//! ```text
//!  permit ─> start ─> per input: list <tag>/<session>/[<collection>/] ─> reports, in order
//!        ─> recipe world?
//!             recipe:       per report: get ─> check export ─> RecipeHost::run_cancellable
//!             multi-recipe: get all ─> check each ─> RecipeHost::run_labelled_cancellable
//!                           (map over the reports in order, reduce; labels = storage keys)
//!        ─> render (CSVs, SVGs, notebook, page) ─> put <tag>/<first session>/analysis/<job>/<file>
//! ```
//!
//! A `recipe` runs once per report: a session with three processes gives three sets of tables
//! in one notebook, and the first report that fails fails the job. A `multi-recipe` (e.g.
//! `diff`) runs once over all the job's reports and gives one set of tables.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use nsight_storage::{
    download::download_to_file, layout::ReportKey, ReportStore, StorageError, Store,
};
use uuid::Uuid;

use super::{
    catalog::Recipe,
    error_chain,
    inputs::{
        combined_csv_file, combined_svg_file, csv_file, listing_prefix, output_prefix,
        select_reports, svg_file, HTML_FILE, NOTEBOOK_FILE,
    },
    job::{parse_args, Job, JobInput, Lifecycle, OutputFile},
    jobs::{now_ms, Service},
    render::{self, JobHeader, ReportResult},
};
use crate::{
    table_to_csv, CancelHandle, Level, LogLine, QueryLimits, RecipeHostError, RecipeInfo,
    RecipeKind, RecipeOutput, ReportDb,
};

/// Why a run did not succeed; the message becomes the job's `reason`.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the run was cancelled")]
    Cancelled,
    #[error("recipe `{0}` is no longer installed in the recipes directory")]
    RecipeGone(String),
    #[error("{0}")]
    Args(String),
    #[error(
        "session {scope} has no .sqlite report in {store}: agents upload one per process \
         when a collection stops; check the session (and collection) id and that the \
         collection has completed"
    )]
    NoReports { scope: String, store: String },
    #[error("storage: {0}")]
    Storage(String),
    #[error(
        "report {key} is not an Nsight Systems SQLite export (it has no StringIds table); \
         export reports with `nsys export --type sqlite`"
    )]
    NotAnExport { key: String },
    #[error("report {key}: {reason}")]
    Recipe { key: String, reason: String },
    #[error("internal error: {0}")]
    Internal(String),
}

fn storage(e: StorageError) -> RunError {
    RunError::Storage(e.chain())
}

/// What a successful run produced.
struct Produced {
    reports: Vec<String>,
    files: Vec<OutputFile>,
    notes: Vec<String>,
}

/// The runner task of job `id`.
pub async fn run(svc: Service, id: Uuid) {
    let Ok(_permit) = Arc::clone(&svc.0.permits).acquire_owned().await else {
        return;
    };
    // A job cancelled (or deleted) while queued does not start.
    if svc.update(id, |r| r.job.start(now_ms())).is_err() {
        return;
    }
    svc.log(id, "info", "running");
    let cancel = svc.0.host.cancel_handle();
    svc.running(id, cancel.clone());
    // A cancel that came between `start` and registering the handle.
    if svc.get(id).is_ok_and(|j| j.cancel_requested) {
        cancel.cancel();
    }
    let work = svc.0.work_dir.join(id.to_string());
    let result = match svc.get(id) {
        Ok(job) => execute(&svc, &job, &work, &cancel).await,
        Err(e) => Err(RunError::Internal(e.to_string())),
    };
    svc.finished(id);
    if let Err(e) = tokio::fs::remove_dir_all(&work).await {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(job = %id, error = %e, "cannot remove the job's work directory");
        }
    }
    let now = now_ms();
    let outcome = svc.update(id, |r| match result {
        Ok(p) => {
            r.log(now, "info", format!("succeeded: {} files", p.files.len()));
            r.job.succeed(p.reports, p.files, p.notes, now)
        }
        Err(RunError::Cancelled) => {
            r.log(now, "info", "cancelled");
            r.job.cancelled(now)
        }
        Err(e) => {
            let reason = without_server_paths(&e.to_string(), &server_paths(&svc));
            r.log(now, "error", format!("failed: {reason}"));
            r.job.fail(reason, now)
        }
    });
    if let Err(e) = outcome {
        tracing::error!(job = %id, error = %e, "cannot record the job's outcome");
    }
}

/// The service's own directories, each with the name users see instead: the job work
/// directories and the local store's root.
fn server_paths(svc: &Service) -> Vec<(PathBuf, &'static str)> {
    let mut paths = vec![(svc.0.work_dir.clone(), "<job work dir>")];
    if let Store::Local(local) = &svc.0.store {
        paths.push((local.root().to_path_buf(), "<report storage>"));
    }
    paths
}

/// `text` with every spelling (as given and resolved) of each of `paths` replaced by its name:
/// a failure reason says what went wrong, not where the service keeps its files.
fn without_server_paths(text: &str, paths: &[(PathBuf, &str)]) -> String {
    let mut spellings: Vec<(String, &str)> = paths
        .iter()
        .flat_map(|(path, name)| {
            let real = path.canonicalize().ok();
            [Some(path.clone()), real]
                .into_iter()
                .flatten()
                .map(move |p| {
                    (
                        p.display().to_string().trim_end_matches('/').to_owned(),
                        *name,
                    )
                })
        })
        .filter(|(p, _)| p.len() > 1)
        .collect();
    // Longest first, so that a directory inside another is named as itself.
    spellings.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    spellings
        .iter()
        .fold(text.to_owned(), |text, (path, name)| {
            text.replace(path.as_str(), name)
        })
}

fn check(cancel: &CancelHandle) -> Result<(), RunError> {
    if cancel.is_cancelled() {
        Err(RunError::Cancelled)
    } else {
        Ok(())
    }
}

async fn execute(
    svc: &Service,
    job: &Job,
    work: &Path,
    cancel: &CancelHandle,
) -> Result<Produced, RunError> {
    let recipe = svc
        .0
        .catalog
        .get(&job.recipe)
        .ok_or_else(|| RunError::RecipeGone(job.recipe.clone()))?;
    let pairs = parse_args(&job.args, &recipe.info).map_err(|e| RunError::Args(e.to_string()))?;
    let reports = list_reports(svc, job).await?;
    svc.log(
        job.id,
        "info",
        format!("{} report(s) to analyse", reports.len()),
    );
    let mut results = Vec::new();
    if svc.0.host.kind(&recipe.component) == RecipeKind::Multi {
        let mut locals = Vec::new();
        for (i, report) in reports.iter().enumerate() {
            locals.push((
                fetch(svc, job, work, i, report, cancel).await?,
                report.to_key(),
            ));
        }
        svc.log(
            job.id,
            "info",
            format!(
                "running {} over {} reports",
                recipe.info.name,
                reports.len()
            ),
        );
        let (result, log) = run_many(svc, recipe, &locals, &pairs, cancel).await?;
        log_lines(svc, job, None, log);
        results.push(result);
    } else {
        for (i, report) in reports.iter().enumerate() {
            let local = fetch(svc, job, work, i, report, cancel).await?;
            let key = report.to_key();
            svc.log(
                job.id,
                "info",
                format!("running {} on {key}", recipe.info.name),
            );
            let (result, log) = run_one(svc, recipe, &local, &pairs, cancel, report).await?;
            log_lines(svc, job, Some(&key), log);
            let _ = tokio::fs::remove_file(&local).await;
            results.push(result);
        }
    }
    check(cancel)?;
    let keys = reports.iter().map(ReportKey::to_key).collect();
    upload(svc, job, &recipe.info, keys, &results, cancel).await
}

/// The reports of every input of the job, input by input (each sorted by key). An input with
/// no report fails the job, saying which.
async fn list_reports(svc: &Service, job: &Job) -> Result<Vec<ReportKey>, RunError> {
    let store = &svc.0.store;
    let mut reports = Vec::new();
    for JobInput {
        session,
        collection,
    } in job.scopes()
    {
        let prefix = listing_prefix(&job.tag, &session, collection.as_deref());
        let listing = store.list(&prefix).await.map_err(storage)?;
        let found = select_reports(&listing, &job.tag, &session, collection.as_deref());
        if found.is_empty() {
            let scope = match &collection {
                Some(c) => format!("{}/{session} collection {c}", job.tag),
                None => format!("{}/{session}", job.tag),
            };
            return Err(RunError::NoReports {
                scope,
                store: store.describe(),
            });
        }
        reports.extend(found);
    }
    Ok(reports)
}

/// Downloads report number `i` of the job into its work directory.
async fn fetch(
    svc: &Service,
    job: &Job,
    work: &Path,
    i: usize,
    report: &ReportKey,
    cancel: &CancelHandle,
) -> Result<PathBuf, RunError> {
    check(cancel)?;
    let key = report.to_key();
    let local = work.join(format!("{i}.sqlite"));
    svc.log(job.id, "info", format!("fetching {key}"));
    download_to_file(&svc.0.store, &key, &local)
        .await
        .map_err(storage)?;
    check(cancel)?;
    Ok(local)
}

/// Copies the recipe's log lines into the job's log, prefixed with the report when given.
fn log_lines(svc: &Service, job: &Job, key: Option<&str>, log: Vec<LogLine>) {
    for line in log {
        let level = match line.level {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        match key {
            Some(key) => svc.log(job.id, level, format!("{key}: {}", line.message)),
            None => svc.log(job.id, level, line.message),
        }
    }
}

/// Fails unless the file at `local` is an nsys export (it has `StringIds`).
fn check_export(local: &Path, key: &str) -> Result<(), RunError> {
    let recipe_err = |e: &dyn std::error::Error| RunError::Recipe {
        key: key.to_owned(),
        reason: error_chain(e),
    };
    let db = ReportDb::open(local, QueryLimits::default()).map_err(|e| {
        recipe_err(&RecipeHostError::OpenReport {
            path: key.to_owned(),
            source: e,
        })
    })?;
    let tables = db.tables().map_err(|e| recipe_err(&e))?;
    if tables.iter().any(|t| t == "StringIds") {
        Ok(())
    } else {
        Err(RunError::NotAnExport {
            key: key.to_owned(),
        })
    }
}

/// A recipe host error as the job's: cancelled, or the recipe's failure on `key`.
fn host_error(e: RecipeHostError, key: String) -> RunError {
    match e {
        RecipeHostError::Cancelled => RunError::Cancelled,
        e => RunError::Recipe {
            key,
            reason: error_chain(&e),
        },
    }
}

/// Runs a recipe host call on a blocking thread.
async fn on_blocking_thread(
    work: impl FnOnce() -> Result<RecipeOutput, RunError> + Send + 'static,
) -> Result<RecipeOutput, RunError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| RunError::Internal(format!("the recipe thread failed: {e}")))?
}

/// Runs a multi-recipe over every report of the job (checked to be exports first), on a
/// blocking thread: one result, its tables named `<table>.csv`.
async fn run_many(
    svc: &Service,
    recipe: &Recipe,
    locals: &[(PathBuf, String)],
    pairs: &[(String, String)],
    cancel: &CancelHandle,
) -> Result<(ReportResult, Vec<LogLine>), RunError> {
    let key = locals
        .iter()
        .map(|(_, k)| k.as_str())
        .collect::<Vec<_>>()
        .join(" + ");
    let inner = Arc::clone(&svc.0);
    let component = Arc::clone(&recipe.component);
    let (locals, pairs, cancel, k) = (locals.to_vec(), pairs.to_vec(), cancel.clone(), key.clone());
    let output: RecipeOutput = on_blocking_thread(move || {
        for (local, key) in &locals {
            check_export(local, key)?;
        }
        inner
            .host
            .run_labelled_cancellable(&component, &locals, &pairs, &cancel)
            .map_err(|e| host_error(e, k))
    })
    .await?;
    let tables = output
        .tables
        .into_iter()
        .map(|t| (combined_csv_file(&t.name), t))
        .collect();
    let figures = output
        .figures
        .into_iter()
        .map(|f| (combined_svg_file(&f.name), f))
        .collect();
    Ok((
        ReportResult {
            key,
            tables,
            figures,
            notes: output.notes,
        },
        output.log,
    ))
}

/// Checks that the file is an nsys export and runs the recipe on it, on a blocking thread.
async fn run_one(
    svc: &Service,
    recipe: &Recipe,
    local: &Path,
    pairs: &[(String, String)],
    cancel: &CancelHandle,
    report: &ReportKey,
) -> Result<(ReportResult, Vec<LogLine>), RunError> {
    let key = report.to_key();
    let inner = Arc::clone(&svc.0);
    let component = Arc::clone(&recipe.component);
    let (local, pairs, cancel, k) = (
        local.to_path_buf(),
        pairs.to_vec(),
        cancel.clone(),
        key.clone(),
    );
    let output = on_blocking_thread(move || {
        check_export(&local, &k)?;
        inner
            .host
            .run_cancellable(&component, &local, &pairs, &cancel)
            .map_err(|e| host_error(e, k))
    })
    .await?;
    let tables = output
        .tables
        .into_iter()
        .map(|t| (csv_file(report, &t.name), t))
        .collect();
    let figures = output
        .figures
        .into_iter()
        .map(|f| (svg_file(report, &f.name), f))
        .collect();
    Ok((
        ReportResult {
            key,
            tables,
            figures,
            notes: output.notes,
        },
        output.log,
    ))
}

/// Renders the CSVs, the notebook and the HTML page and stores them under the job's prefix.
async fn upload(
    svc: &Service,
    job: &Job,
    info: &RecipeInfo,
    reports: Vec<String>,
    results: &[ReportResult],
    cancel: &CancelHandle,
) -> Result<Produced, RunError> {
    let header = JobHeader {
        id: job.id,
        recipe: info,
        args: &job.args,
        tag: &job.tag,
        session: &job.session,
        collection: job.collection.as_deref(),
    };
    let mut outputs: Vec<(String, Vec<u8>)> = Vec::new();
    let mut notes = Vec::new();
    for r in results {
        for (file, table) in &r.tables {
            outputs.push((file.clone(), table_to_csv(table).into_bytes()));
        }
        for (file, figure) in &r.figures {
            outputs.push((file.clone(), figure.svg.clone().into_bytes()));
        }
        notes.extend(r.notes.iter().map(|n| format!("{}: {n}", r.key)));
    }
    let notebook = serde_json::to_vec_pretty(&render::notebook(&header, results))
        .map_err(|e| RunError::Internal(format!("cannot encode the notebook: {e}")))?;
    outputs.push((NOTEBOOK_FILE.into(), notebook));
    outputs.push((
        HTML_FILE.into(),
        render::html(&header, results).into_bytes(),
    ));
    let prefix = output_prefix(&job.tag, &job.session, job.id);
    let mut files = Vec::new();
    for (name, bytes) in outputs {
        check(cancel)?;
        let key = format!("{prefix}{name}");
        svc.0.store.put_bytes(&key, &bytes).await.map_err(storage)?;
        files.push(OutputFile {
            name,
            size: bytes.len() as u64,
            key,
        });
    }
    Ok(Produced {
        reports,
        files,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::without_server_paths;

    #[test]
    fn failure_reasons_name_the_services_directories_instead_of_showing_them() {
        let paths = vec![
            (PathBuf::from("/srv/state/work/"), "<job work dir>"),
            (PathBuf::from("/srv/state/reports"), "<report storage>"),
        ];
        let reason = "report t/s/1/a.sqlite: cannot open /srv/state/work/5f/a.sqlite: file is \
                      not a database; file system operation on /srv/state/reports/t/s/1/a.sqlite";
        assert_eq!(
            without_server_paths(reason, &paths),
            "report t/s/1/a.sqlite: cannot open <job work dir>/5f/a.sqlite: file is not a \
             database; file system operation on <report storage>/t/s/1/a.sqlite"
        );
        assert_eq!(without_server_paths("no path here", &paths), "no path here");
    }
}
