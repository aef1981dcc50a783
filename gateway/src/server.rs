//! The ADS server: a thin tonic adapter around the protocol machines and the snapshot cache.
//!
//! ```text
//!  Envoy ══gRPC══> AggregatedDiscoveryService ──one task per stream──> run(machine)
//!                                                   │  requests ─> machine.on_request
//!                                                   │  cache watch ─> machine.on_snapshot
//!                                                   └─ events ─> StatusBoard (ACK/NACK)
//!  XdsHandle::set_ir ─> translate ─> SnapshotCache::set ─> wakes the node's streams
//! ```
//! A stream watches the snapshot its node is served (`cache::node_id::snapshot_key`): a
//! gateway's own, or for an OTLP sidecar the one of its OTLPProxyConfig, shared by many Pods.
//! Owns sockets, tasks and shutdown; all protocol decisions are in `protocol`.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use tokio::{
    net::TcpListener,
    sync::{mpsc, oneshot, watch},
    task::JoinHandle,
};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};
use xds_api::pb::envoy::{
    config::core::v3::Node,
    service::discovery::v3::{
        aggregated_discovery_service_server::{
            AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
        },
        DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
    },
};

use crate::{
    cache::{node_id, Snapshot, SnapshotCache, SnapshotError},
    ir::{GatewayIr, IrError},
    protocol::{delta::DeltaStream, sotw::SotwStream, Event, ProtocolError, Step},
    resources::{ResourceType, Resources},
    status::{NackRecord, NodeStatus, StatusBoard},
    translate::translate,
};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen for xDS on {addr} (is the port in use?)")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Why a configuration was not published (the previous one stays in force).
#[derive(Debug, thiserror::Error)]
pub enum SetIrError {
    #[error("the gateway configuration for node `{node}` is invalid")]
    Ir {
        node: String,
        #[source]
        source: IrError,
    },
    #[error("the resources for node `{node}` are not consistent")]
    Snapshot {
        node: String,
        #[source]
        source: SnapshotError,
    },
}

#[derive(Debug)]
struct Shared {
    cache: SnapshotCache,
    status: StatusBoard,
    /// Set to `true` on shutdown: every stream ends with UNAVAILABLE so connections close.
    closing: watch::Sender<bool>,
}

/// Entry point: `XdsServer::serve(addr)` starts serving ADS on `addr` (port 0 picks one).
#[derive(Debug)]
pub struct XdsServer;

impl XdsServer {
    /// Binds `addr` and serves ADS (SotW and delta) until the handle is shut down or dropped.
    pub async fn serve(addr: SocketAddr) -> Result<XdsHandle, ServeError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { addr, source })?;
        let shared = Arc::new(Shared {
            cache: SnapshotCache::new(),
            status: StatusBoard::new(),
            closing: watch::channel(false).0,
        });
        let service = AggregatedDiscoveryServiceServer::new(Ads {
            shared: shared.clone(),
        });
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let result = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                    let _ = stop_rx.await;
                })
                .await;
            if let Err(e) = result {
                tracing::error!(error = %e, "xDS server stopped with an error");
            }
        });
        tracing::info!(%local_addr, "xDS server listening");
        Ok(XdsHandle {
            local_addr,
            shared,
            stop: Some(stop_tx),
            task: Some(task),
        })
    }
}

/// Reads the server's per-node status (ACKs, NACKs with Envoy's error detail) and its metrics.
#[derive(Clone)]
pub struct StatusReader(Arc<Shared>);

impl std::fmt::Debug for StatusReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusReader").finish_non_exhaustive()
    }
}

impl StatusReader {
    pub fn json(&self) -> serde_json::Value {
        self.0.status.to_json()
    }

    pub fn metrics_text(&self) -> String {
        self.0.status.metrics_text()
    }
}

/// A running ADS server. Dropping it stops the server (streams end, Envoy keeps its config
/// and reconnects to whichever server comes back on the address).
#[derive(Debug)]
pub struct XdsHandle {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl XdsHandle {
    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Translates `ir` and publishes it to `node`'s Envoys. Returns the snapshot version (the
    /// same as before when nothing changed). An invalid IR publishes nothing.
    pub fn set_ir(&self, node: &str, ir: &GatewayIr) -> Result<u64, SetIrError> {
        let resources = translate(ir).map_err(|source| SetIrError::Ir {
            node: node.into(),
            source,
        })?;
        self.set_resources(node, resources)
    }

