//! One report (an `nsys export --type sqlite` file) opened read-only for one recipe run: what
//! the `report` import of wit/recipe.wit does on the host. It owns the SQLite connections and
//! their guards; it knows nothing of Wasm.
//!
//! ```text
//!  ReportDb::open(path) ── read-only connection: tables(), columns()
//!        │ query(sql, params)
//!        v
//!  Cursor ── its own read-only connection on a worker thread, reading one batch ahead;
//!            next_batch(max) gives rows, next_columns(max) a ColumnBatch
//! ```
//!
//! Guards, on every connection: `SQLITE_OPEN_READ_ONLY | SQLITE_OPEN_NO_MUTEX` (no URI
//! names, no create), `PRAGMA query_only`, no attached databases and no PRAGMA assignments (an
//! authorizer refuses them; the ATTACHED limit is 0 too), only statements SQLite calls read-only
//! (`sqlite3_stmt_readonly`), one statement per query, and a progress handler that interrupts
//! any single call into SQLite (a prepare or one batch) running past
//! [`QueryLimits::call_time`].

use std::{
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use rusqlite::{
    hooks::{AuthAction, AuthContext, Authorization},
    limits::Limit,
    Connection, ErrorCode, OpenFlags,
};

pub use crate::columns::{ColumnBatch, ColumnBuf};
pub use crate::cursor::Cursor;
pub use rusqlite::types::Value;

/// Bounds on the SQL a recipe may run.
#[derive(Debug, Clone, Copy)]
pub struct QueryLimits {
    /// Longest one call into SQLite (preparing a statement, or reading one batch) may run
    /// before it is interrupted.
    pub call_time: Duration,
    /// Most cursors one run may hold open at once (each holds a connection and a thread).
    pub open_cursors: usize,
    /// Most rows in one batch, whatever the recipe asks for.
    pub batch_rows: u32,
    /// A batch stops early once its text and blob values pass this many bytes.
    pub batch_bytes: usize,
    /// SQLite's page cache per connection (`PRAGMA cache_size`), in KiB. Recipes scan
    /// tables once, and the OS keeps the file's pages cached anyway, so SQLite's default
    /// (2,000 KiB per connection, and every cursor has its own) mostly held pages that were
    /// not read again; interior B-tree pages fit many times over.
    pub page_cache_kib: u32,
    /// Largest text or blob (or row) a query may make, in bytes (`SQLITE_LIMIT_LENGTH`): a
    /// report's values are small, and `randomblob(6e9)` must not cost the service 6 GB.
    pub value_bytes: u32,
}

impl Default for QueryLimits {
    fn default() -> Self {
        Self {
            call_time: Duration::from_secs(60),
            open_cursors: 16,
            batch_rows: 16_384,
            batch_bytes: 16 << 20,
            page_cache_kib: 256,
            value_bytes: 32 << 20,
        }
    }
}

/// Why a report cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot open the file read-only")]
    Open(#[source] rusqlite::Error),
    #[error("the file is not a SQLite database")]
    NotADatabase(#[source] rusqlite::Error),
    #[error("cannot read the database schema")]
    Schema(#[source] rusqlite::Error),
    #[error("cannot set up the read-only guards")]
    Guard(#[source] rusqlite::Error),
}

/// Why a query was refused or stopped; the message is for people (it ends up in the recipe's
/// error or notes). Mirrors `query-error` in wit/recipe.wit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("statement refused, it is not read-only: {0}")]
    NotReadOnly(String),
    #[error("invalid statement: {0}")]
    Invalid(String),
    #[error("query interrupted: {0}")]
    Interrupted(String),
    #[error("too many open cursors: {0}")]
    TooManyCursors(String),
    #[error("query failed: {0}")]
    Failed(String),
}

/// Set once to stop every SQLite call of a run at the next progress check (a cancelled job).
/// Clones share the flag.
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A deadline the progress handler of one connection checks; re-armed before each call. It
/// has also passed once the run's [`StopFlag`] is set.
#[derive(Debug)]
pub(crate) struct Deadline {
    base: Instant,
    /// Nanoseconds after `base`; `u64::MAX` when disarmed.
    at: AtomicU64,
    stop: StopFlag,
    /// Set when whoever waits for this connection's work has gone (a dropped cursor).
    abandoned: StopFlag,
}

impl Deadline {
    pub(crate) fn new(stop: StopFlag) -> Arc<Self> {
        Self::with_abandon(stop, StopFlag::default())
    }

    /// A deadline that has also passed once `abandoned` is set.
    pub(crate) fn with_abandon(stop: StopFlag, abandoned: StopFlag) -> Arc<Self> {
        Arc::new(Self {
            base: Instant::now(),
            at: AtomicU64::new(u64::MAX),
            stop,
            abandoned,
        })
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.is_stopped()
    }

    pub(crate) fn arm(&self, within: Duration) {
        let at = self.base.elapsed().saturating_add(within).as_nanos();
        self.at
            .store(u64::try_from(at).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    fn passed(&self) -> bool {
        if self.stop.is_stopped() || self.abandoned.is_stopped() {
            return true;
        }
        let now = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        now > self.at.load(Ordering::Relaxed)
    }
}

/// SQLite VM steps between two deadline checks.
const PROGRESS_STEPS: i32 = 10_000;

/// Opens `path` read-only with every guard in place, a page cache of
/// [`QueryLimits::page_cache_kib`], and checks that it is a SQLite database.
pub(crate) fn open_guarded(
    path: &Path,
    limits: &QueryLimits,
    deadline: &Arc<Deadline>,
) -> Result<Connection, ReportError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags).map_err(ReportError::Open)?;
    conn.pragma_update(None, "query_only", true)
        .map_err(ReportError::Guard)?;
    // Negative: KiB rather than pages. Set before the authorizer, which refuses PRAGMAs.
    // It reads the file's header, so it is the first thing to fail on a file that is not one.
    conn.pragma_update(None, "cache_size", -i64::from(limits.page_cache_kib.max(1)))
        .map_err(|e| not_a_database_or(e, ReportError::Guard))?;
    conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)
        .map_err(ReportError::Guard)?;
    conn.set_limit(
        Limit::SQLITE_LIMIT_LENGTH,
        i32::try_from(limits.value_bytes).unwrap_or(i32::MAX),
    )
    .map_err(ReportError::Guard)?;
    conn.authorizer(Some(authorize))
        .map_err(ReportError::Guard)?;
    let d = Arc::clone(deadline);
    conn.progress_handler(PROGRESS_STEPS, Some(move || d.passed()))
        .map_err(ReportError::Guard)?;
    // Reading the schema is what fails on a file that is not a database.
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })
    .map_err(|e| not_a_database_or(e, ReportError::Schema))?;
    Ok(conn)
}

