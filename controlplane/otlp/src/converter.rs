//! The converter's shell: owns the [`Buffer`] and the storage [`Uploader`], acknowledges spans
//! only once the buffer made them durable, and turns a collection's sealed segments into reports
//! (one per process) that it spools and uploads. The servers ([`crate::http`],
//! [`crate::grpc`]) only translate their protocols to these calls.
//!
//! ```text
//!  ingest: decode ─> group::split ─> Buffer::append (fsync) ─> Ingested (ack)
//!  flush:  Buffer::seal ─> per segment: log::read ─> convert::dumps ─> nsight_report::write
//!          ─> Uploader::spool ─> Buffer::remove_sealed ─> Uploader::drain
//! ```
//! A segment is removed only after its reports are in the uploader's spool (durable), so a crash
//! at any point converts it again under the same keys (an idempotent overwrite), never loses it.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use nsight_report::ReportMeta;
use nsight_storage::{
    layout::{ReportKey, ReportKind},
    Store, Uploader, UploaderError,
};
use prost::Message;

use crate::{
    buffer::{Buffer, BufferError, CollectionStatus, Limits, Refusal},
    convert::{self, ProcessDump},
    group::{self, CollectionId},
    proto::collector::ExportTraceServiceRequest,
};

/// The product name the converter's reports carry in `META_DATA_EXPORT`.
pub const PRODUCT: &str = "Nsight Operator (Rust) OTLP converter";

/// Settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Span logs, report work files and the upload spool live here.
    pub data_dir: PathBuf,
    pub limits: Limits,
    /// Largest request body (HTTP) or message (gRPC) accepted.
    pub max_body_bytes: usize,
    /// How long late spans of a stopped collection wait for more before they are converted.
    pub linger: Duration,
    /// The host name written into reports.
    pub host: String,
}

/// Why spans were not acknowledged.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The request itself is wrong (not OTLP, or no span names a collection): do not retry.
    #[error("{0}")]
    BadRequest(String),
    /// The buffer is full: retry after a stop.
    #[error(transparent)]
    Full(Refusal),
    /// The buffer could not be written: retry later.
    #[error("the span buffer could not be written: {0}")]
    Unavailable(String),
}

/// What was acknowledged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ingested {
    pub accepted: u64,
    pub rejected: u64,
    /// Why spans were rejected (OTLP's partial success message).
    pub message: Option<String>,
}