    /// Publishes already translated resources (checked for consistency, not for validity:
    /// what Envoy rejects comes back as a NACK).
    pub fn set_resources(&self, node: &str, resources: Resources) -> Result<u64, SetIrError> {
        self.shared
            .cache
            .set(node, resources)
            .map_err(|source| SetIrError::Snapshot {
                node: node.into(),
                source,
            })
    }

    /// Stops serving `node` (its gateway is gone): drops its snapshot and status and ends its
    /// streams. Returns whether there was anything to forget.
    pub fn remove_node(&self, node: &str) -> bool {
        let had_status = self.shared.status.forget(node);
        self.shared.cache.remove(node) || had_status
    }

    /// The nodes with a snapshot or an open stream, sorted.
    pub fn nodes(&self) -> Vec<String> {
        self.shared.cache.nodes()
    }

    /// The snapshot currently published for `node`.
    pub fn snapshot(&self, node: &str) -> Option<Arc<Snapshot>> {
        self.shared.cache.get(node)
    }

    /// Every NACK recorded, with Envoy's error message.
    pub fn nacks(&self) -> Vec<NackRecord> {
        self.shared.status.nacks()
    }

    /// Streams, accepted versions and rejections of one node.
    pub fn node_status(&self, node: &str) -> Option<NodeStatus> {
        self.shared.status.node(node)
    }

    /// The connected nodes served the snapshot `key` (the sidecars of one OTLPProxyConfig).
    pub fn nodes_serving(&self, key: &str) -> std::collections::BTreeMap<String, NodeStatus> {
        self.shared.status.serving(key)
    }

    /// Whether `node` has accepted the current version of every type its snapshot uses.
    pub fn in_sync(&self, node: &str) -> bool {
        let Some(status) = self.node_status(node) else {
            return false;
        };
        let serves = if status.serves.is_empty() {
            node
        } else {
            &status.serves
        };
        let Some(snapshot) = self.snapshot(serves) else {
            return false;
        };
        ResourceType::ALL.into_iter().all(|kind| {
            let used = snapshot.resources(kind).next().is_some();
            !used
                || status.acked.get(kind.label()).map(String::as_str)
                    == Some(snapshot.type_version(kind))
        })
    }

    /// A cheap, cloneable reader of the status, for an HTTP endpoint that outlives borrows.
    pub fn status_reader(&self) -> StatusReader {
        StatusReader(self.shared.clone())
    }

    /// The status of every node as JSON (for a REST endpoint).
    pub fn status_json(&self) -> serde_json::Value {
        self.shared.status.to_json()
    }

    /// Prometheus text exposition of the xDS counters.
    pub fn metrics_text(&self) -> String {
        self.shared.status.metrics_text()
    }

    /// Stops serving: ends every stream, then waits (up to 5 s) for the server to close.
    pub async fn shutdown(mut self) {
        self.signal_stop();
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }

