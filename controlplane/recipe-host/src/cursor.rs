//! A cursor over one read-only statement, stepped in batches. The statement borrows its
//! connection, so each cursor owns a connection and a statement on a worker thread and talks
//! to it over channels. The worker reads one batch ahead: once it has handed over a batch it
//! reads the next (the same size) while the recipe works on the one it got, then waits; it ends
//! when the cursor is dropped (a read ahead still running is interrupted).
//!
//! ```text
//!  Cursor::next_columns(max) ──max──> worker: the batch read ahead, or rows.next() × max
//!                            <──ColumnBatch── (then reads the next batch ahead)
//!  Cursor::next_batch(max) = next_columns(max) turned into rows
//!  drop(Cursor) ── abandon flag + request channel closed ──> worker drops statement, exits
//! ```

use std::{
    path::PathBuf,
    sync::{mpsc, Arc},
    thread::{self, JoinHandle},
};

use rusqlite::types::{Value, ValueRef};

use crate::{
    columns::ColumnBatch,
    report::{
        open_guarded, prepare_error, step_error, Deadline, QueryError, QueryLimits, StopFlag,
    },
};

type Batch = Vec<Vec<Value>>;
type Reply = Result<Option<ColumnBatch>, QueryError>;

/// The rows of one statement. Invariant: once a batch call returned `Ok(None)` or an error,
/// the worker is gone and later calls give `Ok(None)` or that error again.
pub struct Cursor {
    columns: Vec<String>,
    requests: Option<mpsc::Sender<u32>>,
    replies: mpsc::Receiver<Reply>,
    worker: Option<JoinHandle<()>>,
    /// Set once the statement is done or failed.
    finished: Option<Result<(), QueryError>>,
    /// Set when the cursor is dropped: interrupts a read ahead in progress.
    abandoned: StopFlag,
    _open: Arc<()>,
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("columns", &self.columns)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl Cursor {
    /// Opens `path` on a new worker thread, prepares and checks `sql`, binds `params`.
    pub(crate) fn start(
        path: PathBuf,
        sql: String,
        params: Vec<Value>,
        limits: QueryLimits,
        stop: StopFlag,
        open: Arc<()>,
    ) -> Result<Self, QueryError> {
        let (setup_tx, setup_rx) = mpsc::sync_channel::<Result<Vec<String>, QueryError>>(1);
        let (requests, request_rx) = mpsc::channel::<u32>();
        let (reply_tx, replies) = mpsc::sync_channel::<Reply>(1);
        let abandoned = StopFlag::default();
        let deadline = Deadline::with_abandon(stop, abandoned.clone());
        let worker = thread::Builder::new()
            .name("report-query".into())
            .spawn(move || {
                work(
                    &path,
                    &sql,
                    &params,
                    (limits, &deadline),
                    &setup_tx,
                    &request_rx,
                    &reply_tx,
                )
            })
            .map_err(|e| QueryError::Failed(format!("cannot start a query thread: {e}")))?;
        match setup_rx.recv() {
            Ok(Ok(columns)) => Ok(Self {
                columns,
                requests: Some(requests),
                replies,
                worker: Some(worker),
                finished: None,
                abandoned,
                _open: open,
            }),
            Ok(Err(e)) => {
                let _ = worker.join();
                Err(e)
            }
            Err(_) => {
                let _ = worker.join();
                Err(QueryError::Failed("the query thread stopped".into()))
            }
        }
    }

    /// The result's column names, in order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Up to `max_rows` rows (fewer when the host's batch bounds are reached), or `None` when
    /// the statement is done.
    pub fn next_batch(&mut self, max_rows: u32) -> Result<Option<Batch>, QueryError> {
        Ok(self.next_columns(max_rows)?.map(ColumnBatch::into_rows))
    }

    /// [`Cursor::next_batch`] in columnar form: at least one row, at most `max_rows`.
    pub fn next_columns(&mut self, max_rows: u32) -> Result<Option<ColumnBatch>, QueryError> {
        if let Some(done) = &self.finished {
            return done.clone().map(|()| None);
        }
        let reply = match &self.requests {
            Some(tx) if tx.send(max_rows).is_ok() => self
                .replies
                .recv()
                .unwrap_or_else(|_| Err(QueryError::Failed("the query thread stopped".into()))),
            _ => Err(QueryError::Failed("the query thread stopped".into())),
        };
        match &reply {
            Ok(Some(_)) => {}
            Ok(None) => self.finish(Ok(())),
            Err(e) => self.finish(Err(e.clone())),
        }
        reply
    }

    fn finish(&mut self, how: Result<(), QueryError>) {
        self.finished = Some(how);
        self.stop();
    }

    fn stop(&mut self) {
        // Closing the request channel ends the worker's loop once it waits for a request; a
        // read ahead it is still doing is interrupted by the flag, so the join returns at once.
        self.abandoned.stop();
        self.requests = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

impl Drop for Cursor {
    fn drop(&mut self) {
        self.stop();
    }
}

fn work(
    path: &std::path::Path,
    sql: &str,
    params: &[Value],
    (limits, deadline): (QueryLimits, &Arc<Deadline>),
    setup: &mpsc::SyncSender<Result<Vec<String>, QueryError>>,
    requests: &mpsc::Receiver<u32>,
    replies: &mpsc::SyncSender<Reply>,
) {
    deadline.arm(limits.call_time);
    let conn = match open_guarded(path, &limits, deadline) {
        Ok(c) => c,
        Err(e) => {
            let _ = setup.send(Err(QueryError::Failed(format!(
                "cannot reopen the report: {e}"
            ))));
            return;
        }
    };
    let mut stmt = match conn.prepare(sql) {
        Ok(s) => s,
        Err(e) => {
            let _ = setup.send(Err(prepare_error(e, &limits, deadline.stopped())));
            return;
        }
    };
    if !stmt.readonly() {
        let _ = setup.send(Err(QueryError::NotReadOnly(
            "only SELECT and read-only PRAGMA statements may run on a report".into(),
        )));
        return;
    }
    if stmt.parameter_count() != params.len() {
        let _ = setup.send(Err(QueryError::Invalid(format!(
            "the statement has {} parameters, {} values were given",
            stmt.parameter_count(),
            params.len()
        ))));
        return;
    }
    for (i, p) in params.iter().enumerate() {
        if let Err(e) = stmt.raw_bind_parameter(i + 1, p) {
            let _ = setup.send(Err(QueryError::Invalid(e.to_string())));
            return;
        }
    }
    let columns: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    let width = columns.len();
    if setup.send(Ok(columns)).is_err() {
        return;
    }
    let mut rows = stmt.raw_query();
    let mut read = |max_rows: usize| -> Reply {
        deadline.arm(limits.call_time);
        let (mut batch, mut bytes) = (ColumnBatch::new(width), 0usize);
        loop {
            if batch.rows >= max_rows || bytes >= limits.batch_bytes {
                return Ok(Some(batch));
            }
            match rows.next() {
                Ok(Some(row)) => {
                    for (i, column) in batch.columns.iter_mut().enumerate() {
                        let v = row.get_ref(i).unwrap_or(ValueRef::Null);
                        bytes += value_bytes(v);
                        column.push(v);
                    }
                    batch.rows += 1;
                }
                Ok(None) if batch.rows == 0 => return Ok(None),
                Ok(None) => return Ok(Some(batch)),
                Err(e) => return Err(step_error(e, &limits, deadline.stopped())),
            }
        }
    };
    // The batch read ahead of the next request, if any.
    let mut ahead: Option<Reply> = None;
    while let Ok(max_rows) = requests.recv() {
        let max_rows = max_rows.min(limits.batch_rows).max(1) as usize;
        let reply = match ahead.take() {
            Some(Ok(Some(mut batch))) => {
                if batch.rows > max_rows {
                    ahead = Some(Ok(Some(batch.split_off(max_rows))));
                }
                Ok(Some(batch))
            }
            Some(done) => done,
            None => read(max_rows),
        };
        let more = matches!(reply, Ok(Some(_)));
        if replies.send(reply).is_err() {
            return;
        }
        if more && ahead.is_none() {
            ahead = Some(read(max_rows));
        }
    }
}

fn value_bytes(v: ValueRef<'_>) -> usize {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => b.len(),
        _ => 8,
    }
}
