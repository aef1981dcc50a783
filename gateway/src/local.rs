//! The IR of the local platform's gateway, built from the addresses of the local services.
//!
//! ```text
//!  :8888  /coordinator/ -> coordinator   (API: 60 s timeout, retry on connect failure,
//!         /analysis/    -> analysis       health check when a path is given)
//!         /tenant/      -> tenant
//!         /             -> ui            (public: static assets, no auth)
//!         auth filter (api-key, or OAuth2 with its identity provider's upstream) on every
//!         route but the UI; HTTPS when a certificate is given;
//!         the gateway token (when given) added on the coordinator's and analysis' routes
//!  :9000  /             -> storage        (streaming: no timeout, no retry, no auth: S3 SigV4)
//! ```
//! Pure: only builds a [`GatewayIr`]; the caller publishes it with `XdsHandle::set_ir`.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use nsight_contracts::{gateway_only::GatewayToken, routes};

use crate::ir::{
    AuthFilter, GatewayIr, HealthCheck, IrError, Listener, Route, TlsSecret, Upstream,
    GATEWAY_PORT, STORAGE_PROXY_PORT,
};

/// Listener, upstream and secret names used by the local gateway.
pub mod names {
    pub const GATEWAY_LISTENER: &str = "gateway";
    pub const STORAGE_LISTENER: &str = "storage-proxy";
    pub const COORDINATOR: &str = "coordinator";
    pub const ANALYSIS: &str = "analysis";
    pub const TENANT: &str = "tenant";
    pub const UI: &str = "ui";
    pub const STORAGE: &str = "storage";
    pub const TLS_SECRET: &str = "gateway-tls";
}

/// Route prefixes on the gateway listener (the documented defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefixes {
    pub coordinator: String,
    pub analysis: String,
    pub tenant: String,
}

impl Default for Prefixes {
    fn default() -> Self {
        Self {
            coordinator: routes::COORDINATOR.into(),
            analysis: routes::ANALYSIS.into(),
            tenant: "/tenant/".into(),
        }
    }
}

/// Builder for the local gateway; every upstream is optional (absent: no route).
#[derive(Debug, Clone)]
pub struct LocalGateway {
    address: String,
    http_port: u16,
    storage_port: u16,
    prefixes: Prefixes,
    coordinator: Option<SocketAddr>,
    coordinator_health: Option<String>,
    analysis: Option<SocketAddr>,
    tenant: Option<SocketAddr>,
    ui: Option<SocketAddr>,
    storage: Option<SocketAddr>,
    /// What the storage listener forwards: `/` for an S3 server; only the object path for an
    /// upstream that serves more than objects (the coordinator's signed-URL object server).
    storage_prefix: String,
    auth: Option<AuthFilter>,
    tls: Option<TlsSecret>,
    gateway_token: Option<GatewayToken>,
    /// Upstreams no route leads to, reached by a filter (an OAuth2 identity provider).
    extra_upstreams: Vec<Upstream>,
}

impl GatewayIr {
    /// Starts the local gateway: 127.0.0.1, ports 8888 and 9000, documented prefixes.
    pub fn local() -> LocalGateway {
        LocalGateway {
            address: "127.0.0.1".into(),
            http_port: GATEWAY_PORT,
            storage_port: STORAGE_PROXY_PORT,
            prefixes: Prefixes::default(),
            coordinator: None,
            coordinator_health: None,
            analysis: None,
            tenant: None,
            ui: None,
            storage: None,
            storage_prefix: "/".into(),
            auth: None,
            tls: None,
            gateway_token: None,
            extra_upstreams: Vec::new(),
        }
    }
}

impl LocalGateway {
    /// Where the gateway listens (tests use free ports).
    pub fn listen(mut self, address: &str, http_port: u16, storage_port: u16) -> Self {
        self.address = address.into();
        self.http_port = http_port;
        self.storage_port = storage_port;
        self
    }

    pub fn prefixes(mut self, prefixes: Prefixes) -> Self {
        self.prefixes = prefixes;
        self
    }

    pub fn coordinator(mut self, addr: SocketAddr) -> Self {
        self.coordinator = Some(addr);
        self
    }

    /// Health-check the coordinator at `path` (its `/healthz`).
    pub fn coordinator_health_check(mut self, path: &str) -> Self {
        self.coordinator_health = Some(path.into());
        self
    }

    pub fn analysis(mut self, addr: SocketAddr) -> Self {
        self.analysis = Some(addr);
        self
    }