/// Why a flush did not finish.
#[derive(Debug, thiserror::Error)]
pub enum FlushError {
    #[error("no span and no stop was ever seen for collection {0}")]
    Unknown(CollectionId),
    #[error(transparent)]
    Buffer(#[from] BufferError),
    #[error("reading the span log {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing the report {}", path.display())]
    Report {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("spooling the report for upload")]
    Spool(#[source] UploaderError),
    #[error("a conversion task failed: {0}")]
    Task(String),
}

/// What a flush produced (the stop's answer).
pub use nsight_contracts::otlp::StopAnswer as Flushed;

/// The converter.
#[derive(Debug)]
pub struct Converter {
    buffer: Mutex<Buffer>,
    uploader: Uploader<Store>,
    /// One flush at a time (a stop and the background flusher may meet).
    flushing: tokio::sync::Mutex<()>,
    work_dir: PathBuf,
    config: Config,
}

fn task_err(e: tokio::task::JoinError) -> FlushError {
    FlushError::Task(e.to_string())
}

/// The report stub of segment `seq` of process `pid` (the agent's are `pid<pid>`).
pub fn stub(seq: u64, pid: u32) -> String {
    if seq == 0 {
        format!("otlp-pid{pid}")
    } else {
        format!("otlp{seq}-pid{pid}")
    }
}

impl Converter {
    /// Opens the buffer and the spool under `config.data_dir`.
    pub fn open(config: Config, store: Store) -> anyhow::Result<Arc<Self>> {
        let buffer = Buffer::open(&config.data_dir.join("buffer"), config.limits)?;
        let uploader = Uploader::open(store, &config.data_dir.join("spool"), Default::default())?;
        let work_dir = config.data_dir.join("work");
        std::fs::create_dir_all(&work_dir)?;
        Ok(Arc::new(Self {
            buffer: Mutex::new(buffer),
            uploader,
            flushing: tokio::sync::Mutex::new(()),
            work_dir,
            config,
        }))
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    fn buffer(&self) -> MutexGuard<'_, Buffer> {
        self.buffer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Decodes an `ExportTraceServiceRequest` and ingests it.
    pub async fn ingest_bytes(self: &Arc<Self>, body: &[u8]) -> Result<Ingested, IngestError> {
        let request = ExportTraceServiceRequest::decode(body).map_err(|e| {
            IngestError::BadRequest(format!(
                "the body is not an OTLP ExportTraceServiceRequest (protobuf): {e}"
            ))
        })?;
        self.ingest(request).await
    }

    /// Buffers the request's spans durably, per collection; returns once they are fsynced.
    pub async fn ingest(
        self: &Arc<Self>,
        request: ExportTraceServiceRequest,
    ) -> Result<Ingested, IngestError> {
        let split = group::split(request);
        let message = split.rejection_message();
        if split.accepted == 0 {
            return match message {
                Some(m) => Err(IngestError::BadRequest(m)),
                None => Ok(Ingested::default()),
            };
        }
        let (accepted, rejected) = (split.accepted, split.rejected);
        let parts: Vec<(CollectionId, Vec<u8>)> = split
            .groups
            .into_iter()
            .map(|(id, req)| (id, req.encode_to_vec()))
            .collect();
        let me = Arc::clone(self);
        tokio::task::spawn_blocking(move || me.buffer().append(&parts))
            .await
            .map_err(|e| IngestError::Unavailable(e.to_string()))?
            .map_err(|e| match e {
                BufferError::Full(r) => IngestError::Full(r),
                e => IngestError::Unavailable(chain(&e)),
            })?;
        Ok(Ingested {
            accepted,
            rejected,
            message,
        })
    }

    /// Stops a collection and converts what it holds. A collection never seen is remembered as
    /// stopped: its spans are converted when they come.
    pub async fn stop(self: &Arc<Self>, id: &CollectionId) -> Result<Flushed, FlushError> {
        let me = Arc::clone(self);
        let stop_id = id.clone();
        tokio::task::spawn_blocking(move || me.buffer().stop(&stop_id))
            .await
            .map_err(task_err)??;
        self.flush(id).await
    }

    /// Converts the collection's spans (sealing what was acknowledged so far) and uploads them.
    pub async fn flush(self: &Arc<Self>, id: &CollectionId) -> Result<Flushed, FlushError> {
        let _one_at_a_time = self.flushing.lock().await;
        let me = Arc::clone(self);
        let seal_id = id.clone();
        let segments = tokio::task::spawn_blocking(move || {
            let mut buffer = me.buffer();
            if !buffer.contains(&seal_id) {
                return Err(FlushError::Unknown(seal_id));
            }
            Ok(buffer.seal(&seal_id)?)
        })
        .await
        .map_err(task_err)??;
        let mut flushed = Flushed {
            session: id.session.clone(),
            collection: id.collection.clone(),
            ..Flushed::default()
        };
        for (seq, path) in segments {
            let me = Arc::clone(self);
            let conv_id = id.clone();
            let written =
                tokio::task::spawn_blocking(move || me.write_segment(&conv_id, seq, &path))
                    .await
                    .map_err(task_err)??;
            for (path, key, spans) in written {
                self.uploader
                    .spool(&path, &key)
                    .await
                    .map_err(FlushError::Spool)?;
                flushed.spans += spans;
                flushed.reports.push(key);
            }
            let me = Arc::clone(self);
            let rm_id = id.clone();
            tokio::task::spawn_blocking(move || me.buffer().remove_sealed(&rm_id, seq))
                .await
                .map_err(task_err)??;
        }
        match self.uploader.drain().await {
            Ok(report) => {
                flushed.stored = report.keys();
                flushed.pending = report.failed.iter().map(|f| f.key.clone()).collect();
            }
            Err(e) => {
                tracing::warn!(error = %chain(&e), "the upload spool could not be drained");
                flushed.pending.clone_from(&flushed.reports);
            }
        }
        tracing::info!(collection = %id, spans = flushed.spans, reports = ?flushed.reports, "collection converted");
        Ok(flushed)
    }

    /// Reads one sealed segment and writes its reports; returns (file, key, spans) per report.
    fn write_segment(
        &self,
        id: &CollectionId,
        seq: u64,
        path: &Path,
    ) -> Result<Vec<(PathBuf, String, u64)>, FlushError> {
        let mut rows = Vec::new();
        let mut undecodable = 0u64;
        let scanned = crate::log::read(path, |payload| {
            match ExportTraceServiceRequest::decode(payload) {
                Ok(r) => convert::append_rows(&r, &mut rows),
                Err(_) => undecodable += 1,
            }
        })
        .map_err(|source| FlushError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        if scanned.torn > 0 || undecodable > 0 {
            tracing::warn!(path = %path.display(), torn = scanned.torn, undecodable, "parts of a sealed segment were unreadable");
        }
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or_default();
        let mut out = Vec::new();
        for d in convert::dumps(rows) {
            let key = ReportKey::new(
                &d.key.tag,
                &id.session,
                &id.collection,
                &d.key.process,
                &d.key.instance,
                &stub(seq, d.key.pid),
                ReportKind::Sqlite,
            );
            let file = self.work_dir.join(key.file_name());
            let meta = ReportMeta {
                export_time_utc: nsight_report::utc_text(now_ns),
                host: self.config.host.clone(),
                output_file: key.file_name(),
            };
            write_report(&d, &meta, &file).map_err(|source| FlushError::Report {
                path: file.clone(),
                source,
            })?;
            out.push((file, key.to_key(), d.spans));
        }
        Ok(out)
    }

    /// Every collection the buffer knows.
    pub fn list(&self) -> Vec<CollectionStatus> {
        self.buffer().list()
    }

    /// Converts what is due (segments sealed before a restart, late spans of stopped
    /// collections) and retries pending uploads, every `period`, forever.
    pub async fn run_background(self: Arc<Self>, period: Duration) {
        let mut retry_uploads = true;
        loop {
            let due = self.buffer().due(self.config.linger);
            for id in due {
                match self.flush(&id).await {
                    Ok(f) => retry_uploads = !f.pending.is_empty(),
                    Err(e) => {
                        tracing::warn!(collection = %id, error = %chain(&e), "converting late spans failed")
                    }
                }
            }
            if retry_uploads {
                match self.uploader.drain().await {
                    Ok(r) => retry_uploads = !r.failed.is_empty(),
                    Err(e) => {
                        tracing::warn!(error = %chain(&e), "the upload spool could not be drained")
                    }
                }
            }
            tokio::time::sleep(period).await;
        }
    }
}

/// Writes one process's report with the agent's writer, marked as the converter's.
fn write_report(d: &ProcessDump, meta: &ReportMeta, path: &Path) -> Result<(), rusqlite::Error> {
    let _ = std::fs::remove_file(path);
    let mut conn = rusqlite::Connection::open(path)?;
    nsight_report::write(&mut conn, &d.dump, meta).map_err(|e| match e {
        nsight_report::ReportError::Create { source, .. }
        | nsight_report::ReportError::Write(source) => source,
    })?;
    conn.execute(
        "UPDATE META_DATA_EXPORT SET value = ?1 WHERE name = 'EXPORT_PRODUCT_NAME'",
        [PRODUCT],
    )?;
    conn.execute(
        "INSERT INTO META_DATA_EXPORT (name, value) VALUES ('NSIGHT_OTLP_SPANS', ?1)",
        [d.spans.to_string()],
    )?;
    Ok(())
}

/// An error with its causes, `a: b: c`.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
