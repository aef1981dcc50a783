//! The webhook's HTTPS shell: axum routes (`POST /mutate`, `GET /healthz`, `GET /readyz`) over
//! rustls with a certificate and key read from PEM files, or one the webhook issued and swaps
//! on renewal ([`SwappableCert`]). All decisions happen in
//! `admission::review_with_effects`; the shell answers first and then hands its side effects
//! (skip Events, auto-provisioning) to their queues ([`Shell`]), which never wait.

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
        server::{ClientHello, ResolvesServerCert},
        sign::CertifiedKey,
        ServerConfig,
    },
    TlsAcceptor,
};

use crate::{
    admission::{review_with_effects, Effects, World},
    events::EventSink,
    provision::Provisioner,
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

/// The webhook's side effects and readiness; all optional (none: no Events, no provisioning,
/// always ready).
#[derive(Clone, Default)]
pub struct Shell {
    pub events: Option<EventSink>,
    pub provisioner: Option<Provisioner>,
    /// Single-tenant: copies the Secrets an injected Pod mounts into its namespace.
    pub copier: Option<Arc<crate::secret_copy::SecretCopier>>,
    /// `GET /readyz` answers 200 when this says so (the World's caches are synced).
    pub ready: Option<Arc<dyn Fn() -> bool + Send + Sync>>,
}

impl std::fmt::Debug for Shell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shell")
            .field("events", &self.events.is_some())
            .field("provisioner", &self.provisioner.is_some())
            .finish_non_exhaustive()
    }
}

impl Shell {
    /// Queues what a review asked for.
    fn apply(&self, effects: Effects) {
        if let (Some(sink), Some(event)) = (&self.events, effects.event) {
            sink.emit(event);
        }
        if let (Some(provisioner), Some(namespace)) = (&self.provisioner, effects.injected_in) {
            provisioner.request(&namespace);
        }
    }

    fn is_ready(&self) -> bool {
        self.ready.as_ref().is_none_or(|ready| ready())
    }
}

#[derive(Clone)]
struct AppState {
    webhook: Webhook,
    shell: Shell,
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
    server_config(chain, key)
}

/// A certificate the webhook issued itself (PEM text in memory): a server config whose
/// certificate [`SwappableCert::set`] replaces while it serves (a renewal; new handshakes get
/// the new certificate, open connections keep theirs).
pub fn tls_config_swappable(
    cert: &str,
    key: &str,
) -> Result<(ServerConfig, Arc<SwappableCert>), TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let swappable = Arc::new(SwappableCert {
        current: std::sync::RwLock::new(certified_key(&provider, cert, key)?),
        provider: provider.clone(),
    });
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_no_client_auth()
        .with_cert_resolver(swappable.clone());
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((config, swappable))
}

fn certified_key(
    provider: &rustls::crypto::CryptoProvider,
    cert: &str,
    key: &str,
) -> Result<Arc<CertifiedKey>, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::ReadCert {
            path: "(issued certificate)".into(),
            source,
        })?;
    let key =
        PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|source| TlsError::ReadKey {
            path: "(issued key)".into(),
            source,
        })?;
    CertifiedKey::from_der(chain, key, provider)
        .map(Arc::new)
        .map_err(TlsError::Config)
}

/// The serving certificate of [`tls_config_swappable`]: every handshake reads the current one.
#[derive(Debug)]
pub struct SwappableCert {
    current: std::sync::RwLock<Arc<CertifiedKey>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl SwappableCert {
    /// Serves `cert` (PEM chain) with `key` from the next handshake on; on an error the
    /// current certificate stays.
    pub fn set(&self, cert: &str, key: &str) -> Result<(), TlsError> {
        let next = certified_key(&self.provider, cert, key)?;
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = next;
        Ok(())
    }
}

impl ResolvesServerCert for SwappableCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        )
    }
}

fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<ServerConfig, TlsError> {
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

/// The routes, without side effects (always ready).
pub fn router(webhook: Webhook) -> Router {
    router_with(webhook, Shell::default())
}

/// The routes with `shell`'s side effects and readiness.
pub fn router_with(webhook: Webhook, shell: Shell) -> Router {
    Router::new()
        .route("/mutate", post(mutate))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(AppState { webhook, shell })
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.shell.is_ready() {
        (StatusCode::OK, "ok").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "the profile config and namespace caches are not synced yet",
        )
            .into_response()
    }
}

async fn mutate(State(state): State<AppState>, body: Bytes) -> Response {
    let webhook = &state.webhook;
    match review_with_effects(&body, webhook.world.as_ref(), &webhook.settings) {
        Ok((answer, effects)) => {
            if let (Some(copier), Some(namespace)) = (&state.shell.copier, &effects.injected_in) {
                copier.ensure(namespace, &effects.copies).await;
            }
            let response = Json(answer).into_response();
            state.shell.apply(effects);
            response
        }
        Err(e) => {
            tracing::warn!(error = %e, "refused a malformed admission request");
            (StatusCode::BAD_REQUEST, e.to_string()).into_response()
        }
    }
}

/// The runtime the webhook (and the benchmark's echo, its reference) serves on: `workers` 0 or
/// 1 is the current-thread scheduler (a review never hops threads and no second worker is woken
/// for it), more is the multi-thread scheduler with that many workers.
pub fn runtime(workers: usize) -> io::Result<tokio::runtime::Runtime> {
    if workers <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
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
        // Answers are one small write each: do not let Nagle hold them back.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
        }
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
