//! The agent's side of the coordinator channel: one gRPC stream, kept open with heartbeats and
//! reopened with exponential backoff when it drops. What the agent does on START/STOP is the
//! backend's business; this module only carries commands and reports.
//!
//! Resumption: the coordinator re-sends START (or STOP) to an agent that reconnects in the middle
//! of a collection, and the backend's `start`/`stop` are called again for the same IDs: backends
//! must treat a repeated command for the current collection as a no-op that answers again.
//!
//! Busy backends: a command runs while the loop keeps sending heartbeats and reading the stream
//! (an upload can outlast the coordinator's heartbeat timeout); commands arriving meanwhile are
//! queued and run in order. Work once begun is finished even if the stream drops.
//!
//! Target exit ([`run_until_exit`]): when the profiled program ends in the middle of a
//! collection, the backend writes and uploads what was captured
//! ([`Backend::target_exited`]) and the channel reports it unasked (`Uploaded`, or `Failed` with
//! the reason), which the coordinator accepts before STOP. It then half-closes the stream, waits
//! for the coordinator to close its side (so the report is delivered, not lost in a buffer) and
//! returns. If the stream is down at that moment it reconnects for up to
//! [`EXIT_DELIVERY_TIMEOUT`] to deliver it.

use std::{collections::VecDeque, time::Duration};

use tokio::sync::{mpsc, watch};
use tokio_stream::{wrappers::ReceiverStream, StreamExt};

use crate::proto::{
    agent_channel_client::AgentChannelClient, agent_message::Msg as Out,
    coordinator_message::Msg as In, Ack, AgentIdentity, AgentMessage, CoordinatorMessage, Failed,
    Heartbeat, MirrorStats, Register, Uploaded,
};

/// Who this agent is and where its coordinator is.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// e.g. `http://127.0.0.1:8081`.
    pub coordinator: String,
    pub tag: String,
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub process_name: String,
    pub pid: u32,
    pub node: String,
    /// `nsys` or `nvtx`.
    pub backend: String,
    pub diagnostics: Vec<String>,
    pub max_backoff: Duration,
    /// Mutual TLS to the coordinator; `None` only for a coordinator started with
    /// `--insecure-agent-channel`.
    pub tls: Option<TlsSource>,
    /// The NVTX mirroring's counters, sent with each heartbeat (when the agent mirrors).
    pub mirror: Option<crate::mirror_export::StatsHandle>,
}

/// A heartbeat, with the mirroring's counters when there are some.
fn heartbeat_message(config: &AgentConfig) -> Heartbeat {
    Heartbeat {
        mirror: config.mirror.as_ref().map(|h| {
            let s = h.get();
            MirrorStats {
                sent: s.sent,
                dropped: s.dropped,
                not_mirrored: s.not_mirrored,
                last_error: s.last_error.unwrap_or_default(),
            }
        }),
    }
}

/// Where the agent's certificates come from.
#[derive(Debug, Clone)]
pub enum TlsSource {
    /// Already read.
    Loaded(AgentTls),
    /// Read at each connection attempt: an injected Pod's Secret volume may be filled only
    /// after the Pod started (the first Pod of an auto-provisioned namespace is admitted before
    /// its coordinator's certificates exist; the kubelet adds them to the optional volume
    /// later). Until then the program runs, unprofiled, and the reason is logged.
    Dir {
        dir: std::path::PathBuf,
        server_name: String,
    },
}

impl TlsSource {
    fn load(&self) -> std::io::Result<AgentTls> {
        match self {
            Self::Loaded(tls) => Ok(tls.clone()),
            Self::Dir { dir, server_name } => AgentTls::from_dir(dir, server_name),
        }
    }
}

/// The agent's side of the channel's mutual TLS (PEM), as mounted from the coordinator's Secret.
#[derive(Clone)]
pub struct AgentTls {
    pub ca: Vec<u8>,
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
    /// The name on the coordinator's certificate (`localhost` in local mode).
    pub server_name: String,
}

