//! Loading and calling recipe components. Owns the wasmtime `Engine`, the compiled-component
//! cache (in memory, and on disk through [`crate::compile_cache`] when given a directory) and
//! the per-call sandbox (a fresh `Store` with fuel and memory limits, holding the
//! run's read-only report and the cursors the recipe opened). It does not touch storage; the
//! SQLite side lives in `report`.
//!
//! Cancellation: [`CancelHandle::cancel`] sets the run's [`StopFlag`] (every SQLite call of the
//! run is interrupted at its next progress check) and bumps the engine's epoch, so Wasm code
//! running in a store whose flag is set traps at its next epoch check (function entry or loop
//! back-edge). Stores of other runs see the bump, find their flag clear and carry on.
//!
//! ```text
//!  run(component, report, args)
//!    ReportDb::open(report) ──> Store { fuel, memory, ReportDb, cursors } ──> call_run(args)
//!        guest: report.query(...) ──> ReportDb::query ──> Cursor (Resource in the store)
//!    <── RecipeOutput { tables, notes, figures, log }
//!
//!  run_reports(component of the multi-recipe world, [r0, r1, ...], args)
//!    map(args, 0, n) on r0 | map(args, 1, n) on r1 | ...   (a fresh Store each, same limits)
//!    reduce(args, [(label0, partial0), ...]) with no report ──> RecipeOutput
//! ```

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use sha2::{Digest, Sha256};
use wasmtime::{
    component::{Component, HasSelf, Linker, Resource, ResourceTable},
    Config, Engine, Store, UpdateDeadline,
};

use crate::compile_cache::DiskCache;
pub use crate::compile_cache::LoadSource;
use crate::report::{self, QueryError, QueryLimits, ReportDb, ReportError, StopFlag};
pub use crate::sandbox::CallFailure;
use crate::sandbox::{classify, CallLimiter, CallLog};

mod bindings {
    wasmtime::component::bindgen!({
        world: "recipe",
        path: "../../wit",
        with: {
            "nsight:recipe/report.cursor": crate::report::Cursor,
        },
        imports: { default: trappable },
    });
}

/// The `multi-recipe` world: the same imports and types as `recipe` (shared through `with`),
/// other exports.
mod multi_bindings {
    wasmtime::component::bindgen!({
        world: "multi-recipe",
        path: "../../wit",
        with: {
            "nsight:recipe/types": crate::recipe_host::bindings::nsight::recipe::types,
            "nsight:recipe/host": crate::recipe_host::bindings::nsight::recipe::host,
            "nsight:recipe/report": crate::recipe_host::bindings::nsight::recipe::report,
        },
        imports: { default: trappable },
    });
}

pub use bindings::nsight::recipe::{
    host::Level,
    types::{Argument, Column, ColumnKind, Figure, Output, RecipeInfo, Table, Value},
};
use bindings::{
    nsight::recipe::{host, report as wit_report},
    Recipe,
};
use multi_bindings::MultiRecipe;

/// Which world a component implements (told apart by its exports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecipeKind {
    /// `recipe`: `run` on one report.
    Single,
    /// `multi-recipe`: `map` over several reports, then `reduce`.
    Multi,
}