/// [`ReportError::NotADatabase`] when SQLite says so, else `other`.
fn not_a_database_or(e: rusqlite::Error, other: fn(rusqlite::Error) -> ReportError) -> ReportError {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => ReportError::NotADatabase(e),
        _ => other(e),
    }
}

/// PRAGMAs that take an argument and only read (`PRAGMA table_info(t)`).
const READING_PRAGMAS: &[&str] = &[
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
];

/// PRAGMAs that answer with the server's file paths (where the service keeps reports), as a
/// statement or as a table (`SELECT * FROM pragma_database_list`).
const PATH_PRAGMAS: &[&str] = &[
    "database_list",
    "temp_store_directory",
    "data_store_directory",
];

/// Whether `name` (any case) is one of [`PATH_PRAGMAS`], as a PRAGMA or its `pragma_` table.
fn reveals_paths(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    let name = name.strip_prefix("pragma_").unwrap_or(&name);
    PATH_PRAGMAS.contains(&name)
}

/// Refuses, when a statement is prepared, what `sqlite3_stmt_readonly` lets through but a
/// recipe must not do: attach or detach databases, set PRAGMAs (`PRAGMA query_only = 0`), and
/// read the server's file paths (`PRAGMA database_list`).
fn authorize(ctx: AuthContext<'_>) -> Authorization {
    match ctx.action {
        AuthAction::Attach { .. } | AuthAction::Detach { .. } => Authorization::Deny,
        AuthAction::Pragma { pragma_name, .. } if reveals_paths(pragma_name) => Authorization::Deny,
        AuthAction::Read { table_name, .. } if reveals_paths(table_name) => Authorization::Deny,
        AuthAction::Pragma {
            pragma_name,
            pragma_value: Some(_),
        } if !READING_PRAGMAS.contains(&pragma_name.to_ascii_lowercase().as_str()) => {
            Authorization::Deny
        }
        _ => Authorization::Allow,
    }
}

/// Maps an error from preparing a statement.
pub(crate) fn prepare_error(e: rusqlite::Error, limits: &QueryLimits, stopped: bool) -> QueryError {
    match e.sqlite_error_code() {
        Some(ErrorCode::AuthorizationForStatementDenied) => QueryError::NotReadOnly(
            "a recipe may not ATTACH or DETACH databases, set PRAGMAs or read the server's \
             file paths; it reads only its own report"
                .into(),
        ),
        Some(ErrorCode::OperationInterrupted) => interrupted(limits, stopped),
        _ => match e {
            rusqlite::Error::MultipleStatement => {
                QueryError::Invalid("only one statement per query".into())
            }
            e => QueryError::Invalid(e.to_string()),
        },
    }
}

/// Maps an error from running a statement.
pub(crate) fn step_error(e: rusqlite::Error, limits: &QueryLimits, stopped: bool) -> QueryError {
    match e.sqlite_error_code() {
        Some(ErrorCode::OperationInterrupted) => interrupted(limits, stopped),
        Some(ErrorCode::ReadOnly) => QueryError::NotReadOnly(e.to_string()),
        Some(ErrorCode::TooBig) => QueryError::Failed(format!(
            "a value would be larger than the {} MiB a query may make ({e})",
            limits.value_bytes >> 20
        )),
        Some(ErrorCode::OutOfMemory) => QueryError::Failed(format!(
            "SQLite reached the service's memory limit for queries ({}); narrow the query \
             (fewer rows or columns, no huge sorts)",
            sqlite_heap_limit().map_or("none set".to_owned(), |b| format!("{} MiB", b >> 20))
        )),
        _ => QueryError::Failed(e.to_string()),
    }
}

