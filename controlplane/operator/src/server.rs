//! The webhook's HTTPS shell: axum routes (`POST /mutate`, `GET /healthz`) over rustls with a
//! certificate and key read from PEM files. All decisions happen in `admission::review`.

use std::{io, net::SocketAddr, path::Path, sync::Arc};

use axum::{
    body::Bytes,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
    Json, Router,
};
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto,
    service::TowerToHyperService,
};
use tokio::net::TcpListener;
use tokio_rustls::{
    rustls::{
        self,
        pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
        ServerConfig,
    },
    TlsAcceptor,
};

use crate::{
    admission::{review, World},
    settings::Settings,
};

/// What the handlers share.
#[derive(Clone)]
pub struct Webhook {
    pub world: Arc<dyn World>,
    pub settings: Arc<Settings>,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("settings", &self.settings)
            .finish()
    }
}

/// Loading the serving certificate failed.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the certificate chain {path}")]
    ReadCert {
        path: String,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("cannot read the private key {path}")]
    ReadKey {
        path: String,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("the certificate and key do not make a TLS server config")]
    Config(#[source] rustls::Error),
}

/// A rustls server config (ring, TLS 1.2 + 1.3, HTTP/1.1) from PEM files.
pub fn tls_config(cert: &Path, key: &Path) -> Result<ServerConfig, TlsError> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|source| TlsError::ReadCert {
            path: cert.display().to_string(),
            source,
        })?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|source| TlsError::ReadKey {
        path: key.display().to_string(),
        source,
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(TlsError::Config)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

pub fn router(webhook: Webhook) -> Router {
    Router::new()
        .route("/mutate", post(mutate))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(webhook)
}

async fn mutate(State(webhook): State<Webhook>, body: Bytes) -> Response {
    match review(&body, webhook.world.as_ref(), &webhook.settings) {
        Ok(answer) => Json(answer).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "refused a malformed admission request");
            (StatusCode::BAD_REQUEST, e.to_string()).into_response()
        }
    }
}

/// Serves `router` over TLS on `listener` until the task is dropped. A failed handshake or
/// connection is logged and does not stop the server.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    router: Router,
) -> io::Result<()> {
    let acceptor = TlsAcceptor::from(tls);
    loop {
        let (tcp, peer) = listener.accept().await?;
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move { connection(acceptor, tcp, peer, router).await });
    }
}

async fn connection(
    acceptor: TlsAcceptor,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    router: Router,
) {
    let stream = match acceptor.accept(tcp).await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            return;
        }
    };
    let service = TowerToHyperService::new(router);
    if let Err(e) = auto::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(stream), service)
        .await
    {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}
