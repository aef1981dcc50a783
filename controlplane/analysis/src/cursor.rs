//! A cursor over one read-only statement, stepped in batches. The statement borrows its
//! connection, so each cursor owns a connection and a statement on a worker thread and talks
//! to it over channels; the worker only works while a caller waits for a batch, and ends when
//! the cursor is dropped.
//!
//! ```text
//!  Cursor::next_batch(max) ──max──> worker: rows.next() × max ──batch──> Cursor
//!  drop(Cursor) ── request channel closed ──> worker drops statement + connection, exits
//! ```

use std::{
    path::PathBuf,
    sync::{mpsc, Arc},
    thread::{self, JoinHandle},
};

use rusqlite::types::{Value, ValueRef};

use crate::report::{
    open_guarded, prepare_error, step_error, Deadline, QueryError, QueryLimits, StopFlag,
};

type Batch = Vec<Vec<Value>>;
type Reply = Result<Option<Batch>, QueryError>;

/// The rows of one statement. Invariant: once a batch call returned `Ok(None)` or an error,
/// the worker is gone and later calls give `Ok(None)` or that error again.
pub struct Cursor {
    columns: Vec<String>,
    requests: Option<mpsc::Sender<u32>>,
    replies: mpsc::Receiver<Reply>,
    worker: Option<JoinHandle<()>>,
    /// Set once the statement is done or failed.
    finished: Option<Result<(), QueryError>>,
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
        let worker = thread::Builder::new()
            .name("report-query".into())
            .spawn(move || {
                work(
                    &path,
                    &sql,
                    &params,
                    (limits, stop),
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
        // Closing the request channel ends the worker's loop; it is idle (waiting for a
        // request) whenever no call is in progress, so the join returns at once.
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
    (limits, stop): (QueryLimits, StopFlag),
    setup: &mpsc::SyncSender<Result<Vec<String>, QueryError>>,
    requests: &mpsc::Receiver<u32>,
    replies: &mpsc::SyncSender<Reply>,
) {
    let deadline = Deadline::new(stop);
    deadline.arm(limits.call_time);
    let conn = match open_guarded(path, &deadline) {
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
    while let Ok(max_rows) = requests.recv() {
        deadline.arm(limits.call_time);
        let max_rows = max_rows.min(limits.batch_rows).max(1) as usize;
        let (mut batch, mut bytes) = (Vec::new(), 0usize);
        let reply = loop {
            if batch.len() >= max_rows || bytes >= limits.batch_bytes {
                break Ok(Some(batch));
            }
            match rows.next() {
                Ok(Some(row)) => batch.push(
                    (0..width)
                        .map(|i| {
                            row.get_ref(i).map_or(Value::Null, |v| {
                                bytes += value_bytes(v);
                                owned(v)
                            })
                        })
                        .collect(),
                ),
                Ok(None) if batch.is_empty() => break Ok(None),
                Ok(None) => break Ok(Some(batch)),
                Err(e) => break Err(step_error(e, &limits, deadline.stopped())),
            }
        };
        if replies.send(reply).is_err() {
            return;
        }
    }
}

fn value_bytes(v: ValueRef<'_>) -> usize {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => b.len(),
        _ => 8,
    }
}

fn owned(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(r) => Value::Real(r),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}
