//! A minimal ADS client speaking the real protocol over tonic: for tests and benchmarks that
//! play many Envoys at once (an Envoy process each would not fit on a laptop).
//!
//! It sends what Envoy sends (node on the first request, ACK with version and nonce, NACK
//! with an error detail) and hands back each response. It does not apply resources.

use std::net::SocketAddr;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{transport::Channel, Streaming};
use xds_api::pb::{
    envoy::{
        config::core::v3::Node,
        service::discovery::v3::{
            aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
            DiscoveryRequest, DiscoveryResponse,
        },
    },
    google::rpc::Status as RpcStatus,
};

use crate::resources::ResourceType;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to the xDS server at {addr}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("the xDS stream failed")]
    Stream(#[from] tonic::Status),
    #[error("the xDS stream was closed by the server")]
    Closed,
}

/// What a response carried, enough to ACK it and to check it.
#[derive(Debug, Clone)]
pub struct Received {
    pub kind: Option<ResourceType>,
    pub type_url: String,
    pub version: String,
    pub nonce: String,
    pub resources: usize,
}

/// One state-of-the-world ADS stream as one node.
#[derive(Debug)]
pub struct SotwClient {
    node: String,
    tx: mpsc::Sender<DiscoveryRequest>,
    inbound: Streaming<DiscoveryResponse>,
    first: bool,
}

impl SotwClient {
    /// Opens a connection and a stream (one HTTP/2 connection per client, like Envoy).
    pub async fn connect(addr: SocketAddr, node: &str) -> Result<Self, ClientError> {
        let channel = Channel::from_shared(format!("http://{addr}"))
            .map_err(|_| ClientError::Closed)?
            .connect()
            .await
            .map_err(|source| ClientError::Connect { addr, source })?;
        Self::on_channel(channel, node).await
    }

    /// A stream on an existing channel.
    pub async fn on_channel(channel: Channel, node: &str) -> Result<Self, ClientError> {
        let (tx, rx) = mpsc::channel(16);
        let mut client = AggregatedDiscoveryServiceClient::new(channel)
            .max_decoding_message_size(64 * 1024 * 1024);
        let inbound = client
            .stream_aggregated_resources(ReceiverStream::new(rx))
            .await?
            .into_inner();
        Ok(Self {
            node: node.into(),
            tx,
            inbound,
            first: true,
        })
    }

    /// Subscribes to `kind` (`names` empty: wildcard for listeners and clusters).
    pub async fn subscribe(
        &mut self,
        kind: ResourceType,
        names: &[&str],
    ) -> Result<(), ClientError> {
        self.send(kind.type_url(), names, "", "", None).await
    }

    /// Accepts `r` (keeping the subscription `names`).
    pub async fn ack(&mut self, r: &Received, names: &[&str]) -> Result<(), ClientError> {
        self.send(&r.type_url, names, &r.version, &r.nonce, None)
            .await
    }

    /// Rejects `r` with `message`, staying at `accepted_version`.
    pub async fn nack(
        &mut self,
        r: &Received,
        names: &[&str],
        accepted_version: &str,
        message: &str,
    ) -> Result<(), ClientError> {
        let status = RpcStatus {
            code: 3,
            message: message.into(),
            details: Vec::new(),
        };
        self.send(&r.type_url, names, accepted_version, &r.nonce, Some(status))
            .await
    }

    /// The next response.
    pub async fn next(&mut self) -> Result<Received, ClientError> {
        let r = self.inbound.message().await?.ok_or(ClientError::Closed)?;
        Ok(Received {
            kind: ResourceType::from_type_url(&r.type_url),
            type_url: r.type_url,
            version: r.version_info,
            nonce: r.nonce,
            resources: r.resources.len(),
        })
    }

    async fn send(
        &mut self,
        type_url: &str,
        names: &[&str],
        version: &str,
        nonce: &str,
        error: Option<RpcStatus>,
    ) -> Result<(), ClientError> {
        let node = self.first.then(|| Node {
            id: self.node.clone(),
            ..Default::default()
        });
        self.first = false;
        let req = DiscoveryRequest {
            version_info: version.into(),
            node,
            resource_names: names.iter().map(|n| n.to_string()).collect(),
            type_url: type_url.into(),
            response_nonce: nonce.into(),
            error_detail: error,
            ..Default::default()
        };
        self.tx.send(req).await.map_err(|_| ClientError::Closed)
    }
}
