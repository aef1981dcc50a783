//! The gateway IR: what one Envoy gateway must do, as plain data (no Envoy types, no I/O).
//!
//! Owns the shape and validation of a gateway's intent: listeners (the HTTP/HTTPS entry point
//! on 8888, the storage proxy on 9000), their routes by path prefix, the upstream clusters with
//! timeouts, health checks and retries, the TLS secret and the auth filter per listener. The
//! translation to Envoy resources lives in `translate`; this module must not know Envoy.
//!
//! ```text
//! GatewayIr ──validate──> translate::translate ──> Resources ──> cache::Snapshot
//! ```

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    time::Duration,
};

use nsight_contracts::gateway_only::GatewayToken;
use serde::Serialize;

/// The gateway's documented HTTP(S) port.
pub const GATEWAY_PORT: u16 = 8888;
/// The gateway's documented storage proxy port.
pub const STORAGE_PROXY_PORT: u16 = 9000;

/// Everything one gateway (one Envoy node) serves. Invariant after [`GatewayIr::validate`]:
/// names are unique, every route names an existing upstream, every TLS listener's secret exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GatewayIr {
    pub listeners: Vec<Listener>,
    pub upstreams: Vec<Upstream>,
    /// TLS certificates served to Envoy over SDS, by name.
    pub secrets: Vec<TlsSecret>,
}

/// One listening socket with its routes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listener {
    /// Unique; also names the listener's route configuration.
    pub name: String,
    pub address: String,
    pub port: u16,
    /// HTTPS with this SDS secret when set, plain HTTP otherwise.
    pub tls_secret: Option<String>,
    /// The proxy-wasm auth filter, run before routing; `None` lets every request through.
    pub auth: Option<AuthFilter>,
    /// The proxy-wasm tenant routing filter, run after the auth filter; `None`: no tenants.
    pub routing: Option<TenantRouting>,
    /// Matched in order: put longer prefixes first (`/` last).
    pub routes: Vec<Route>,
    /// Idle time allowed on a stream (request or response body not moving). Large uploads and
    /// downloads stream without buffering, so this, not a total timeout, bounds a stalled one.
    pub stream_idle_timeout: Duration,
}

/// Our proxy-wasm auth filter (`plugins/auth`): the `.wasm` file Envoy loads and the JSON
/// configuration the filter parses (`{"mode":"api-key","api_keys":[..]}`).
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct AuthFilter {
    /// The full module (`nsight_auth_filter.wasm`): every mode.
    pub wasm_path: PathBuf,
    /// The lean module (`nsight_auth_filter_lean.wasm`, the same code without the
    /// response-headers hook, so Envoy enters the VM one time fewer per request), loaded
    /// instead of `wasm_path` when the configuration never touches the response (every mode
    /// but OAuth2); `None`: always `wasm_path`. See [`AuthFilter::module_path`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lean_wasm_path: Option<PathBuf>,
    /// Passed verbatim; it may hold secrets, so `Debug` never prints it.
    #[serde(skip)]
    pub config_json: String,
}

impl std::fmt::Debug for AuthFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthFilter")
            .field("wasm_path", &self.wasm_path)
            .field("lean_wasm_path", &self.lean_wasm_path)
            .field(
                "config_json",
                &format_args!("<{} bytes>", self.config_json.len()),
            )
            .finish()
    }
}

/// The filter modes that decide on the request headers alone (the lean module serves them).
/// OAuth2 renews its session cookie on the upstream's response, so it needs the full module.
const REQUEST_ONLY_MODES: &[&str] = &["unauthenticated", "api-key", "jwt"];

impl AuthFilter {
    /// The API-key mode of the filter with these keys.
    pub fn api_key(wasm_path: impl Into<PathBuf>, keys: &[&str]) -> Self {
        let config = serde_json::json!({ "mode": "api-key", "api_keys": keys });
        Self {
            wasm_path: wasm_path.into(),
            lean_wasm_path: None,
            config_json: config.to_string(),
        }
    }