impl std::fmt::Debug for AgentTls {
    /// Never prints the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentTls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl AgentTls {
    /// Reads `ca.crt`, `agent.crt` and `agent.key` from a directory.
    pub fn from_dir(dir: &std::path::Path, server_name: &str) -> std::io::Result<Self> {
        let read = |name: &str| {
            std::fs::read(dir.join(name)).map_err(|e| {
                std::io::Error::new(e.kind(), format!("{}: {e}", dir.join(name).display()))
            })
        };
        Ok(Self {
            ca: read("ca.crt")?,
            cert: read("agent.crt")?,
            key: read("agent.key")?,
            server_name: server_name.to_string(),
        })
    }
}

/// The host of a coordinator URL, the name its certificate must carry (a Service's DNS name
/// in a cluster); `localhost` when the URL names an IP address or no host (the local mode's
/// certificates name `localhost`; `--tls-server-name` overrides).
pub fn server_name_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    if host.is_empty() || host.parse::<std::net::IpAddr>().is_ok() {
        "localhost".to_owned()
    } else {
        host.to_owned()
    }
}

/// An error with its causes, `a: b: c`.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

async fn connect(
    config: &AgentConfig,
) -> Result<AgentChannelClient<tonic::transport::Channel>, String> {
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
    let unreachable = |e: tonic::transport::Error| {
        format!(
            "cannot reach the coordinator at {}: {}",
            config.coordinator,
            chain(&e)
        )
    };
    let mut endpoint = Endpoint::from_shared(config.coordinator.clone())
        .map_err(|e| format!("bad coordinator address {}: {e}", config.coordinator))?
        .connect_timeout(Duration::from_secs(5));
    if let Some(source) = &config.tls {
        let tls = source.load().map_err(|e| {
            format!("the agent certificates are not readable ({e}); the program runs unprofiled until they are")
        })?;
        let tls_config = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&tls.ca))
            .identity(Identity::from_pem(&tls.cert, &tls.key))
            .domain_name(tls.server_name.clone());
        endpoint = endpoint.tls_config(tls_config).map_err(unreachable)?;
    }
    let channel = endpoint.connect().await.map_err(unreachable)?;
    Ok(AgentChannelClient::new(channel))
}

/// One collection, as named by the coordinator.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CollectionRef {
    pub session: String,
    pub collection: u32,
}

/// What a profiler backend does for the channel.
#[tonic::async_trait]
pub trait Backend: Send {
    /// Begin collecting. Called again with the same IDs after a reconnect.
    async fn start(&mut self, at: &CollectionRef) -> Result<(), String>;
    /// Stop collecting and upload; returns the object keys. Called again after a reconnect
    /// while the coordinator still waits for this collection.
    async fn stop(&mut self, at: &CollectionRef) -> Result<Vec<String>, String>;
    /// The profiled program ended (`how`, e.g. `exit code 3`). If a collection was active, end
    /// it, upload what was captured and return its outcome: the keys, or why nothing could be
    /// stored. Called once; a later `stop` for the same collection must answer the same keys.
    async fn target_exited(&mut self, how: &str) -> Option<FinalReport> {
        let _ = how;
        None
    }
}

/// The outcome of a collection cut short by the target's exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalReport {
    pub at: CollectionRef,
    pub result: Result<Vec<String>, String>,
}

/// How long the agent keeps trying to deliver the final report after the target exited.
pub const EXIT_DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long it waits for the coordinator to close the stream after the final report.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the channel gave up for good.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("the coordinator refused this agent: {0}")]
    Refused(String),
}

/// Observable channel events, for logs and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Registered {
        key: String,
        reconnected: bool,
    },
    Started(CollectionRef),
    Stopped {
        at: CollectionRef,
        keys: Vec<String>,
    },
    Failed {
        at: CollectionRef,
        reason: String,
    },
    Disconnected {
        reason: String,
    },
}

/// Runs the channel until the coordinator refuses the agent or `events` is closed.
pub async fn run(
    config: AgentConfig,
    backend: &mut dyn Backend,
    events: mpsc::UnboundedSender<Event>,
) -> Result<(), ChannelError> {
    let (_never, exited) = watch::channel(None);
    run_until_exit(config, backend, events, exited).await
}

