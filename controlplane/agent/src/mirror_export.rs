//! NVTX mirroring, the I/O part: a bounded queue of export requests and one task that sends
//! them over OTLP/gRPC to the Pod's sidecar (or any OTLP endpoint), [`IN_FLIGHT`] at a time on
//! one HTTP/2 connection, retrying an export that failed in a retryable way for a few seconds.
//! Offering never waits: when the queue is full, or the endpoint stays unreachable, the spans
//! are dropped and counted, and the reports are stored as ever (mirroring is a copy, never in
//! the way of profiling).
//!
//! ```text
//!  stop ──Mirror::offer (try_send)──> queue (QUEUE_REQUESTS) ──export task──> TraceService/Export x IN_FLIGHT
//!                          └─ full: dropped += spans      └─ error: retried (~7.5 s), then dropped += spans
//! ```
//! Several exports at once, because each waits for the endpoint's acknowledgement (the
//! converter answers once the spans are fsynced): one at a time, 200,000 spans took 4.6 s to
//! leave an exiting agent (`cargo xtask bench otlp-mirror`, docs/benchmarks.md).

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use tokio::{
    sync::{mpsc, oneshot},
    task::JoinSet,
};
use tonic::transport::{Channel, Endpoint};

use crate::{
    mirror::Mirrored,
    proto::otlp::collector::{trace_service_client::TraceServiceClient, ExportTraceServiceRequest},
};

/// Requests waiting to be sent (each up to `mirror::BATCH_SPANS` spans).
pub const QUEUE_REQUESTS: usize = 256;
/// One export's time limit, connection included.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// Exports awaiting their acknowledgement at once (HTTP/2 streams on one connection).
pub const IN_FLIGHT: usize = 4;

/// What the mirroring did so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorStats {
    /// Spans the endpoint acknowledged.
    pub sent: u64,
    /// Spans dropped: the queue was full or the endpoint refused or could not be reached.
    pub dropped: u64,
    /// Records that are not spans (marks outside a range, ranges open at the stop).
    pub not_mirrored: u64,
    /// The last export error, if any.
    pub last_error: Option<String>,
}

#[derive(Debug, Default)]
struct Counters {
    /// Spans offered and not yet sent or dropped.
    pending: AtomicU64,
    sent: AtomicU64,
    dropped: AtomicU64,
    not_mirrored: AtomicU64,
    last_error: Mutex<Option<String>>,
}

/// A read-only view of a mirror's counters (what the agent's heartbeats carry).
#[derive(Debug, Clone)]
pub struct StatsHandle(Arc<Counters>);

impl StatsHandle {
    pub fn get(&self) -> MirrorStats {
        self.0.snapshot()
    }
}

impl Counters {
    fn snapshot(&self) -> MirrorStats {
        MirrorStats {
            sent: self.sent.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            not_mirrored: self.not_mirrored.load(Ordering::Relaxed),
            last_error: self.last_error.lock().ok().and_then(|e| e.clone()),
        }
    }

    fn failed(&self, spans: u64, error: String) {
        self.dropped.fetch_add(spans, Ordering::Relaxed);
        settle(&self.pending, spans);
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(error);
        }
    }
}

/// Takes `n` off `pending`, never below zero (an export may end after `abandon` counted it).
fn settle(pending: &AtomicU64, n: u64) {
    let _ = pending.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| {
        Some(p.saturating_sub(n))
    });
}

enum Job {
    Export(ExportTraceServiceRequest, u64),
    /// Answered once everything queued before it is handled.
    Flush(oneshot::Sender<()>),
}

/// The mirroring of one agent. Cheap to share by reference; the export task ends with it.
#[derive(Debug)]
pub struct Mirror {
    endpoint: String,
    queue: mpsc::Sender<Job>,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Export(_, spans) => write!(f, "Export({spans} spans)"),
            Self::Flush(_) => f.write_str("Flush"),
        }
    }
}

impl Mirror {
    /// Starts the export task for `endpoint` (`http://127.0.0.1:4317`). Fails only on an
    /// endpoint that is not a URL.
    pub fn start(endpoint: &str) -> Result<Self, String> {
        let target = Endpoint::from_shared(endpoint.to_owned())
            .map_err(|e| format!("the OTLP mirroring endpoint {endpoint:?} is not a URL: {e}"))?
            .connect_timeout(EXPORT_TIMEOUT)
            .timeout(EXPORT_TIMEOUT);
        let (queue, jobs) = mpsc::channel(QUEUE_REQUESTS);
        let counters = Arc::new(Counters::default());
        // Connects on first use and again after a failure, shared by the exports in flight.
        let client = TraceServiceClient::new(target.connect_lazy());
        tokio::spawn(export(client, jobs, Arc::clone(&counters)));
        Ok(Self {
            endpoint: endpoint.to_owned(),
            queue,
            counters,
        })
    }

    /// Queues one dump's spans without waiting; what does not fit is dropped and counted.
    pub fn offer(&self, mirrored: Mirrored) {
        let not_mirrored = u64::try_from(mirrored.not_mirrored).unwrap_or(u64::MAX);
        self.counters
            .not_mirrored
            .fetch_add(not_mirrored, Ordering::Relaxed);
        for request in mirrored.requests {
            let spans = request
                .resource_spans
                .iter()
                .flat_map(|r| &r.scope_spans)
                .map(|s| s.spans.len())
                .sum::<usize>();
            let spans = u64::try_from(spans).unwrap_or(u64::MAX);
            self.counters.pending.fetch_add(spans, Ordering::Relaxed);
            if let Err(e) = self.queue.try_send(Job::Export(request, spans)) {
                self.counters
                    .failed(spans, format!("the mirroring queue is full or closed: {e}"));
            }
        }
    }