    /// Also offer the lean module at `path` (used for the modes that need no response hook).
    pub fn with_lean_module(mut self, path: impl Into<PathBuf>) -> Self {
        self.lean_wasm_path = Some(path.into());
        self
    }

    /// The module Envoy loads: the lean one when there is one and the configuration's `mode`
    /// decides on request headers alone; otherwise (OAuth2, or a configuration this cannot
    /// read: the filter itself will judge it) the full one.
    pub fn module_path(&self) -> &Path {
        match &self.lean_wasm_path {
            Some(lean) if self.request_only() => lean.as_path(),
            _ => self.wasm_path.as_path(),
        }
    }

    /// Whether the filter signs browsers in itself (OAuth2: it answers its own callback,
    /// sign-in and logout paths under [`nsight_contracts::routes::OAUTH2`]).
    pub fn signs_in(&self) -> bool {
        serde_json::from_str::<serde_json::Value>(&self.config_json)
            .ok()
            .and_then(|v| v.get("mode")?.as_str().map(str::to_owned))
            .is_some_and(|mode| mode == "oauth2")
    }

    fn request_only(&self) -> bool {
        serde_json::from_str::<serde_json::Value>(&self.config_json)
            .ok()
            .and_then(|v| v.get("mode")?.as_str().map(str::to_owned))
            .is_some_and(|mode| REQUEST_ONLY_MODES.contains(&mode.as_str()))
    }
}

/// Our proxy-wasm tenant routing filter (`plugins/routing`) on a gateway shared by several
/// namespaces: requests under `path_prefix` go through it; it sets `cluster_header` to the
/// tenant's upstream (read by a `cluster_header` route) and strips `<prefix><namespace>`, or
/// answers 403/404 itself. On every other route of the listener it is disabled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TenantRouting {
    pub wasm_path: PathBuf,
    /// The routing table as the filter parses it (docs/auth.md); no secrets in it.
    pub config_json: String,
    /// Requests whose path starts with this (`/t/`) are routed by tenant.
    pub path_prefix: String,
    /// The header the filter sets to the cluster name.
    pub cluster_header: String,
    /// The upstreams the table names; each must be defined in the IR.
    pub upstreams: Vec<String>,
    /// Total time of a routed exchange (the `cluster_header` routes'; default 60 s).
    pub timeout: Duration,
}

/// One tenant of a shared gateway: its namespace, its upstreams and who may reach it (values
/// of the auth filter's `x-nsight-auth-identity`; API keys bound to the tenant, identity
/// `api-key:<namespace>`, reach it without being listed).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tenant {
    pub namespace: String,
    /// Where a forwarded path no entry of `routes` matches goes; empty: nowhere (404).
    pub upstream: String,
    /// `(prefix, upstream)` by the forwarded path (after `/t/<namespace>` is stripped), e.g.
    /// `("/coordinator/", "tenant-team-a-coordinator")`; the longest prefix wins.
    pub routes: Vec<(String, String)>,
    pub identities: Vec<String>,
}

impl TenantRouting {
    /// The filter's default path prefix: tenants by path `/t/<namespace>/...`.
    pub const PATH_PREFIX: &'static str = "/t/";
    /// The filter's default cluster header.
    pub const CLUSTER_HEADER: &'static str = "x-nsight-tenant-cluster";

    /// Tenants chosen by path (`/t/<namespace>/...`, prefix stripped before forwarding).
    pub fn by_path(wasm_path: impl Into<PathBuf>, tenants: &[Tenant]) -> Self {
        Self::by_prefix(wasm_path, Self::PATH_PREFIX, tenants)
    }

