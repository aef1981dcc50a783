//! The coordinator's I/O shell: REST for users, the gRPC agent channel, the state store and the
//! timer that drives timeouts. [`serve`] wires them around one [`hub::Hub`].

pub mod converters;
pub mod grpc;
pub mod hub;
pub mod openapi;
pub mod outbox;
pub mod problem;
pub mod reports;
pub mod rest;
pub mod store;
pub mod tls;

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;

use crate::{
    proto::agent_channel_server::AgentChannelServer,
    state::{self, Config, Coordinator},
};

/// How a coordinator process is set up.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub http_addr: SocketAddr,
    pub grpc_addr: SocketAddr,
    /// Where the state database lives; `None` keeps state in memory only.
    pub state_dir: Option<PathBuf>,
    /// The agent channel's mutual TLS: a directory with ca.crt, tls.crt and tls.key.
    /// `None` serves plaintext (only for a trusted network; logged as a warning).
    pub agent_tls_dir: Option<PathBuf>,
    pub machine: Config,
    /// Report storage: `session.json`, report listings and download URLs. `None`: the REST API
    /// answers report listings with 501.
    pub storage: Option<reports::StorageSpec>,
    /// The REST API answers only requests carrying this secret, which the gateway adds
    /// (`nsight_contracts::gateway_only`); `None`: any client.
    pub gateway_token: Option<nsight_contracts::gateway_only::GatewayToken>,
    /// The OTLP converters told when a collection ends (`converters`); `None`: none.
    pub converters: Option<converters::Converters>,
}

/// A running coordinator: its bound addresses. Dropping it does not stop it; the tasks run
/// until the process ends.
#[derive(Debug, Clone)]
pub struct Running {
    pub http_addr: SocketAddr,
    pub grpc_addr: SocketAddr,
    pub repairs: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create the state directory {0}")]
    StateDir(String, #[source] std::io::Error),
    #[error("cannot load the coordinator state")]
    Store(#[from] store::StoreError),
    #[error("agent channel TLS")]
    Tls(#[from] tls::TlsError),
    #[error("agent channel TLS configuration refused")]
    TlsConfig(#[source] tonic::transport::Error),
    #[error("cannot open report storage")]
    Reports(#[from] reports::ReportsError),
}

/// How often agents' reports are written (see `hub`'s module doc on durability).
const GROUP_COMMIT_INTERVAL: Duration = Duration::from_millis(50);

/// Accept queue length: thousands of agents may (re)connect at the same moment, e.g. after a
/// coordinator restart.
const LISTEN_BACKLOG: u32 = 4096;

async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    let err = |source| ServeError::Bind { addr, source };
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .map_err(err)?;
    socket.set_reuseaddr(true).map_err(err)?;
    socket.bind(addr).map_err(err)?;
    socket.listen(LISTEN_BACKLOG).map_err(err)
}

/// Restores state, binds both listeners and spawns the servers and the timeout timer.
pub async fn serve(config: ServerConfig) -> Result<Running, ServeError> {
    let store: Box<dyn store::StateStore> = match &config.state_dir {
        Some(dir) => {
            nsight_storage::private::state_dir(dir)
                .map_err(|e| ServeError::StateDir(dir.display().to_string(), e))?;
            Box::new(store::RedbStore::open(&dir.join("coordinator.redb"))?)
        }
        None => Box::new(store::MemoryStore::default()),
    };
    let heartbeat_interval_ms =
        u32::try_from(config.machine.heartbeat_timeout_ms / 3).unwrap_or(5_000);
    let (hub, repairs) = hub::Hub::restore(Coordinator::new(config.machine), store)?;
    for repair in &repairs {
        tracing::warn!(%repair, "repaired persisted state");
    }

    let http = bind(config.http_addr).await?;
    let grpc = bind(config.grpc_addr).await?;
    let running = Running {
        http_addr: http.local_addr().map_err(|source| ServeError::Bind {
            addr: config.http_addr,
            source,
        })?,
        grpc_addr: grpc.local_addr().map_err(|source| ServeError::Bind {
            addr: config.grpc_addr,
            source,
        })?,
        repairs,
    };

    let reports = match &config.storage {
        Some(spec) => {
            let own_base = format!("http://{}", running.http_addr);
            let reports = reports::Reports::open(spec, &own_base, config.state_dir.as_deref())?;
            tracing::info!(storage = %reports.describe(), "report storage");
            Some(std::sync::Arc::new(reports))
        }
        None => None,
    };
    if let Some(to) = config.converters.clone().filter(|c| !c.urls.is_empty()) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        // A coordinator that died after a collection ended may not have told the converters:
        // tell them again about the recent ones (a converter answers a repeated stop
        // harmlessly).
        let since = hub::now()
            .0
            .saturating_sub(converters::RETELL_WINDOW.as_millis() as u64);
        let recent = hub.read(|c| c.ended_since(state::Millis(since)));
        if !recent.is_empty() {
            tracing::info!(
                collections = recent.len(),
                "telling the OTLP converters again about the collections that ended in the last {} min",
                converters::RETELL_WINDOW.as_secs() / 60
            );
        }
        for (session, collection, state) in recent {
            let _ = tx.send(converters::Settled {
                session,
                collection,
                state,
            });
        }
        hub.announce_settled(tx);
        tracing::info!(converters = ?to.urls, "ended collections are stopped on the OTLP converters");
        tokio::spawn(converters::run(to, rx));
    }
    let app = rest::router(hub.clone(), reports, config.gateway_token.clone());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(http, app).await {
            tracing::error!(error = %e, "REST server stopped");
        }
    });
    let service =
        AgentChannelServer::new(grpc::AgentService::new(hub.clone(), heartbeat_interval_ms));
    let mut builder = tonic::transport::Server::builder();
    match &config.agent_tls_dir {
        Some(dir) => {
            builder = builder
                .tls_config(tls::server_config(dir)?)
                .map_err(ServeError::TlsConfig)?;
        }
        None => tracing::warn!(
            "agent channel WITHOUT TLS: anyone who reaches the port can act as an agent"
        ),
    }
    tokio::spawn(async move {
        let result = builder
            // Dead peers are found by the agents' heartbeats; h2 pings only keep NAT/LB paths
            // open, so a generous timeout avoids dropping agents on a busy node.
            .http2_keepalive_interval(Some(Duration::from_secs(30)))
            .http2_keepalive_timeout(Some(Duration::from_secs(60)))
            .add_service(service)
            .serve_with_incoming(TcpListenerStream::new(grpc))
            .await;
        if let Err(e) = result {
            tracing::error!(error = %e, "agent channel stopped");
        }
    });
    let flusher = hub.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(GROUP_COMMIT_INTERVAL);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            // The write waits for the disk: on a blocking thread, not a runtime worker.
            let hub = flusher.clone();
            if let Err(e) = tokio::task::spawn_blocking(move || hub.flush()).await {
                tracing::error!(error = %e, "group commit task failed");
            }
        }
    });
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        loop {
            every.tick().await;
            hub.tick();
        }
    });
    tracing::info!(http = %running.http_addr, grpc = %running.grpc_addr, "coordinator serving");
    Ok(running)
}