    pub fn tenant(mut self, addr: SocketAddr) -> Self {
        self.tenant = Some(addr);
        self
    }

    pub fn ui(mut self, addr: SocketAddr) -> Self {
        self.ui = Some(addr);
        self
    }

    pub fn storage(mut self, addr: SocketAddr) -> Self {
        self.storage = Some(addr);
        self
    }

    /// Forward only paths under `prefix` on the storage listener (default `/`).
    pub fn storage_prefix(mut self, prefix: &str) -> Self {
        self.storage_prefix = prefix.into();
        self
    }

    /// Require `Authorization: Bearer <key>` on the API routes (our proxy-wasm filter).
    pub fn api_key_auth(mut self, wasm: impl Into<PathBuf>, keys: &[&str]) -> Self {
        self.auth = Some(AuthFilter::api_key(wasm, keys));
        self
    }

    /// Any auth filter configuration (JSON as `plugins/auth` documents it).
    pub fn auth(mut self, auth: AuthFilter) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Serve HTTPS on the gateway and storage ports with this certificate chain and key (PEM).
    pub fn tls(mut self, cert_chain_pem: &str, private_key_pem: &str) -> Self {
        self.tls = Some(TlsSecret {
            name: names::TLS_SECRET.into(),
            cert_chain_pem: cert_chain_pem.into(),
            private_key_pem: private_key_pem.into(),
        });
        self
    }

    /// Send `token` to the coordinator and the analysis service on every request, so they can
    /// refuse clients that bypass the gateway (`nsight_contracts::gateway_only`). Never sent
    /// to the UI server or to the storage upstream (an S3 server may not be ours).
    pub fn gateway_token(mut self, token: GatewayToken) -> Self {
        self.gateway_token = Some(token);
        self
    }

    /// An upstream without a route, for a filter to call (the OAuth2 filter's identity
    /// provider). It never gets the gateway token.
    pub fn upstream(mut self, upstream: Upstream) -> Self {
        self.extra_upstreams.push(Upstream {
            gateway_token: None,
            ..upstream
        });
        self
    }

    /// The IR, validated.
    pub fn build(self) -> Result<GatewayIr, IrError> {
        let mut upstreams = Vec::new();
        let mut gateway = Listener::http(names::GATEWAY_LISTENER, &self.address, self.http_port);
        gateway.auth = self.auth;
        gateway.tls_secret = self.tls.as_ref().map(|s| s.name.clone());
        let token = self.gateway_token;
        let mut add = |name: &str, addr: Option<SocketAddr>, route: Route, health: Option<&str>| {
            if let Some(addr) = addr {
                let mut upstream = Upstream::new(name, &addr.ip().to_string(), addr.port());
                upstream.health_check = health.map(HealthCheck::http);
                if name == names::COORDINATOR || name == names::ANALYSIS {
                    upstream.gateway_token = token.clone();
                }
                upstreams.push(upstream);
                gateway.routes.push(route);
            }
        };
        let p = &self.prefixes;
        add(
            names::COORDINATOR,
            self.coordinator,
            Route::api(&p.coordinator, names::COORDINATOR),
            self.coordinator_health.as_deref(),
        );
        let mut analysis = Route::api(&p.analysis, names::ANALYSIS);
        analysis.timeout = Some(Duration::from_secs(300));
        add(names::ANALYSIS, self.analysis, analysis, None);
        add(
            names::TENANT,
            self.tenant,
            Route::api(&p.tenant, names::TENANT),
            None,
        );
        add(
            names::UI,
            self.ui,
            Route::api("/", names::UI).public(),
            None,
        );
        let mut listeners = vec![gateway];
        if let Some(storage) = self.storage {
            upstreams.push(Upstream::new(
                names::STORAGE,
                &storage.ip().to_string(),
                storage.port(),
            ));
            let mut proxy =
                Listener::http(names::STORAGE_LISTENER, &self.address, self.storage_port);
            // Downloads are as sensitive as the API: HTTPS on both ports, or on neither.
            proxy.tls_secret = self.tls.as_ref().map(|s| s.name.clone());
            proxy
                .routes
                .push(Route::streaming(&self.storage_prefix, names::STORAGE));
            listeners.push(proxy);
        }
        upstreams.extend(self.extra_upstreams);
        let ir = GatewayIr {
            listeners,
            upstreams,
            secrets: self.tls.into_iter().collect(),
        };
        ir.validate()?;
        Ok(ir)
    }
}