    /// Tenants chosen by path under `prefix` (`/x/`): `<prefix><namespace>/...`.
    pub fn by_prefix(wasm_path: impl Into<PathBuf>, prefix: &str, tenants: &[Tenant]) -> Self {
        let table: Vec<serde_json::Value> = tenants
            .iter()
            .map(|t| {
                let mut entry = serde_json::json!({
                    "namespace": t.namespace,
                    "identities": t.identities,
                });
                if !t.upstream.is_empty() {
                    entry["cluster"] = serde_json::json!(t.upstream);
                }
                if !t.routes.is_empty() {
                    let routes: Vec<serde_json::Value> = t
                        .routes
                        .iter()
                        .map(|(p, u)| serde_json::json!({ "prefix": p, "cluster": u }))
                        .collect();
                    entry["routes"] = serde_json::Value::Array(routes);
                }
                entry
            })
            .collect();
        let config = serde_json::json!({
            "tenant_source": { "path_prefix": prefix },
            "cluster_header": Self::CLUSTER_HEADER,
            "tenants": table,
        });
        let mut upstreams: Vec<String> = tenants
            .iter()
            .flat_map(|t| std::iter::once(&t.upstream).chain(t.routes.iter().map(|(_, u)| u)))
            .filter(|u| !u.is_empty())
            .cloned()
            .collect();
        upstreams.sort();
        upstreams.dedup();
        Self {
            wasm_path: wasm_path.into(),
            config_json: config.to_string(),
            path_prefix: prefix.into(),
            cluster_header: Self::CLUSTER_HEADER.into(),
            upstreams,
            timeout: Duration::from_secs(60),
        }
    }

    /// An identity equal to a tenant's namespace (e.g. a `namespace` claim) reaches it.
    pub fn with_identity_is_namespace(mut self) -> Self {
        if let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&self.config_json) {
            v["identity_is_namespace"] = serde_json::json!(true);
            self.config_json = v.to_string();
        }
        self
    }
}

/// A path-prefix route to one upstream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Route {
    pub prefix: String,
    pub upstream: String,
    /// Replaces the matched prefix before forwarding (e.g. `/tenant/` -> `/`); `None` keeps it.
    pub rewrite_prefix: Option<String>,
    /// Total time for the whole exchange; `None` means no limit (streams of any size).
    pub timeout: Option<Duration>,
    pub retry: Retry,
    /// The listener's auth filter does not run on this route (e.g. the UI's static assets).
    pub public: bool,
}

/// When Envoy may send a request again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Retry {
    Never,
    /// Only when the request cannot have reached the upstream (connect failure, refused
    /// stream): safe for every method and body, and needs no request buffering in practice.
    ConnectFailures {
        attempts: u32,
    },
}

/// A named upstream service: one or more `host:port` endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Upstream {
    pub name: String,
    pub endpoints: Vec<Endpoint>,
    pub connect_timeout: Duration,
    pub health_check: Option<HealthCheck>,
    /// TLS to the upstream (e.g. an identity provider over HTTPS); `None`: plaintext.
    pub tls: Option<UpstreamTls>,
    /// Speak HTTP/2 to the upstream (a gRPC service such as a collector's OTLP/gRPC port);
    /// `false`: HTTP/1.1.
    pub http2: bool,
    /// Our own service behind the gateway: every route to it sets `x-nsight-gateway-token` to
    /// this secret (overwriting a client's), which the service requires. Never set it on an
    /// upstream we do not run (an S3 server, an identity provider): it would learn the secret.
    #[serde(skip)]
    pub gateway_token: Option<GatewayToken>,
}

/// TLS from Envoy to an upstream: the server name sent (SNI) and checked against the
/// certificate's DNS names, and the CAs trusted to sign that certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpstreamTls {
    /// Sent as SNI; the upstream's certificate must name it (a DNS subject alternative name).
    pub sni: String,
    pub trust: CaTrust,
}

/// Which certificate authorities an upstream TLS connection trusts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum CaTrust {
    /// The CA bundle of Envoy's image ([`SYSTEM_CA_BUNDLE`]): public identity providers.
    System,
    /// These PEM certificates only (e.g. a private CA's `ca.crt` from a Secret).
    Pem(String),
}

/// Where Envoy's image (Debian/Ubuntu based, like `envoyproxy/envoy`) keeps the system CAs.
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Endpoint {
    /// An IP address (static) or a DNS name (resolved by Envoy).
    pub host: String,
    pub port: u16,
}

