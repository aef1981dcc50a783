//! The agent channel's gRPC service: one bidirectional stream per agent. Translates wire
//! messages to hub calls and hub commands to wire messages; holds no state of its own.
//!
//! ```text
//!  agent ──Register──> register_agent ──Registered/Refused──> agent
//!        ──Heartbeat/Ack/Uploaded/Failed──> hub ...  <──Start/Stop── hub (effects)
//!  stream ends ──> hub.unlink (disconnected, unless it already reconnected)
//! ```
//!
//! After Register, one [`AgentStream`] per agent does both directions: it is the response
//! stream (commands from the agent's [`outbox`] queue) and, each time it is polled, it first
//! handles what the agent sent. The connection's HTTP/2 stream task polls it whenever either
//! side has something, so no task of our own is kept per agent.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use super::{
    hub::{Hub, HubError},
    outbox,
};
use crate::{
    proto::{
        agent_channel_server::AgentChannel, agent_message::Msg as In,
        coordinator_message::Msg as Out, AgentMessage, CoordinatorMessage, Refused, Register,
        Registered,
    },
    state::{
        AgentIdentity, AgentInfo, AgentKey, Backend, CollectionId, MirroringStatus, SessionId, Tag,
    },
};

/// Outbound buffer per agent: START/STOP are rare; a full buffer means a stuck agent.
const OUTBOUND_BUFFER: usize = 16;
/// Agent messages handled per poll before the stream lets other tasks run.
const INBOUND_BUDGET: usize = 32;

#[derive(Debug, Clone)]
pub struct AgentService {
    hub: Hub,
    heartbeat_interval_ms: u32,
}

impl AgentService {
    pub fn new(hub: Hub, heartbeat_interval_ms: u32) -> Self {
        Self {
            hub,
            heartbeat_interval_ms,
        }
    }
}

fn agent_info(reg: Register) -> Result<AgentInfo, String> {
    let id = reg.identity.ok_or("Register without an identity")?;
    let tag = if reg.tag.is_empty() {
        Tag::default()
    } else {
        Tag::parse(&reg.tag).map_err(|e| e.to_string())?
    };
    let backend = Backend::parse(&reg.backend).ok_or_else(|| {
        let known: Vec<&str> = Backend::ALL.iter().map(|b| b.as_str()).collect();
        format!(
            "unknown backend `{}` (expected one of {})",
            reg.backend,
            known.join(", ")
        )
    })?;
    if id.pod.is_empty() || id.process_name.is_empty() {
        return Err("identity needs at least a pod and a process name".into());
    }
    Ok(AgentInfo {
        identity: AgentIdentity {
            namespace: id.namespace,
            pod: id.pod,
            container: id.container,
            process_name: id.process_name,
            pid: id.pid,
        },
        tag,
        node: reg.node,
        backend,
        diagnostics: reg.diagnostics,
    })
}

fn ids(session: &str, collection: u32) -> Result<(SessionId, CollectionId), String> {
    let session = session
        .parse()
        .map_err(|_| format!("`{session}` is not a session id"))?;
    Ok((session, CollectionId(collection)))
}

type OutStream = Pin<Box<dyn Stream<Item = Result<CoordinatorMessage, Status>> + Send>>;

#[tonic::async_trait]
impl AgentChannel for AgentService {
    type AttachStream = OutStream;

    async fn attach(
        &self,
        request: Request<Streaming<AgentMessage>>,
    ) -> Result<Response<Self::AttachStream>, Status> {
        let mut inbound = request.into_inner();
        let first = inbound
            .next()
            .await
            .ok_or_else(|| Status::invalid_argument("stream closed before Register"))??;
        let Some(In::Register(reg)) = first.msg else {
            return Err(Status::invalid_argument(
                "the first message must be Register",
            ));
        };
        let info = match agent_info(reg) {
            Ok(info) => info,
            Err(reason) => return Ok(refused(reason)),
        };
        let key = info.key();
        let (tx, rx) = outbox::channel(OUTBOUND_BUFFER);
        let heartbeat_interval_ms = self.heartbeat_interval_ms;
        let hello = |key: &AgentKey, registered: &crate::state::Registered| CoordinatorMessage {
            msg: Some(Out::Registered(Registered {
                agent_key: key.as_str().to_string(),
                reconnected: registered.reconnected,
                heartbeat_interval_ms,
            })),
        };
        let (registered, connection) = match self.hub.register(info, tx, hello) {
            Ok(r) => r,
            Err(e) => return Ok(refused(e.to_string())),
        };
        tracing::info!(agent = %key.as_str(), reconnected = registered.reconnected, "agent registered");
        Ok(Response::new(Box::pin(AgentStream {
            inbound,
            outbound: rx,
            hub: self.hub.clone(),
            key,
            connection,
            unlinked: false,
        })))
    }
}