/// What one recipe call may use.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Wasm fuel (roughly, instructions) per call.
    pub fuel: u64,
    /// Linear memory per instance, in bytes.
    pub memory_bytes: usize,
    /// Bounds on the recipe's SQL.
    pub query: QueryLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            fuel: 10_000_000_000,
            memory_bytes: 512 << 20,
            query: QueryLimits::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RecipeHostError {
    #[error("cannot configure the Wasm engine")]
    Engine(#[source] wasmtime::Error),
    #[error("cannot read recipe component {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a valid recipe component")]
    Compile {
        path: String,
        #[source]
        source: wasmtime::Error,
    },
    #[error("cannot use {path} as the compiled-component cache")]
    CacheDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("recipe component does not fit the recipe or multi-recipe world (wit/recipe.wit)")]
    Instantiate(#[source] wasmtime::Error),
    /// The call stopped before returning: out of fuel, over the memory limit, a trap.
    #[error("recipe call `{call}` stopped")]
    Call {
        call: &'static str,
        #[source]
        source: CallFailure,
    },
    #[error("cannot open report {path}")]
    OpenReport {
        path: String,
        #[source]
        source: ReportError,
    },
    /// The recipe returned an error (bad arguments, a refused query, a broken report).
    #[error("recipe failed: {0}")]
    Recipe(String),
    #[error("recipe returned a malformed output: {0}")]
    Output(String),
    /// The run was stopped through its [`CancelHandle`].
    #[error("the run was cancelled")]
    Cancelled,
}

/// Stops one run from another thread (see the module doc). Cheap to clone.
#[derive(Clone)]
pub struct CancelHandle {
    stop: StopFlag,
    engine: Engine,
}

impl std::fmt::Debug for CancelHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelHandle")
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl CancelHandle {
    /// Stops the run: its SQL and its Wasm code are interrupted within milliseconds.
    pub fn cancel(&self) {
        self.stop.stop();
        self.engine.increment_epoch();
    }

    pub fn is_cancelled(&self) -> bool {
        self.stop.is_stopped()
    }
}

/// A line the recipe wrote to the job's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub level: Level,
    pub message: String,
}

/// What a run produced: the recipe's output and its log.
#[derive(Debug, Clone)]
pub struct RecipeOutput {
    pub tables: Vec<Table>,
    pub notes: Vec<String>,
    pub figures: Vec<Figure>,
    pub log: Vec<LogLine>,
}

impl RecipeOutput {
    /// The table named `name`, if the recipe produced one.
    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.iter().find(|t| t.name == name)
    }
}

/// Per-call state: the limits, the log lines, the report and the open cursors.
struct CallState {
    limits: CallLimiter,
    log: CallLog,
    report: Option<ReportDb>,
    resources: ResourceTable,
}

impl host::Host for CallState {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        tracing::debug!(?level, %message, "recipe log");
        self.log.push(level, message);
        Ok(())
    }
}

impl bindings::nsight::recipe::types::Host for CallState {}

fn to_sql(v: Value) -> report::Value {
    match v {
        Value::Null => report::Value::Null,
        Value::Int(i) => report::Value::Integer(i),
        Value::Real(r) => report::Value::Real(r),
        Value::Text(s) => report::Value::Text(s),
        Value::Blob(b) => report::Value::Blob(b),
    }
}

fn from_sql(v: report::Value) -> Value {
    match v {
        report::Value::Null => Value::Null,
        report::Value::Integer(i) => Value::Int(i),
        report::Value::Real(r) => Value::Real(r),
        report::Value::Text(s) => Value::Text(s),
        report::Value::Blob(b) => Value::Blob(b),
    }
}

fn wit_column(c: report::ColumnBuf) -> wit_report::ColumnValues {
    use wit_report::{ColumnValues as W, IntColumn, RealColumn};
    match c {
        report::ColumnBuf::Ints { values, nulls } => W::Ints(IntColumn { values, nulls }),
        report::ColumnBuf::Reals { values, nulls } => W::Reals(RealColumn { values, nulls }),
        report::ColumnBuf::Values(v) => W::Values(v.into_iter().map(from_sql).collect()),
    }
}

fn wit_error(e: QueryError) -> wit_report::QueryError {
    use wit_report::QueryError as W;
    match e {
        QueryError::NotReadOnly(m) => W::NotReadOnly(m),
        QueryError::Invalid(m) => W::Invalid(m),
        QueryError::Interrupted(m) => W::Interrupted(m),
        QueryError::TooManyCursors(m) => W::TooManyCursors(m),
        QueryError::Failed(m) => W::Failed(m),
    }
}

impl CallState {
    fn report(&self) -> Result<&ReportDb, QueryError> {
        self.report
            .as_ref()
            .ok_or_else(|| QueryError::Failed("no report is open in this call".into()))
    }
}