    fn signal_stop(&mut self) {
        self.shared.closing.send_replace(true);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Drop for XdsHandle {
    fn drop(&mut self) {
        self.signal_stop();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The two protocol machines, seen alike by the stream loop.
trait Machine: Send + 'static {
    type Req: Send + 'static;
    type Resp: Send + 'static;
    /// The request's node (set on the first request of a stream).
    fn node(req: &Self::Req) -> Option<&Node>;
    fn kind(resp: &Self::Resp) -> Option<ResourceType>;
    fn on_request(
        &mut self,
        req: &Self::Req,
        snapshot: Option<&Snapshot>,
    ) -> Result<Step<Self::Resp>, ProtocolError>;
    fn on_snapshot(&mut self, snapshot: &Snapshot) -> Vec<Self::Resp>;
}

impl Machine for SotwStream {
    type Req = DiscoveryRequest;
    type Resp = DiscoveryResponse;
    fn node(req: &DiscoveryRequest) -> Option<&Node> {
        req.node.as_ref()
    }
    fn kind(resp: &DiscoveryResponse) -> Option<ResourceType> {
        ResourceType::from_type_url(&resp.type_url)
    }
    fn on_request(
        &mut self,
        req: &DiscoveryRequest,
        snapshot: Option<&Snapshot>,
    ) -> Result<Step<DiscoveryResponse>, ProtocolError> {
        SotwStream::on_request(self, req, snapshot)
    }
    fn on_snapshot(&mut self, snapshot: &Snapshot) -> Vec<DiscoveryResponse> {
        SotwStream::on_snapshot(self, snapshot)
    }
}

impl Machine for DeltaStream {
    type Req = DeltaDiscoveryRequest;
    type Resp = DeltaDiscoveryResponse;
    fn node(req: &DeltaDiscoveryRequest) -> Option<&Node> {
        req.node.as_ref()
    }
    fn kind(resp: &DeltaDiscoveryResponse) -> Option<ResourceType> {
        ResourceType::from_type_url(&resp.type_url)
    }
    fn on_request(
        &mut self,
        req: &DeltaDiscoveryRequest,
        snapshot: Option<&Snapshot>,
    ) -> Result<Step<DeltaDiscoveryResponse>, ProtocolError> {
        DeltaStream::on_request(self, req, snapshot)
    }
    fn on_snapshot(&mut self, snapshot: &Snapshot) -> Vec<DeltaDiscoveryResponse> {
        DeltaStream::on_snapshot(self, snapshot)
    }
}

#[derive(Debug)]
struct Ads {
    shared: Arc<Shared>,
}

type Outbound<R> = ReceiverStream<Result<R, Status>>;

impl Ads {
    fn start<M: Machine>(&self, machine: M, inbound: Streaming<M::Req>) -> Outbound<M::Resp> {
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(run(machine, inbound, tx, self.shared.clone()));
        ReceiverStream::new(rx)
    }
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = Outbound<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = Outbound<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        Ok(Response::new(
            self.start(SotwStream::new(), request.into_inner()),
        ))
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        Ok(Response::new(
            self.start(DeltaStream::new(), request.into_inner()),
        ))
    }
}

/// One stream: first request names the node; then requests and snapshot changes alternate
/// through the machine until Envoy hangs up or the server shuts down.
async fn run<M: Machine>(
    mut machine: M,
    mut inbound: Streaming<M::Req>,
    tx: mpsc::Sender<Result<M::Resp, Status>>,
    shared: Arc<Shared>,
) {
    let mut closing = shared.closing.subscribe();
    let first = match inbound.message().await {
        Ok(Some(first)) => first,
        _ => return,
    };
    let Some((node, serves)) = M::node(&first)
        .filter(|n| !n.id.is_empty())
        .map(|n| (n.id.clone(), node_id::snapshot_key(&n.id, &n.cluster)))
    else {
        let _ = tx
            .send(Err(Status::invalid_argument(
                ProtocolError::NoNodeId.to_string(),
            )))
            .await;
        return;
    };
    let mut watch = shared.cache.watch(&serves);
    shared.status.stream_opened(&node, &serves);
    tracing::debug!(node, serves, "ADS stream opened");
    let mut next = Some(first);
    loop {
        let responses = if let Some(req) = next.take() {
            // Not marking the snapshot seen: other types may still need it (see below).
            let snapshot = watch.borrow().clone();
            match machine.on_request(&req, snapshot.as_deref()) {
                Ok(step) => {
                    record(&shared.status, &node, step.events);
                    step.responses
                }
                Err(e) => {
                    let _ = tx.send(Err(Status::invalid_argument(e.to_string()))).await;
                    break;
                }
            }
        } else {
            tokio::select! {
                _ = closing.changed() => {
                    let _ = tx.send(Err(Status::unavailable("the xDS server is shutting down"))).await;
                    break;
                }
                msg = inbound.message() => match msg {
                    Ok(Some(req)) => { next = Some(req); continue; }
                    Ok(None) | Err(_) => break,
                },
                changed = watch.changed() => {
                    if changed.is_err() { break; }
                    let snapshot = watch.borrow_and_update().clone();
                    snapshot.map(|s| machine.on_snapshot(&s)).unwrap_or_default()
                }
            }
        };
        for response in responses {
            if let Some(kind) = M::kind(&response) {
                shared.status.pushed(kind);
            }
            if tx.send(Ok(response)).await.is_err() {
                break;
            }
        }
        if *closing.borrow() {
            let _ = tx
                .send(Err(Status::unavailable("the xDS server is shutting down")))
                .await;
            break;
        }
    }
    shared.status.stream_closed(&node);
    tracing::debug!(node, "ADS stream closed");
}

fn record(status: &StatusBoard, node: &str, events: Vec<Event>) {
    for event in events {
        match event {
            Event::Ack { kind, version } => status.ack(node, kind, &version),
            Event::Nack {
                kind,
                version,
                code,
                message,
            } => status.nack(node, kind, &version, code, &message),
        }
    }
}