/// An active HTTP health check: `GET path` must answer 2xx.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealthCheck {
    pub path: String,
    pub interval: Duration,
    pub timeout: Duration,
    pub unhealthy_threshold: u32,
    pub healthy_threshold: u32,
}

impl HealthCheck {
    /// `GET path` every 5 s, 1 s timeout, 3 failures to eject, 1 success to return.
    pub fn http(path: &str) -> Self {
        Self {
            path: path.into(),
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(1),
            unhealthy_threshold: 3,
            healthy_threshold: 1,
        }
    }
}

/// A certificate chain and key (PEM), as in a Kubernetes TLS secret's `tls.crt`/`tls.key`.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct TlsSecret {
    pub name: String,
    pub cert_chain_pem: String,
    /// Never printed by `Debug` nor serialized.
    #[serde(skip)]
    pub private_key_pem: String,
}

impl std::fmt::Debug for TlsSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSecret")
            .field("name", &self.name)
            .field("private_key_pem", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// Why an IR cannot be translated; each names what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IrError {
    #[error("two {kind}s are named `{name}`; names must be unique")]
    DuplicateName { kind: &'static str, name: String },
    #[error("route `{prefix}` on listener `{listener}` names upstream `{upstream}`, which is not defined")]
    UnknownUpstream {
        listener: String,
        prefix: String,
        upstream: String,
    },
    #[error("listener `{listener}` uses TLS secret `{secret}`, which is not defined")]
    UnknownSecret { listener: String, secret: String },
    #[error("route prefix `{prefix}` on listener `{listener}` must start with `/`")]
    BadPrefix { listener: String, prefix: String },
    #[error("upstream `{upstream}` has no endpoint")]
    NoEndpoint { upstream: String },
    #[error("upstream `{upstream}` uses TLS with {what}")]
    BadUpstreamTls {
        upstream: String,
        what: &'static str,
    },
    #[error("listeners `{first}` and `{second}` both bind {address}:{port}")]
    PortClash {
        first: String,
        second: String,
        address: String,
        port: u16,
    },
}

impl GatewayIr {
    /// Checks the invariants documented on [`GatewayIr`].
    pub fn validate(&self) -> Result<(), IrError> {
        unique("listener", self.listeners.iter().map(|l| &l.name))?;
        unique("upstream", self.upstreams.iter().map(|u| &u.name))?;
        unique("secret", self.secrets.iter().map(|s| &s.name))?;
        for u in &self.upstreams {
            if u.endpoints.is_empty() {
                return Err(IrError::NoEndpoint {
                    upstream: u.name.clone(),
                });
            }
            if let Some(tls) = &u.tls {
                let bad = |what| {
                    Err(IrError::BadUpstreamTls {
                        upstream: u.name.clone(),
                        what,
                    })
                };
                if tls.sni.is_empty() || tls.sni.len() > 253 {
                    return bad("an empty or too long SNI; set the upstream's DNS name");
                }
                if matches!(&tls.trust, CaTrust::Pem(pem) if !pem.contains("-----BEGIN CERTIFICATE-----"))
                {
                    return bad("a CA that holds no PEM `BEGIN CERTIFICATE` block");
                }
            }
        }
        for (i, l) in self.listeners.iter().enumerate() {
            if let Some(other) = self.listeners[..i]
                .iter()
                .find(|o| o.port == l.port && o.address == l.address)
            {
                return Err(IrError::PortClash {
                    first: other.name.clone(),
                    second: l.name.clone(),
                    address: l.address.clone(),
                    port: l.port,
                });
            }
            if let Some(secret) = &l.tls_secret {
                if !self.secrets.iter().any(|s| &s.name == secret) {
                    return Err(IrError::UnknownSecret {
                        listener: l.name.clone(),
                        secret: secret.clone(),
                    });
                }
            }
            if let Some(routing) = &l.routing {
                if !routing.path_prefix.starts_with('/') {
                    return Err(IrError::BadPrefix {
                        listener: l.name.clone(),
                        prefix: routing.path_prefix.clone(),
                    });
                }
                if let Some(missing) = routing
                    .upstreams
                    .iter()
                    .find(|name| !self.upstreams.iter().any(|u| &u.name == *name))
                {
                    return Err(IrError::UnknownUpstream {
                        listener: l.name.clone(),
                        prefix: routing.path_prefix.clone(),
                        upstream: missing.clone(),
                    });
                }
            }
            for r in &l.routes {
                if !r.prefix.starts_with('/') {
                    return Err(IrError::BadPrefix {
                        listener: l.name.clone(),
                        prefix: r.prefix.clone(),
                    });
                }
                if !self.upstreams.iter().any(|u| u.name == r.upstream) {
                    return Err(IrError::UnknownUpstream {
                        listener: l.name.clone(),
                        prefix: r.prefix.clone(),
                        upstream: r.upstream.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// The listener named `name`, to adjust routes in place.
    pub fn listener_mut(&mut self, name: &str) -> Option<&mut Listener> {
        self.listeners.iter_mut().find(|l| l.name == name)
    }
}

fn unique<'a>(kind: &'static str, names: impl Iterator<Item = &'a String>) -> Result<(), IrError> {
    let mut seen = BTreeSet::new();
    for name in names {
        if !seen.insert(name) {
            return Err(IrError::DuplicateName {
                kind,
                name: name.clone(),
            });
        }
    }
    Ok(())
}

impl Upstream {
    /// One endpoint, 2 s connect timeout, no health check.
    pub fn new(name: &str, host: &str, port: u16) -> Self {
        Self {
            name: name.into(),
            endpoints: vec![Endpoint {
                host: host.into(),
                port,
            }],
            connect_timeout: Duration::from_secs(2),
            health_check: None,
            tls: None,
            http2: false,
            gateway_token: None,
        }
    }

    /// HTTP/2 to this upstream (gRPC).
    pub fn with_http2(mut self) -> Self {
        self.http2 = true;
        self
    }

    /// TLS to this upstream with `sni` (also the name its certificate must carry).
    pub fn with_tls(mut self, sni: &str, trust: CaTrust) -> Self {
        self.tls = Some(UpstreamTls {
            sni: sni.into(),
            trust,
        });
        self
    }

    pub fn with_health_check(mut self, check: HealthCheck) -> Self {
        self.health_check = Some(check);
        self
    }
}

impl Route {
    /// A prefix route with a 60 s timeout and retries on connect failures (safe for any
    /// method: the request never reached the upstream).
    pub fn api(prefix: &str, upstream: &str) -> Self {
        Self {
            prefix: prefix.into(),
            upstream: upstream.into(),
            rewrite_prefix: None,
            timeout: Some(Duration::from_secs(60)),
            retry: Retry::ConnectFailures { attempts: 2 },
            public: false,
        }
    }

    /// A prefix route for large bodies: no total timeout, no retries (nothing is buffered).
    pub fn streaming(prefix: &str, upstream: &str) -> Self {
        Self {
            prefix: prefix.into(),
            upstream: upstream.into(),
            rewrite_prefix: None,
            timeout: None,
            retry: Retry::Never,
            public: false,
        }
    }

    /// Skip the listener's auth filter on this route.
    pub fn public(mut self) -> Self {
        self.public = true;
        self
    }

    pub fn with_rewrite(mut self, to: &str) -> Self {
        self.rewrite_prefix = Some(to.into());
        self
    }
}

impl Listener {
    /// A plain HTTP listener with no routes, no auth and a 5 minute stream idle timeout.
    pub fn http(name: &str, address: &str, port: u16) -> Self {
        Self {
            name: name.into(),
            address: address.into(),
            port,
            tls_secret: None,
            auth: None,
            routing: None,
            routes: Vec::new(),
            stream_idle_timeout: Duration::from_secs(300),
        }
    }
}