impl wit_report::Host for CallState {
    fn tables(&mut self) -> wasmtime::Result<Vec<String>> {
        Ok(self
            .report()
            .and_then(ReportDb::tables)
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "listing the report's tables failed");
                Vec::new()
            }))
    }

    fn columns(&mut self, table: String) -> wasmtime::Result<Vec<String>> {
        Ok(self
            .report()
            .and_then(|r| r.columns(&table))
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, table, "listing a table's columns failed");
                Vec::new()
            }))
    }

    fn query(
        &mut self,
        sql: String,
        params: Vec<Value>,
    ) -> wasmtime::Result<Result<Resource<report::Cursor>, wit_report::QueryError>> {
        let params = params.into_iter().map(to_sql).collect();
        match self.report().and_then(|r| r.query(&sql, params)) {
            Ok(cursor) => Ok(Ok(self.resources.push(cursor)?)),
            Err(e) => {
                tracing::debug!(error = %e, sql, "recipe query refused");
                Ok(Err(wit_error(e)))
            }
        }
    }
}

impl wit_report::HostCursor for CallState {
    fn columns(&mut self, cursor: Resource<report::Cursor>) -> wasmtime::Result<Vec<String>> {
        Ok(self.resources.get(&cursor)?.columns().to_vec())
    }

    fn next_batch(
        &mut self,
        cursor: Resource<report::Cursor>,
        max_rows: u32,
    ) -> wasmtime::Result<Result<Option<Vec<Vec<Value>>>, wit_report::QueryError>> {
        let batch = self.resources.get_mut(&cursor)?.next_batch(max_rows);
        Ok(batch
            .map(|b| {
                b.map(|rows| {
                    rows.into_iter()
                        .map(|r| r.into_iter().map(from_sql).collect())
                        .collect()
                })
            })
            .map_err(wit_error))
    }

    fn next_columns(
        &mut self,
        cursor: Resource<report::Cursor>,
        max_rows: u32,
    ) -> wasmtime::Result<Result<Option<Vec<wit_report::ColumnValues>>, wit_report::QueryError>>
    {
        let batch = self.resources.get_mut(&cursor)?.next_columns(max_rows);
        Ok(batch
            .map(|b| b.map(|b| b.columns.into_iter().map(wit_column).collect()))
            .map_err(wit_error))
    }

    fn drop(&mut self, cursor: Resource<report::Cursor>) -> wasmtime::Result<()> {
        self.resources.delete(cursor)?;
        Ok(())
    }
}

/// [`crate::output_check::check_output`], as the host's error.
fn check_output(output: &Output) -> Result<(), RecipeHostError> {
    crate::output_check::check_output(output).map_err(RecipeHostError::Output)
}

/// Compiles recipe components once (per process, and per cache directory when there is one)
/// and runs each call in a fresh sandbox.
pub struct RecipeHost {
    engine: Engine,
    linker: Linker<CallState>,
    limits: Limits,
    compiled: Mutex<HashMap<[u8; 32], Arc<Component>>>,
    disk: Option<DiskCache>,
}