/// Bounds the memory SQLite may hold in this process, every connection together
/// (`sqlite3_hard_heap_limit64`): past it, allocations fail and the query fails with the limit
/// named, instead of the service growing until the machine kills it. Set once at start.
#[allow(
    unsafe_code,
    reason = "rusqlite has no wrapper for sqlite3_hard_heap_limit64; the call takes and returns \
              plain integers and is thread-safe"
)]
pub fn limit_sqlite_heap(bytes: u64) {
    let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
    // SAFETY: a plain integer argument; SQLite serialises the change itself.
    unsafe {
        rusqlite::ffi::sqlite3_hard_heap_limit64(bytes);
    }
}

/// The limit [`limit_sqlite_heap`] set, if any.
#[allow(
    unsafe_code,
    reason = "a negative argument only reads the limit (sqlite3_hard_heap_limit64)"
)]
pub fn sqlite_heap_limit() -> Option<u64> {
    // SAFETY: a negative argument leaves the limit unchanged and returns it.
    let bytes = unsafe { rusqlite::ffi::sqlite3_hard_heap_limit64(-1) };
    u64::try_from(bytes).ok().filter(|&b| b > 0)
}

fn interrupted(limits: &QueryLimits, stopped: bool) -> QueryError {
    if stopped {
        return QueryError::Interrupted("the run was cancelled".into());
    }
    QueryError::Interrupted(format!(
        "stopped after running longer than {:?}",
        limits.call_time
    ))
}

/// The report of one run: a read-only connection for the schema, and cursors for queries.
pub struct ReportDb {
    path: PathBuf,
    conn: Connection,
    deadline: Arc<Deadline>,
    limits: QueryLimits,
    /// Cloned into each open cursor: the strong count less one is the number open.
    cursors: Arc<()>,
}

impl std::fmt::Debug for ReportDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportDb")
            .field("path", &self.path)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl ReportDb {
    /// Opens `path` read-only; fails when it cannot be opened or is not a SQLite database.
    pub fn open(path: &Path, limits: QueryLimits) -> Result<Self, ReportError> {
        Self::open_stoppable(path, limits, StopFlag::default())
    }

    /// [`ReportDb::open`], with every SQLite call of this report and its cursors interrupted
    /// once `stop` is set.
    pub fn open_stoppable(
        path: &Path,
        limits: QueryLimits,
        stop: StopFlag,
    ) -> Result<Self, ReportError> {
        let deadline = Deadline::new(stop);
        deadline.arm(limits.call_time);
        let conn = open_guarded(path, &limits, &deadline)?;
        Ok(Self {
            path: path.to_path_buf(),
            conn,
            deadline,
            limits,
            cursors: Arc::new(()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Tables and views, sorted by name.
    pub fn tables(&self) -> Result<Vec<String>, QueryError> {
        self.strings(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY name",
            None,
        )
    }

    /// The columns of `table` in declaration order; empty when there is no such table.
    pub fn columns(&self, table: &str) -> Result<Vec<String>, QueryError> {
        self.strings(
            "SELECT name FROM pragma_table_info(?1) ORDER BY cid",
            Some(table),
        )
    }

    fn strings(&self, sql: &str, param: Option<&str>) -> Result<Vec<String>, QueryError> {
        self.deadline.arm(self.limits.call_time);
        let mut stmt = self
            .conn
            .prepare(sql)
            .map_err(|e| prepare_error(e, &self.limits, self.deadline.stopped()))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(param), |r| r.get::<_, String>(0))
            .map_err(|e| step_error(e, &self.limits, self.deadline.stopped()))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(|e| step_error(e, &self.limits, self.deadline.stopped()))
    }

    /// Prepares one read-only statement with `params` bound to its `?` parameters, in order,
    /// and returns a cursor over its rows.
    pub fn query(&self, sql: &str, params: Vec<Value>) -> Result<Cursor, QueryError> {
        let open = Arc::strong_count(&self.cursors) - 1;
        if open >= self.limits.open_cursors {
            return Err(QueryError::TooManyCursors(format!(
                "{open} cursors are open, the limit is {}",
                self.limits.open_cursors
            )));
        }
        Cursor::start(
            self.path.clone(),
            sql.to_owned(),
            params,
            self.limits,
            self.deadline.stop.clone(),
            Arc::clone(&self.cursors),
        )
    }
}

#[cfg(test)]
mod heap_limit_tests {
    /// The service sets the limit at start (`--sqlite-memory-mib`); it is what SQLite then
    /// enforces and what the out-of-memory message names. 4 GiB: harmless to other tests in
    /// this process.
    #[test]
    fn the_heap_limit_is_set_and_read_back() {
        super::limit_sqlite_heap(4 << 30);
        assert_eq!(super::sqlite_heap_limit(), Some(4 << 30));
    }
}