    /// Waits (at most `limit`) until everything offered so far is sent or dropped: before the
    /// agent exits, so a launch-mode run's spans are not lost with it.
    pub async fn flush(&self, limit: Duration) -> bool {
        let (done, wait) = oneshot::channel();
        let sent = tokio::time::timeout(limit, async {
            self.queue.send(Job::Flush(done)).await.is_ok() && wait.await.is_ok()
        })
        .await;
        matches!(sent, Ok(true))
    }

    /// Counts what is still queued or being retried as dropped: the agent is exiting.
    pub fn abandon(&self) {
        let pending = self.counters.pending.load(Ordering::Relaxed);
        if pending > 0 {
            self.counters.failed(
                pending,
                "the agent exited before they could be sent".to_owned(),
            );
        }
    }

    pub fn stats(&self) -> MirrorStats {
        self.counters.snapshot()
    }

    /// The counters, for the agent's heartbeats.
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(Arc::clone(&self.counters))
    }

    /// Logs the counters: a warning when spans were dropped.
    pub fn log(&self) {
        let s = self.stats();
        if s.dropped > 0 {
            tracing::warn!(
                endpoint = %self.endpoint,
                sent = s.sent,
                dropped = s.dropped,
                not_mirrored = s.not_mirrored,
                last_error = s.last_error.as_deref().unwrap_or_default(),
                "NVTX mirroring dropped spans (the reports are not affected)"
            );
        } else {
            tracing::info!(
                endpoint = %self.endpoint,
                sent = s.sent,
                not_mirrored = s.not_mirrored,
                "NVTX mirroring"
            );
        }
    }
}

/// Waits before each new attempt at an export that failed in a way worth retrying (the OTLP
/// exporter specification's retryable answers, or the endpoint unreachable: a sidecar still
/// resolving its collector, a collector restarting). About 7.5 s in all, then the spans are
/// dropped.
const RETRY_BACKOFF: [Duration; 4] = [
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
];

/// A failed attempt.
enum Failure {
    /// Worth another attempt.
    Retryable(String),
    /// The endpoint refused the request itself.
    Final(String),
}

/// The export task: up to [`IN_FLIGHT`] exports at once; a flush waits for every export
/// queued before it.
async fn export(
    client: TraceServiceClient<Channel>,
    mut jobs: mpsc::Receiver<Job>,
    counters: Arc<Counters>,
) {
    let mut in_flight = JoinSet::new();
    while let Some(job) = jobs.recv().await {
        match job {
            Job::Export(request, spans) => {
                while in_flight.len() >= IN_FLIGHT {
                    in_flight.join_next().await;
                }
                in_flight.spawn(export_one(
                    client.clone(),
                    request,
                    spans,
                    Arc::clone(&counters),
                ));
            }
            Job::Flush(done) => {
                while in_flight.join_next().await.is_some() {}
                let _ = done.send(());
            }
        }
    }
    while in_flight.join_next().await.is_some() {}
}

/// One request, retried while the failure is worth it; counted as sent or dropped.
async fn export_one(
    client: TraceServiceClient<Channel>,
    request: ExportTraceServiceRequest,
    spans: u64,
    counters: Arc<Counters>,
) {
    let mut attempt = 0;
    let result = loop {
        match export_once(client.clone(), request.clone()).await {
            Ok(rejected) => break Ok(rejected),
            Err(Failure::Retryable(e)) if attempt < RETRY_BACKOFF.len() => {
                tracing::debug!(error = %e, attempt, "NVTX mirroring: retrying an export");
                tokio::time::sleep(RETRY_BACKOFF[attempt]).await;
                attempt += 1;
            }
            Err(Failure::Retryable(e) | Failure::Final(e)) => break Err(e),
        }
    };
    match result {
        Ok(rejected) => {
            tracing::debug!(spans, "NVTX mirroring: exported");
            counters
                .sent
                .fetch_add(spans.saturating_sub(rejected), Ordering::Relaxed);
            settle(&counters.pending, spans.saturating_sub(rejected));
            if rejected > 0 {
                tracing::warn!(rejected, "NVTX mirroring: the endpoint rejected spans");
                counters.failed(rejected, format!("the endpoint rejected {rejected} spans"));
            }
        }
        Err(e) => {
            tracing::warn!(spans, error = %e, "NVTX mirroring: an export failed; its spans are dropped");
            counters.failed(spans, e);
        }
    }
}

/// One attempt; the spans the endpoint rejected on success. The lazy channel reconnects by
/// itself after a failure.
async fn export_once(
    mut c: TraceServiceClient<Channel>,
    request: ExportTraceServiceRequest,
) -> Result<u64, Failure> {
    match c.export(request).await {
        Ok(answer) => Ok(answer
            .into_inner()
            .partial_success
            .map_or(0, |p| u64::try_from(p.rejected_spans).unwrap_or_default())),
        Err(status) => {
            let text = format!("{}: {}", status.code(), status.message());
            use tonic::Code;
            Err(match status.code() {
                Code::Unavailable
                | Code::DeadlineExceeded
                | Code::ResourceExhausted
                | Code::Aborted
                | Code::Cancelled
                | Code::OutOfRange
                | Code::DataLoss
                | Code::Unknown => Failure::Retryable(text),
                _ => Failure::Final(text),
            })
        }
    }
}