impl std::fmt::Debug for RecipeHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecipeHost")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl RecipeHost {
    pub fn new(limits: Limits) -> Result<Self, RecipeHostError> {
        let mut config = Config::new();
        config.consume_fuel(true);
        config.epoch_interruption(true);
        let engine = Engine::new(&config).map_err(RecipeHostError::Engine)?;
        let mut linker = Linker::new(&engine);
        Recipe::add_to_linker::<_, HasSelf<CallState>>(&mut linker, |s| s)
            .map_err(RecipeHostError::Engine)?;
        Ok(Self {
            engine,
            linker,
            limits,
            compiled: Mutex::new(HashMap::new()),
            disk: None,
        })
    }

    /// A host that also keeps compiled components in `dir` (created if needed), so that other
    /// processes with the same wasmtime version and configuration load them without compiling.
    pub fn with_cache_dir(limits: Limits, dir: &Path) -> Result<Self, RecipeHostError> {
        let mut host = Self::new(limits)?;
        host.disk = Some(DiskCache::new(dir, &host.engine).map_err(|source| {
            RecipeHostError::CacheDir {
                path: dir.display().to_string(),
                source,
            }
        })?);
        Ok(host)
    }

    /// The on-disk cache directory, if there is one.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        self.disk.as_ref().map(|d| d.dir().to_path_buf())
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Compiles (or takes from the cache, by content digest) the component at `path`.
    pub fn load(&self, path: &Path) -> Result<Arc<Component>, RecipeHostError> {
        self.load_traced(path).map(|(c, _)| c)
    }

    /// [`RecipeHost::load`], also saying where the compiled component came from: this
    /// process's cache, the disk cache, or the compiler (an unusable disk entry is compiled
    /// again and replaced, never used).
    pub fn load_traced(
        &self,
        path: &Path,
    ) -> Result<(Arc<Component>, LoadSource), RecipeHostError> {
        let bytes = std::fs::read(path).map_err(|source| RecipeHostError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        if let Some(c) = self.cache().get(&digest) {
            return Ok((Arc::clone(c), LoadSource::Memory));
        }
        let key = self.disk.as_ref().map(|d| d.key(&bytes));
        let mut source = LoadSource::Compiled;
        if let (Some(disk), Some(key)) = (&self.disk, &key) {
            match disk.get(&self.engine, key) {
                Ok(Some(component)) => {
                    tracing::debug!(path = %path.display(), "recipe component from the disk cache");
                    let component = Arc::new(component);
                    self.cache().insert(digest, Arc::clone(&component));
                    return Ok((component, LoadSource::Disk));
                }
                Ok(None) => {}
                Err(reason) => {
                    tracing::warn!(path = %path.display(), entry = %disk.entry_path(key).display(), %reason, "compiled-component cache entry unusable; compiling again");
                    source = LoadSource::Recompiled(reason);
                }
            }
        }
        let component =
            Component::new(&self.engine, &bytes).map_err(|source| RecipeHostError::Compile {
                path: path.display().to_string(),
                source,
            })?;
        if let (Some(disk), Some(key)) = (&self.disk, &key) {
            if let Err(e) = disk.put(key, &component) {
                tracing::warn!(dir = %disk.dir().display(), error = %e, "cannot store a compiled component in the cache");
            }
        }
        let component = Arc::new(component);
        self.cache().insert(digest, Arc::clone(&component));
        Ok((component, source))
    }

    /// Which world `component` implements.
    pub fn kind(&self, component: &Component) -> RecipeKind {
        let ty = component.component_type();
        if ty.get_export(&self.engine, "reduce").is_some() {
            RecipeKind::Multi
        } else {
            RecipeKind::Single
        }
    }

    /// Number of distinct compiled components held.
    pub fn cached_components(&self) -> usize {
        self.cache().len()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Arc<Component>>> {
        // A poisoned cache only means another thread panicked mid-insert; the map is still valid.
        self.compiled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A handle for [`RecipeHost::run_cancellable`].
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle {
            stop: StopFlag::default(),
            engine: self.engine.clone(),
        }
    }

    fn store(
        &self,
        report: Option<ReportDb>,
        stop: StopFlag,
    ) -> Result<Store<CallState>, RecipeHostError> {
        let mut store = Store::new(
            &self.engine,
            CallState {
                limits: CallLimiter::new(self.limits.memory_bytes),
                log: CallLog::default(),
                report,
                resources: ResourceTable::new(),
            },
        );
        store.limiter(|s| &mut s.limits);
        store
            .set_fuel(self.limits.fuel)
            .map_err(RecipeHostError::Engine)?;
        // Every epoch bump (a cancel of any run) calls this; only this run's flag stops it.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            if stop.is_stopped() {
                Err(wasmtime::Error::msg("the run was cancelled"))
            } else {
                Ok(UpdateDeadline::Continue(1))
            }
        });
        Ok(store)
    }

    /// Calls the recipe's `describe` in a fresh sandbox (with no report).
    pub fn describe(&self, component: &Component) -> Result<RecipeInfo, RecipeHostError> {
        let mut store = self.store(None, StopFlag::default())?;
        match self.kind(component) {
            RecipeKind::Single => {
                let recipe = Recipe::instantiate(&mut store, component, &self.linker)
                    .map_err(RecipeHostError::Instantiate)?;
                self.call(&mut store, "describe", |s| recipe.call_describe(s))
            }
            RecipeKind::Multi => {
                let recipe = MultiRecipe::instantiate(&mut store, component, &self.linker)
                    .map_err(RecipeHostError::Instantiate)?;
                self.call(&mut store, "describe", |s| recipe.call_describe(s))
            }
        }
    }

    /// Runs one export call in `store`, explaining a call that stopped early (fuel, memory,
    /// trap with the recipe's panic message) from what the store saw.
    fn call<T>(
        &self,
        store: &mut Store<CallState>,
        call: &'static str,
        f: impl FnOnce(&mut Store<CallState>) -> wasmtime::Result<T>,
    ) -> Result<T, RecipeHostError> {
        f(store).map_err(|e| {
            let state = store.data();
            RecipeHostError::Call {
                call,
                source: classify(e, self.limits.fuel, &state.limits, &state.log),
            }
        })
    }

    /// Runs the recipe on the report at `report` (an nsys SQLite export, opened read-only) in
    /// a fresh sandbox. `args` are (name, value) pairs, names without `--`. This blocks for as
    /// long as the recipe runs: call it off any async runtime.
    pub fn run(
        &self,
        component: &Component,
        report: &Path,
        args: &[(String, String)],
    ) -> Result<RecipeOutput, RecipeHostError> {
        self.run_cancellable(component, report, args, &self.cancel_handle())
    }

    /// [`RecipeHost::run`] that `cancel` can stop from another thread; a stopped run returns
    /// [`RecipeHostError::Cancelled`] whatever the recipe was doing.
    pub fn run_cancellable(
        &self,
        component: &Component,
        report: &Path,
        args: &[(String, String)],
        cancel: &CancelHandle,
    ) -> Result<RecipeOutput, RecipeHostError> {
        let stopped = |r: RecipeHostError| {
            if cancel.is_cancelled() {
                RecipeHostError::Cancelled
            } else {
                r
            }
        };
        if cancel.is_cancelled() {
            return Err(RecipeHostError::Cancelled);
        }
        if self.kind(component) == RecipeKind::Multi {
            return self.run_reports_cancellable(component, &[report.to_path_buf()], args, cancel);
        }
        let db = ReportDb::open_stoppable(report, self.limits.query, cancel.stop.clone())
            .map_err(|source| RecipeHostError::OpenReport {
                path: report.display().to_string(),
                source,
            })
            .map_err(stopped)?;
        let mut store = self.store(Some(db), cancel.stop.clone())?;
        let recipe = Recipe::instantiate(&mut store, component, &self.linker)
            .map_err(RecipeHostError::Instantiate)
            .map_err(stopped)?;
        let result = self
            .call(&mut store, "run", |s| recipe.call_run(s, args))
            .map_err(stopped)?;
        if cancel.is_cancelled() {
            return Err(RecipeHostError::Cancelled);
        }
        let output = result.map_err(RecipeHostError::Recipe)?;
        check_output(&output)?;
        let log = store.data_mut().log.take();
        Ok(RecipeOutput {
            tables: output.tables,
            notes: output.notes,
            figures: output.figures,
            log,
        })
    }

    /// Runs a recipe over `reports`: a `multi-recipe` component maps over them (one fresh
    /// sandbox per report, in order) and reduces the partial results (in a sandbox with no
    /// report); a `recipe` component takes exactly one report.
    pub fn run_reports(
        &self,
        component: &Component,
        reports: &[PathBuf],
        args: &[(String, String)],
    ) -> Result<RecipeOutput, RecipeHostError> {
        self.run_reports_cancellable(component, reports, args, &self.cancel_handle())
    }

    /// [`RecipeHost::run_reports`] that `cancel` can stop from another thread.
    pub fn run_reports_cancellable(
        &self,
        component: &Component,
        reports: &[PathBuf],
        args: &[(String, String)],
        cancel: &CancelHandle,
    ) -> Result<RecipeOutput, RecipeHostError> {
        let labelled: Vec<(PathBuf, String)> = reports
            .iter()
            .cloned()
            .zip(report_labels(reports))
            .collect();
        self.run_labelled_cancellable(component, &labelled, args, cancel)
    }

    /// [`RecipeHost::run_reports_cancellable`] with each report's label given (what `reduce`
    /// gets and what prefixes errors and log lines; the service passes storage keys).
    pub fn run_labelled_cancellable(
        &self,
        component: &Component,
        reports: &[(PathBuf, String)],
        args: &[(String, String)],
        cancel: &CancelHandle,
    ) -> Result<RecipeOutput, RecipeHostError> {
        if self.kind(component) == RecipeKind::Single {
            return match reports {
                [(one, _)] => self.run_cancellable(component, one, args, cancel),
                _ => Err(RecipeHostError::Recipe(format!(
                    "this recipe reads one report at a time; got {} (run it once per report)",
                    reports.len()
                ))),
            };
        }
        let stopped = |r: RecipeHostError| {
            if cancel.is_cancelled() {
                RecipeHostError::Cancelled
            } else {
                r
            }
        };
        let count = u32::try_from(reports.len()).unwrap_or(u32::MAX);
        let mut partials = Vec::with_capacity(reports.len());
        let mut log = Vec::new();
        for (index, (path, label)) in (0u32..).zip(reports) {
            let label = label.clone();
            if cancel.is_cancelled() {
                return Err(RecipeHostError::Cancelled);
            }
            let db = ReportDb::open_stoppable(path, self.limits.query, cancel.stop.clone())
                .map_err(|source| RecipeHostError::OpenReport {
                    path: path.display().to_string(),
                    source,
                })
                .map_err(stopped)?;
            let mut store = self.store(Some(db), cancel.stop.clone())?;
            let recipe = MultiRecipe::instantiate(&mut store, component, &self.linker)
                .map_err(RecipeHostError::Instantiate)
                .map_err(stopped)?;
            let result = self
                .call(&mut store, "map", |s| {
                    recipe.call_map(s, args, index, count)
                })
                .map_err(stopped)?;
            if cancel.is_cancelled() {
                return Err(RecipeHostError::Cancelled);
            }
            let partial = result.map_err(|e| RecipeHostError::Recipe(format!("{label}: {e}")))?;
            check_output(&partial)?;
            log.extend(store.data_mut().log.take().into_iter().map(|l| LogLine {
                level: l.level,
                message: format!("{label}: {}", l.message),
            }));
            partials.push((label, partial));
        }
        let mut store = self.store(None, cancel.stop.clone())?;
        let recipe = MultiRecipe::instantiate(&mut store, component, &self.linker)
            .map_err(RecipeHostError::Instantiate)
            .map_err(stopped)?;
        let result = self
            .call(&mut store, "reduce", |s| {
                recipe.call_reduce(s, args, &partials)
            })
            .map_err(stopped)?;
        if cancel.is_cancelled() {
            return Err(RecipeHostError::Cancelled);
        }
        let output = result.map_err(RecipeHostError::Recipe)?;
        check_output(&output)?;
        log.append(&mut store.data_mut().log.take());
        Ok(RecipeOutput {
            tables: output.tables,
            notes: output.notes,
            figures: output.figures,
            log,
        })
    }
}

/// The labels `reduce` gets: each report's file name, or its whole path when two reports share
/// a file name.
fn report_labels(reports: &[PathBuf]) -> Vec<String> {
    let names: Vec<String> = reports
        .iter()
        .map(|p| {
            p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let unique = names
        .iter()
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        == names.len();
    if unique {
        names
    } else {
        reports.iter().map(|p| p.display().to_string()).collect()
    }
}