/// One registered agent's stream: handles its messages and yields the hub's commands to it.
/// Ends when the hub drops the agent's link (it was disconnected or replaced by a reconnect),
/// after what was queued; the agent's side ending, or an error on it, unlinks it.
struct AgentStream {
    inbound: Streaming<AgentMessage>,
    outbound: outbox::Receiver<Box<CoordinatorMessage>>,
    hub: Hub,
    key: AgentKey,
    connection: u64,
    unlinked: bool,
}

impl AgentStream {
    fn unlink(&mut self) {
        if !self.unlinked {
            self.unlinked = true;
            self.hub.unlink(&self.key, self.connection);
        }
    }

    /// Handles what the agent has sent, up to [`INBOUND_BUDGET`] messages.
    fn poll_inbound(&mut self, cx: &mut Context<'_>) {
        for _ in 0..INBOUND_BUDGET {
            if self.unlinked {
                return;
            }
            match Pin::new(&mut self.inbound).poll_next(cx) {
                Poll::Ready(Some(Ok(message))) => {
                    if let Err(reason) = handle(&self.hub, &self.key, message) {
                        tracing::warn!(agent = %self.key.as_str(), %reason, "agent message refused");
                    }
                }
                Poll::Ready(Some(Err(_)) | None) => self.unlink(),
                Poll::Pending => return,
            }
        }
        // More may be waiting: come back after other tasks have run.
        cx.waker().wake_by_ref();
    }
}

impl Stream for AgentStream {
    type Item = Result<CoordinatorMessage, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        this.poll_inbound(cx);
        Pin::new(&mut this.outbound)
            .poll_next(cx)
            .map(|m| m.map(|m| Ok(*m)))
    }
}

impl Drop for AgentStream {
    /// The connection went away without the agent's side ending first.
    fn drop(&mut self) {
        self.unlink();
    }
}

/// A stream that carries one Refused message and ends: the agent reads why.
fn refused(reason: String) -> Response<OutStream> {
    tracing::warn!(%reason, "agent refused");
    let msg = CoordinatorMessage {
        msg: Some(Out::Refused(Refused { reason })),
    };
    Response::new(Box::pin(tokio_stream::once(Ok(msg))))
}

/// One message from a registered agent.
fn handle(hub: &Hub, key: &AgentKey, message: AgentMessage) -> Result<(), String> {
    let result = match message.msg {
        Some(In::Heartbeat(h)) => match h.mirror {
            None => hub.apply_agent(|m, now| m.heartbeat(key, now)),
            Some(s) => {
                let mirroring = MirroringStatus {
                    sent: s.sent,
                    dropped: s.dropped,
                    not_mirrored: s.not_mirrored,
                    last_error: (!s.last_error.is_empty()).then_some(s.last_error),
                };
                hub.apply_agent(|m, now| m.heartbeat_with_mirroring(key, mirroring, now))
            }
        },
        Some(In::Ack(a)) => {
            let (s, c) = ids(&a.session, a.collection)?;
            hub.apply_agent(|m, now| m.agent_acknowledged(key, s, c, now))
        }
        Some(In::Uploaded(u)) => {
            let (s, c) = ids(&u.session, u.collection)?;
            hub.apply_agent(|m, now| m.agent_uploaded(key, s, c, u.keys, now))
        }
        Some(In::Failed(f)) => {
            let (s, c) = ids(&f.session, f.collection)?;
            hub.apply_agent(|m, now| m.agent_failed(key, s, c, f.reason, now))
        }
        Some(In::Register(_)) => return Err("already registered on this stream".into()),
        None => return Err("empty message".into()),
    };
    result.map_err(|e: HubError| e.to_string())
}