/// Waits until `exited` holds how the target ended. A dropped sender never fires.
async fn target_gone(exited: &mut watch::Receiver<Option<String>>) -> String {
    loop {
        if let Some(how) = exited.borrow_and_update().clone() {
            return how;
        }
        if exited.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The final report, computed once after the target exited.
#[derive(Debug)]
enum Exit {
    Running,
    /// Exited; `None`: nothing was being collected.
    Exited(Option<FinalReport>),
}

/// [`run`], ending when the target has exited (`exited` set to how) and the final report, if
/// any, was delivered (or [`EXIT_DELIVERY_TIMEOUT`] passed).
pub async fn run_until_exit(
    config: AgentConfig,
    backend: &mut dyn Backend,
    events: mpsc::UnboundedSender<Event>,
    mut exited: watch::Receiver<Option<String>>,
) -> Result<(), ChannelError> {
    let mut backoff = Duration::from_millis(100);
    let mut exit = Exit::Running;
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        match session(&config, backend, &events, &mut exited, &mut exit).await {
            Ok(SessionEnd::Refused(reason)) => return Err(ChannelError::Refused(reason)),
            Ok(SessionEnd::Finished) => return Ok(()),
            Ok(SessionEnd::Dropped(reason)) | Err(reason) => {
                if events.send(Event::Disconnected { reason }).is_err() {
                    return Ok(());
                }
            }
        }
        if let Exit::Running = exit {
            let how = exited.borrow().clone();
            if let Some(how) = how {
                exit = Exit::Exited(backend.target_exited(&how).await);
            }
        }
        match &exit {
            Exit::Exited(None) => return Ok(()),
            Exit::Exited(Some(report)) => {
                let until = *deadline
                    .get_or_insert_with(|| tokio::time::Instant::now() + EXIT_DELIVERY_TIMEOUT);
                if tokio::time::Instant::now() >= until {
                    tracing::error!(
                        session = %report.at.session,
                        collection = report.at.collection,
                        "the target exited and the coordinator could not be reached to report \
                         the collection's upload; it will mark this agent lost"
                    );
                    return Ok(());
                }
            }
            Exit::Running => {}
        }
        tokio::select! {
            () = tokio::time::sleep(with_jitter(backoff)) => {}
            _ = target_gone(&mut exited), if matches!(exit, Exit::Running) => {}
        }
        backoff = (backoff * 2).min(config.max_backoff);
    }
}

/// `base` plus up to 50% more, so that agents cut off together do not reconnect together.
fn with_jitter(base: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let spread = u64::try_from(base.as_micros() / 2)
        .unwrap_or(u64::MAX)
        .max(1);
    base + Duration::from_micros(u64::from(nanos) % spread)
}

enum SessionEnd {
    Refused(String),
    Dropped(String),
    /// The target exited and its final report (if any) was delivered.
    Finished,
}

async fn session(
    config: &AgentConfig,
    backend: &mut dyn Backend,
    events: &mpsc::UnboundedSender<Event>,
    exited: &mut watch::Receiver<Option<String>>,
    exit: &mut Exit,
) -> Result<SessionEnd, String> {
    let mut client = connect(config).await?;
    let (tx, rx) = mpsc::channel::<AgentMessage>(16);
    let send = |msg: Out| {
        let tx = tx.clone();
        async move { tx.send(AgentMessage { msg: Some(msg) }).await.is_ok() }
    };
    send(Out::Register(Register {
        identity: Some(AgentIdentity {
            namespace: config.namespace.clone(),
            pod: config.pod.clone(),
            container: config.container.clone(),
            process_name: config.process_name.clone(),
            pid: config.pid,
        }),
        tag: config.tag.clone(),
        node: config.node.clone(),
        backend: config.backend.clone(),
        diagnostics: config.diagnostics.clone(),
    }))
    .await;
    let mut inbound = client
        .attach(ReceiverStream::new(rx))
        .await
        .map_err(|e| format!("coordinator refused the stream: {}", e.message()))?
        .into_inner();
    let mut heartbeat = tokio::time::interval(Duration::from_secs(5));
    // Commands that arrived while the backend was busy, run in order once it is free.
    let mut queued: VecDeque<Job> = VecDeque::new();
    let final_message = loop {
        if let Exit::Exited(report) = &exit {
            break report.clone();
        }
        let job = match queued.pop_front() {
            Some(job) => job,
            None => tokio::select! {
                how = target_gone(exited), if matches!(exit, Exit::Running) => Job::TargetExited(how),
                _ = heartbeat.tick() => {
                    if !send(Out::Heartbeat(heartbeat_message(config))).await {
                        return Ok(SessionEnd::Dropped("outbound stream closed".into()));
                    }
                    continue;
                }
                message = inbound.next() => match read(message, &mut heartbeat, events) {
                    Incoming::Job(job) => job,
                    Incoming::Nothing => continue,
                    Incoming::End(end) => return Ok(end),
                },
            },
        };
        // The backend works (an upload may take minutes) while heartbeats keep flowing and
        // the stream is read, so the coordinator never takes a busy agent for a lost one.
        // Work once begun is finished even if the stream ends meanwhile: the coordinator sends
        // STOP again after a reconnect and the backend answers it with the same keys.
        let mut ended: Option<SessionEnd> = None;
        let done = {
            let work = perform(&mut *backend, job, events);
            tokio::pin!(work);
            loop {
                tokio::select! {
                    done = &mut work => break done,
                    _ = heartbeat.tick(), if ended.is_none() => {
                        if !send(Out::Heartbeat(heartbeat_message(config))).await {
                            ended = Some(SessionEnd::Dropped("outbound stream closed".into()));
                        }
                    }
                    message = inbound.next(), if ended.is_none() => {
                        match read(message, &mut heartbeat, events) {
                            Incoming::Job(job) => queued.push_back(job),
                            Incoming::Nothing => {}
                            Incoming::End(end) => ended = Some(end),
                        }
                    }
                }
            }
        };
        match done {
            Done::Reply(reply) => {
                if ended.is_none() && !send(reply).await {
                    ended = Some(SessionEnd::Dropped("outbound stream closed".into()));
                }
            }
            Done::Exited(report) => *exit = Exit::Exited(report),
        }
        if let Some(end) = ended {
            return Ok(end);
        }
    };
    if let Some(FinalReport { at, result }) = final_message {
        let message = outcome(at, result, events);
        if !send(message).await {
            return Ok(SessionEnd::Dropped("outbound stream closed".into()));
        }
    }
    // Half-close; the coordinator reads everything before it, then closes its side.
    drop(tx);
    let closed = tokio::time::timeout(CLOSE_TIMEOUT, async {
        while let Some(Ok(_)) = inbound.next().await {}
    })
    .await;
    if closed.is_err() {
        tracing::warn!("the coordinator did not close the stream after the final report");
    }
    Ok(SessionEnd::Finished)
}

/// What the backend is asked to do, one thing at a time.
#[derive(Debug)]
enum Job {
    Start(CollectionRef),
    Stop(CollectionRef),
    /// The target ended (how).
    TargetExited(String),
}

/// A job's result: the answer for the coordinator, or the final report of an exit.
enum Done {
    Reply(Out),
    Exited(Option<FinalReport>),
}

/// What a message from the coordinator means for the session loop.
enum Incoming {
    Job(Job),
    Nothing,
    End(SessionEnd),
}

/// Reads one message from the stream; `Registered` sets the heartbeat interval.
fn read(
    message: Option<Result<CoordinatorMessage, tonic::Status>>,
    heartbeat: &mut tokio::time::Interval,
    events: &mpsc::UnboundedSender<Event>,
) -> Incoming {
    let message = match message {
        None => return Incoming::End(SessionEnd::Dropped("coordinator closed the stream".into())),
        Some(Err(status)) => {
            return Incoming::End(SessionEnd::Dropped(status.message().to_string()))
        }
        Some(Ok(m)) => m,
    };
    match message.msg {
        Some(In::Registered(r)) => {
            let every = Duration::from_millis(u64::from(r.heartbeat_interval_ms.max(100)));
            *heartbeat = tokio::time::interval(every);
            let _ = events.send(Event::Registered {
                key: r.agent_key,
                reconnected: r.reconnected,
            });
            Incoming::Nothing
        }
        Some(In::Refused(r)) => Incoming::End(SessionEnd::Refused(r.reason)),
        Some(In::Start(s)) => Incoming::Job(Job::Start(CollectionRef {
            session: s.session,
            collection: s.collection,
        })),
        Some(In::Stop(s)) => Incoming::Job(Job::Stop(CollectionRef {
            session: s.session,
            collection: s.collection,
        })),
        None => Incoming::Nothing,
    }
}

/// A collection's outcome as the message for the coordinator, its event recorded: `Uploaded`
/// with the keys, or `Failed` with the reason.
fn outcome(
    at: CollectionRef,
    result: Result<Vec<String>, String>,
    events: &mpsc::UnboundedSender<Event>,
) -> Out {
    match result {
        Ok(keys) => {
            let _ = events.send(Event::Stopped {
                at: at.clone(),
                keys: keys.clone(),
            });
            Out::Uploaded(Uploaded {
                session: at.session,
                collection: at.collection,
                keys,
            })
        }
        Err(reason) => {
            let _ = events.send(Event::Failed {
                at: at.clone(),
                reason: reason.clone(),
            });
            Out::Failed(Failed {
                session: at.session,
                collection: at.collection,
                reason,
            })
        }
    }
}

/// Runs one job on the backend and records its event.
async fn perform(
    backend: &mut dyn Backend,
    job: Job,
    events: &mpsc::UnboundedSender<Event>,
) -> Done {
    match job {
        Job::Start(at) => Done::Reply(match backend.start(&at).await {
            Ok(()) => {
                let _ = events.send(Event::Started(at.clone()));
                Out::Ack(Ack {
                    session: at.session,
                    collection: at.collection,
                })
            }
            Err(reason) => outcome(at, Err(reason), events),
        }),
        Job::Stop(at) => {
            let result = backend.stop(&at).await;
            Done::Reply(outcome(at, result, events))
        }
        Job::TargetExited(how) => Done::Exited(backend.target_exited(&how).await),
    }
}

#[cfg(test)]
mod tests {
    use super::server_name_of;

    #[test]
    fn the_server_name_is_the_urls_host() {
        assert_eq!(
            server_name_of("https://nsight-coordinator.team.svc:8081"),
            "nsight-coordinator.team.svc"
        );
        assert_eq!(server_name_of("https://coord/x"), "coord");
        assert_eq!(server_name_of("https://127.0.0.1:9"), "localhost");
        assert_eq!(server_name_of("https://[::1]:9"), "localhost");
        assert_eq!(server_name_of("https://localhost:9"), "localhost");
    }

    /// The operator renews the agent-channel certificates and the kubelet updates the mounted
    /// Secret in place: each (re)connection reads the files again, never a cached copy.
    #[test]
    fn the_certificates_are_read_again_at_each_connection() {
        #![allow(clippy::unwrap_used, reason = "test")]
        let dir = std::env::temp_dir().join(format!("nsight-agent-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |text: &str| {
            for name in ["ca.crt", "agent.crt", "agent.key"] {
                std::fs::write(dir.join(name), format!("{name} {text}")).unwrap();
            }
        };
        let source = super::TlsSource::Dir {
            dir: dir.clone(),
            server_name: "coord".into(),
        };
        write("first");
        assert_eq!(source.load().unwrap().cert, b"agent.crt first");
        write("renewed");
        let tls = source.load().unwrap();
        assert_eq!(tls.ca, b"ca.crt renewed");
        assert_eq!(tls.key, b"agent.key renewed");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(source.load().is_err());
    }
}
