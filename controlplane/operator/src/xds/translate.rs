//! NsightGateway (+ the same-namespace Services it routes to, + the Secrets it references) ->
//! the gateway crate's IR and the conditions that explain it.
//!
//! ```text
//!  :<spec.port|8888>  coordinatorPrefix -> coordinator   (API routes; analysis 300 s)
//!                     analysisPrefix    -> analysis
//!                     tenantPrefix      -> tenant
//!                     /streamers/<n>/   -> streamer <n>  (each NsightStreamer; rewritten to /)
//!                     /                 -> cloud-ui      (public: no auth)
//!                     auth filter: apikey | jwt (+ apikey) | oauth2 (+ apikey) | none;
//!                     HTTPS from tlsSecretRef
//!  :9000              /                 -> storage       (streaming, no auth: S3 SigV4;
//!                                                        TLS with the API's certificate)
//!  upstream oauth2-idp-<host>-<port>: the OAuth2 issuer over TLS (see `oauth2`)
//!  spec.tenants: /t/<namespace>/... -> the routing filter -> tenant-<namespace>-<backend>
//!                (see `tenants`)
//! ```
//! Upstreams are the Services the operator labelled (`managed-by=nsight-operator`) by their
//! `app.kubernetes.io/component`, reached at `<name>.<namespace>.svc.<cluster domain>` (or an
//! `ExternalName`'s name) on the Service port named `http`/`s3` (else the first). Any invalid
//! input gives no IR (the caller keeps the last good snapshot) and a `False` condition saying
//! what to fix. Pure: Secrets, Services and the clock come in as arguments.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use k8s_openapi::api::core::v1::{Secret, Service};
use kube::ResourceExt;
use nsight_api::NsightGateway;
use nsight_contracts::{gateway_only::GatewayToken, routes};
use nsight_gateway::{
    auth::{ApiKey, AuthPolicy, Jwks, JwtPolicy},
    ir::{GatewayIr, Listener, Route, TlsSecret, Upstream, GATEWAY_PORT, STORAGE_PROXY_PORT},
    local::names,
};

use super::{
    oauth2, secrets,
    tenants::{self, Prefixes, TenantInputs},
};
use crate::{
    conditions::Cond,
    render::{Component, LABEL_COMPONENT, LABEL_INSTANCE, LABEL_MANAGED_BY, MANAGER},
};

/// Condition types this translation sets on an NsightGateway.
pub const CONDITION_TLS: &str = "TLSSecretValid";
pub const CONDITION_AUTH: &str = "AuthConfigValid";
/// The key of the JWKS in `jwt.jwksSecretRef` when `key` is not given.
pub const DEFAULT_JWKS_KEY: &str = "jwks.json";
/// The keys of the OAuth2 client Secret (user guide).
pub const OAUTH2_KEYS: [&str; 2] = ["client_secret.key", "hmac.key"];

/// The auth filter without its response hook, beside the full one (`--auth-wasm-path`'s
/// directory): Envoy loads it for API-key and JWT listeners, which decide on the request
/// alone, and so enters the Wasm VM one time fewer per request (docs/auth.md).
pub const LEAN_AUTH_WASM: &str = "nsight_auth_filter_lean.wasm";

/// Cluster-wide choices (flags of `nsight-operator manager`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdsSettings {
    /// Where the gateway's Envoy finds the auth filter's `.wasm` (inside its container).
    pub wasm_path: PathBuf,
    /// The DNS suffix of Services (`cluster.local`).
    pub cluster_domain: String,
    /// The address Envoy's listeners bind.
    pub listen_address: String,
    /// Namespaces whose NsightGateways may route other namespaces (`spec.tenants`); a gateway
    /// elsewhere may list only its own namespace.
    pub shared_gateway_namespaces: Vec<String>,
}

impl Default for XdsSettings {
    fn default() -> Self {
        Self {
            wasm_path: "/etc/envoy/wasm/nsight_auth_filter.wasm".into(),
            cluster_domain: "cluster.local".into(),
            listen_address: "0.0.0.0".into(),
            shared_gateway_namespaces: vec!["nsight-operator".into()],
        }
    }
}

/// What one gateway's translation reads.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    pub gateway: &'a NsightGateway,
    /// Services of the gateway's namespace (others are ignored).
    pub services: &'a [Service],
    /// The referenced Secrets that exist, by name.
    pub secrets: &'a BTreeMap<String, Secret>,
    /// The gateway tokens of the Services it may route to (`render::gateway_token`).
    pub gateway_tokens: &'a GatewayTokens,
    /// Unix seconds.
    pub now: i64,
}

/// Gateway tokens by `(namespace, Service name)`: what the gateway sends each of our services.
pub type GatewayTokens = BTreeMap<(String, String), GatewayToken>;

/// The roles whose services require the gateway's token (not the UI: public static files; not
/// storage: S3 signatures; neither must learn it).
pub fn needs_gateway_token(role: Role) -> bool {
    matches!(role, Role::Coordinator | Role::Analysis | Role::Tenant)
}

/// The upstream of `svc` (of `role`, in `ns`), carrying its gateway token when it needs one.
pub(super) fn upstream_of(
    name: &str,
    svc: &Service,
    ns: &str,
    role: Role,
    tokens: &GatewayTokens,
    settings: &XdsSettings,
) -> Option<Upstream> {
    let (host, port) = endpoint(svc, ns, settings)?;
    let mut upstream = Upstream::new(name, &host, port);
    if needs_gateway_token(role) {
        upstream.gateway_token = tokens.get(&(ns.to_owned(), svc.name_any())).cloned();
    }
    Some(upstream)
}

/// The IR when every input is valid (else why not), and the conditions in every case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translation {
    pub ir: Result<GatewayIr, String>,
    pub conditions: Vec<Cond>,
}

/// The Secret names an NsightGateway references (to read and to watch).
pub fn referenced_secrets(gw: &NsightGateway) -> Vec<String> {
    let s = &gw.spec;
    let auth = s.authentication.as_ref();
    let mut names: Vec<String> = [
        s.tls_secret_ref.as_ref(),
        auth.and_then(|a| a.apikey.as_ref())
            .and_then(|k| k.key_secret_ref.as_ref()),
        auth.and_then(|a| a.jwt.as_ref())
            .and_then(|j| j.jwks_secret_ref.as_ref()),
        auth.and_then(|a| a.oauth2.as_ref())
            .and_then(|o| o.client_secret_ref.as_ref()),
    ]
    .into_iter()
    .flatten()
    .map(|r| r.name.clone())
    .collect();
    names.sort();
    names.dedup();
    names
}

/// What a discovered Service is to the gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Coordinator,
    Analysis,
    Tenant,
    Ui,
    Storage,
}

impl Role {
    /// The role of an operator-labelled Service, by its `app.kubernetes.io/component`.
    pub fn of(component: &str) -> Option<Self> {
        Some(match component {
            "coordinator" => Role::Coordinator,
            "analysis" => Role::Analysis,
            "tenant" | "tenant-operator" => Role::Tenant,
            "cloud-ui" => Role::Ui,
            "storage" | "minio" => Role::Storage,
            _ => return None,
        })
    }

    pub(super) fn upstream(self) -> &'static str {
        match self {
            Role::Coordinator => names::COORDINATOR,
            Role::Analysis => names::ANALYSIS,
            Role::Tenant => names::TENANT,
            Role::Ui => names::UI,
            Role::Storage => names::STORAGE,
        }
    }
}

/// The first (by name) operator-labelled Service of `role` in `namespace`; for storage, the
/// one of `cloudStorageRef` when set.
pub(super) fn discover<'a>(
    services: &'a [Service],
    namespace: &str,
    role: Role,
    storage_ref: Option<&str>,
) -> Option<&'a Service> {
    let mut found: Vec<&Service> = services
        .iter()
        .filter(|s| s.namespace().as_deref() == Some(namespace))
        .filter(|s| s.labels().get(LABEL_MANAGED_BY).map(String::as_str) == Some(MANAGER))
        .filter(|s| s.labels().get(LABEL_COMPONENT).and_then(|c| Role::of(c)) == Some(role))
        .filter(|s| match (role, storage_ref) {
            (Role::Storage, Some(r)) => {
                s.labels().get(LABEL_INSTANCE).map(String::as_str) == Some(r)
            }
            _ => true,
        })
        .collect();
    found.sort_by_key(|s| s.name_any());
    found.into_iter().next()
}

/// The operator's streamer Services of `namespace`, by name.
fn streamers<'a>(services: &'a [Service], namespace: &str) -> Vec<&'a Service> {
    let mut found: Vec<&Service> = services
        .iter()
        .filter(|s| s.namespace().as_deref() == Some(namespace))
        .filter(|s| s.labels().get(LABEL_MANAGED_BY).map(String::as_str) == Some(MANAGER))
        .filter(|s| {
            s.labels().get(LABEL_COMPONENT).map(String::as_str) == Some(Component::Streamer.label())
        })
        .collect();
    found.sort_by_key(|s| s.name_any());
    found
}

/// `host:port` of a Service as Envoy reaches it.
pub(super) fn endpoint(
    svc: &Service,
    namespace: &str,
    settings: &XdsSettings,
) -> Option<(String, u16)> {
    let spec = svc.spec.as_ref()?;
    let ports = spec.ports.as_deref().unwrap_or_default();
    let port = ports
        .iter()
        .find(|p| matches!(p.name.as_deref(), Some("http" | "s3")))
        .or_else(|| ports.first())?;
    let port = u16::try_from(port.port).ok()?;
    let host = match (spec.type_.as_deref(), spec.external_name.as_deref()) {
        (Some("ExternalName"), Some(name)) => name.to_owned(),
        _ => format!(
            "{}.{namespace}.svc.{}",
            svc.name_any(),
            settings.cluster_domain
        ),
    };
    Some((host, port))
}

pub(super) fn ok(type_: &'static str, reason: &'static str, message: impl Into<String>) -> Cond {
    Cond {
        type_,
        status: true,
        reason,
        message: message.into(),
    }
}

pub(super) fn bad(type_: &'static str, reason: &'static str, message: impl Into<String>) -> Cond {
    Cond {
        type_,
        status: false,
        reason,
        message: message.into(),
    }
}

/// TLS: `Ok(None)` plain HTTP, `Ok(Some)` a valid pair.
fn tls(inputs: &Inputs<'_>, ns: &str) -> (Option<secrets::ValidTls>, Cond) {
    let Some(r) = &inputs.gateway.spec.tls_secret_ref else {
        return (
            None,
            ok(
                CONDITION_TLS,
                "NotConfigured",
                "spec.tlsSecretRef is not set: the gateway serves plain HTTP",
            ),
        );
    };
    match secrets::tls(ns, &r.name, inputs.secrets.get(&r.name), inputs.now) {
        Ok(valid) => {
            let until = chrono_like(valid.not_after);
            (
                Some(valid),
                ok(
                    CONDITION_TLS,
                    "Valid",
                    format!(
                        "Secret {ns}/{}: certificate and key match, valid until {until}",
                        r.name
                    ),
                ),
            )
        }
        Err(message) => (None, bad(CONDITION_TLS, "Invalid", message)),
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` of Unix seconds (no date crate needed for one format).
fn chrono_like(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    // Civil-from-days (H. Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// The API keys of `spec.authentication.apikey` (empty when disabled).
fn api_keys(inputs: &Inputs<'_>, ns: &str) -> Result<Vec<ApiKey>, Cond> {
    let Some(k) = inputs
        .gateway
        .spec
        .authentication
        .as_ref()
        .and_then(|a| a.apikey.as_ref())
        .filter(|k| k.enabled)
    else {
        return Ok(Vec::new());
    };
    let invalid = |m: String| bad(CONDITION_AUTH, "ApiKeyInvalid", m);
    let keys = |key: String| vec![ApiKey::new(key)];
    match (&k.key_secret_ref, &k.key) {
        (Some(r), _) => {
            let key = r.key.as_deref().unwrap_or(secrets::DEFAULT_API_KEY_KEY);
            secrets::api_key(ns, &r.name, key, inputs.secrets.get(&r.name))
                .map(keys)
                .map_err(invalid)
        }
        (None, Some(inline)) => secrets::check_api_key(
            "spec.authentication.apikey",
            "key",
            inline.trim(),
        )
        .map(|()| keys(inline.trim().to_owned()))
        .map_err(invalid),
        (None, None) => Err(invalid(
            "spec.authentication.apikey is enabled without a key: set keySecretRef (a Secret holding the key) or key".into(),
        )),
    }
}

fn jwt_policy(inputs: &Inputs<'_>, ns: &str) -> Result<Option<JwtPolicy>, Cond> {
    let Some(j) = inputs
        .gateway
        .spec
        .authentication
        .as_ref()
        .and_then(|a| a.jwt.as_ref())
        .filter(|j| j.enabled)
    else {
        return Ok(None);
    };
    let invalid = |m: String| bad(CONDITION_AUTH, "JwtInvalid", m);
    let issuer = j.issuer.clone().filter(|i| !i.is_empty()).ok_or_else(|| {
        invalid("spec.authentication.jwt.issuer is not set: tokens' `iss` must equal it".into())
    })?;
    if j.audiences.iter().all(String::is_empty) {
        return Err(invalid(
            "spec.authentication.jwt.audiences is empty: list the `aud` values to accept (e.g. nsight-cloud)".into(),
        ));
    }
    let (text, from) = match (&j.verification_jwks, &j.jwks_secret_ref) {
        (Some(inline), _) => (inline.clone(), "spec.authentication.jwt.verificationJwks".to_owned()),
        (None, Some(r)) => {
            let key = r.key.as_deref().unwrap_or(DEFAULT_JWKS_KEY);
            let what = format!("Secret {ns}/{} (spec.authentication.jwt.jwksSecretRef)", r.name);
            let secret = inputs.secrets.get(&r.name).ok_or_else(|| {
                invalid(format!("{what} does not exist; create it with the JWKS under `{key}`"))
            })?;
            let bytes = secrets::value(secret, key).ok_or_else(|| {
                invalid(format!("{what} has no key `{key}`; put the JWKS there or set jwksSecretRef.key"))
            })?;
            (String::from_utf8_lossy(bytes).into_owned(), format!("{what} `{key}`"))
        }
        (None, None) => {
            return Err(invalid(
                "spec.authentication.jwt has no keys: set verificationJwks (a JWKS document) or jwksSecretRef".into(),
            ))
        }
    };
    let doc: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| invalid(format!("{from} is not JSON: {e}")))?;
    if doc["keys"].as_array().is_none_or(Vec::is_empty) {
        return Err(invalid(format!(
            "{from} is not a JWKS with keys: expected {{\"keys\": [{{\"kty\": ...}}]}}"
        )));
    }
    Ok(Some(JwtPolicy {
        issuer,
        audiences: j
            .audiences
            .iter()
            .filter(|a| !a.is_empty())
            .cloned()
            .collect(),
        jwks: Jwks::Inline(doc),
        identity_claim: j.identity_claim.clone().filter(|c| !c.is_empty()),
    }))
}

/// The auth policy, its condition, and the upstreams it needs (the OAuth2 issuer).
fn auth(
    inputs: &Inputs<'_>,
    ns: &str,
    tls: Option<&secrets::ValidTls>,
) -> Result<(AuthPolicy, Cond, Vec<Upstream>), Cond> {
    let oauth2 = oauth2::setup(inputs, ns, tls)?;
    let keys = api_keys(inputs, ns)?;
    let jwt = jwt_policy(inputs, ns)?;
    let or_keys = if keys.is_empty() { "" } else { " or API key" };
    if let Some(mut setup) = oauth2 {
        if let Some(jwt) = jwt {
            // The filter's OAuth2 mode verifies bearer tokens of its own issuer; a JWT section of
            // the same issuer adds its audiences, another issuer cannot be served beside it.
            if jwt.issuer.trim_end_matches('/') != setup.policy.issuer.trim_end_matches('/') {
                return Err(bad(
                    CONDITION_AUTH,
                    "JwtWithOAuth2Unsupported",
                    format!(
                        "spec.authentication.jwt (issuer {}) and oauth2 (issuer {}) name different issuers; the gateway verifies bearer tokens of the OAuth2 issuer only: disable jwt or use the same issuer",
                        jwt.issuer, setup.policy.issuer
                    ),
                ));
            }
            for aud in jwt.audiences {
                if !setup.policy.audiences.contains(&aud) {
                    setup.policy.audiences.push(aud);
                }
            }
        }
        let message = format!(
            "OAuth2 (issuer {}, client {}, callback {}){or_keys}",
            setup.policy.issuer, setup.policy.client_id, setup.policy.redirect_uri
        );
        return Ok((
            AuthPolicy::OAuth2 {
                policy: setup.policy,
                api_keys: keys,
            },
            ok(CONDITION_AUTH, "OAuth2", message),
            vec![setup.idp],
        ));
    }
    Ok(match (jwt, keys.is_empty()) {
        (Some(policy), _) => {
            let message = format!("JWT (issuer {}){or_keys}", policy.issuer);
            (AuthPolicy::Jwt { policy, api_keys: keys }, ok(CONDITION_AUTH, "Jwt", message), Vec::new())
        }
        (None, false) => (AuthPolicy::ApiKeys(keys), ok(CONDITION_AUTH, "ApiKey", "API key (Authorization: Bearer <key>)"), Vec::new()),
        (None, true) => (
            AuthPolicy::Unauthenticated,
            ok(CONDITION_AUTH, "Unauthenticated", "no authentication is enabled: anyone who reaches the gateway can use it (development only)"),
            Vec::new(),
        ),
    })
}

/// The API keys of an auth policy (none for an open gateway).
fn keys_mut(policy: &mut AuthPolicy) -> Option<&mut Vec<ApiKey>> {
    match policy {
        AuthPolicy::Unauthenticated => None,
        AuthPolicy::ApiKeys(keys)
        | AuthPolicy::Jwt { api_keys: keys, .. }
        | AuthPolicy::OAuth2 { api_keys: keys, .. } => Some(keys),
    }
}

/// The gateway's IR and conditions, for a gateway without `spec.tenants` (or whose tenants
/// have no backend).
pub fn translate(inputs: &Inputs<'_>, settings: &XdsSettings) -> Translation {
    let (namespaces, secrets) = (BTreeMap::new(), BTreeMap::new());
    let none = TenantInputs {
        namespaces: &namespaces,
        services: &[],
        api_key_secrets: &secrets,
        gateway_tokens: inputs.gateway_tokens,
    };
    translate_with_tenants(inputs, &none, settings)
}

/// The prefixes the backends serve their APIs under (besides `/v1`).
const DEFAULT_COORDINATOR_PREFIX: &str = "/coordinator/";
const DEFAULT_ANALYSIS_PREFIX: &str = "/analysis/";
const DEFAULT_TENANT_PREFIX: &str = "/tenant/";

/// The route of one API: a custom prefix (`spec.routing.*Prefix`) is rewritten to the default
/// one the backend serves under, so `/c/v1/status` reaches the coordinator as
/// `/coordinator/v1/status` instead of a 404 there.
fn api_route(prefix: &str, default: &str, upstream: &str) -> Route {
    let route = Route::api(prefix, upstream);
    if prefix == default {
        return route;
    }
    // Keep the slash the matched prefix ate, and no more.
    let to = if prefix.ends_with('/') {
        default
    } else {
        default.trim_end_matches('/')
    };
    route.with_rewrite(to)
}

/// The gateway's IR and conditions, with what its tenants (`spec.tenants`) need.
pub fn translate_with_tenants(
    inputs: &Inputs<'_>,
    tenant_inputs: &TenantInputs<'_>,
    settings: &XdsSettings,
) -> Translation {
    let gw = inputs.gateway;
    let ns = gw.namespace().unwrap_or_default();
    let (valid_tls, tls_cond) = tls(inputs, &ns);
    let auth = auth(inputs, &ns, valid_tls.as_ref());
    let auth_cond = match &auth {
        Ok((_, c, _)) | Err(c) => c.clone(),
    };
    let mut conditions = vec![auth_cond, tls_cond.clone()];
    let (Ok((mut policy, _, auth_upstreams)), true) = (auth, tls_cond.status) else {
        let failed: Vec<&str> = conditions
            .iter()
            .filter(|c| !c.status)
            .map(|c| c.type_)
            .collect();
        return Translation {
            ir: Err(format!("see condition {}", failed.join(", "))),
            conditions,
        };
    };

    let routing = gw.spec.routing.clone().unwrap_or_default();
    let prefix =
        |p: Option<String>, d: &str| p.filter(|p| !p.is_empty()).unwrap_or_else(|| d.into());
    let prefixes = Prefixes {
        coordinator: prefix(routing.coordinator_prefix, DEFAULT_COORDINATOR_PREFIX),
        analysis: prefix(routing.analysis_prefix, DEFAULT_ANALYSIS_PREFIX),
        tenant: prefix(routing.tenant_prefix, DEFAULT_TENANT_PREFIX),
    };
    let storage_ref = gw.spec.cloud_storage_ref.as_deref();
    let mut upstreams = Vec::new();
    let mut add = |role: Role| -> bool {
        let found = discover(inputs.services, &ns, role, storage_ref).and_then(|svc| {
            upstream_of(
                role.upstream(),
                svc,
                &ns,
                role,
                inputs.gateway_tokens,
                settings,
            )
        });
        let present = found.is_some();
        upstreams.extend(found);
        present
    };
    let mut listener = Listener::http(
        names::GATEWAY_LISTENER,
        &settings.listen_address,
        gw.spec.port.unwrap_or(GATEWAY_PORT),
    );
    if add(Role::Coordinator) {
        listener.routes.push(api_route(
            &prefixes.coordinator,
            DEFAULT_COORDINATOR_PREFIX,
            names::COORDINATOR,
        ));
    }
    if add(Role::Analysis) {
        let mut route = api_route(&prefixes.analysis, DEFAULT_ANALYSIS_PREFIX, names::ANALYSIS);
        route.timeout = Some(Duration::from_secs(300));
        listener.routes.push(route);
    }
    if add(Role::Tenant) {
        listener.routes.push(api_route(
            &prefixes.tenant,
            DEFAULT_TENANT_PREFIX,
            names::TENANT,
        ));
    }
    // Each streamer of the namespace at `/streamers/<name>/` (authenticated, no time limit: a
    // GUI session), so a browser outside the cluster reaches it through the gateway.
    let mut streamer_upstreams = Vec::new();
    for svc in streamers(inputs.services, &ns) {
        let name = svc.name_any();
        if let Some((host, port)) = endpoint(svc, &ns, settings) {
            let upstream = format!("streamer-{name}");
            streamer_upstreams.push(Upstream::new(&upstream, &host, port));
            listener.routes.push(
                Route::streaming(&format!("{}{name}/", routes::STREAMERS), &upstream)
                    .with_rewrite("/"),
            );
        }
    }
    // Longer prefixes first; `/` (the UI) last.
    listener
        .routes
        .sort_by_key(|r| std::cmp::Reverse(r.prefix.len()));
    if add(Role::Ui) {
        listener.routes.push(Route::api("/", names::UI).public());
    }
    let mut tenant_upstreams = Vec::new();
    if let Some(spec) = &gw.spec.tenants {
        let plan = match keys_mut(&mut policy) {
            None => Err(bad(
                tenants::CONDITION_TENANTS,
                "AuthenticationRequired",
                "spec.tenants needs authentication (apikey, jwt or oauth2): tenants are told apart by the caller's identity",
            )),
            Some(own) => tenants::plan(gw, spec, tenant_inputs, &prefixes, own, settings),
        };
        match plan {
            Ok(plan) => {
                conditions.push(plan.condition);
                if let Some(keys) = keys_mut(&mut policy) {
                    keys.extend(plan.api_keys);
                }
                listener.routing = plan.routing;
                tenant_upstreams = plan.upstreams;
            }
            Err(cond) => {
                conditions.push(cond);
                return Translation {
                    ir: Err(format!("see condition {}", tenants::CONDITION_TENANTS)),
                    conditions,
                };
            }
        }
    }
    if !matches!(policy, AuthPolicy::Unauthenticated) {
        listener.auth = Some(
            policy
                .filter(&settings.wasm_path)
                .with_lean_module(settings.wasm_path.with_file_name(LEAN_AUTH_WASM)),
        );
    }
    let mut secrets = Vec::new();
    if let Some(valid) = valid_tls {
        listener.tls_secret = Some(names::TLS_SECRET.into());
        secrets.push(TlsSecret {
            name: names::TLS_SECRET.into(),
            cert_chain_pem: valid.cert_chain_pem,
            private_key_pem: valid.private_key_pem,
        });
    }
    let mut listeners = vec![listener];
    if add(Role::Storage) {
        let mut proxy = Listener::http(
            names::STORAGE_LISTENER,
            &settings.listen_address,
            STORAGE_PROXY_PORT,
        );
        proxy.routes.push(Route::streaming("/", names::STORAGE));
        // Storage traffic is encrypted in transit like the API's: same certificate.
        proxy.tls_secret = listeners[0].tls_secret.clone();
        listeners.push(proxy);
    }
    upstreams.extend(streamer_upstreams);
    upstreams.extend(tenant_upstreams);
    upstreams.extend(auth_upstreams);
    let ir = GatewayIr {
        listeners,
        upstreams,
        secrets,
    };
    Translation {
        ir: ir
            .validate()
            .map(|()| ir)
            .map_err(|e| format!("{e}; fix spec.routing or spec.port")),
        conditions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(chrono_like(0), "1970-01-01T00:00:00Z");
        assert_eq!(chrono_like(1_735_689_600), "2025-01-01T00:00:00Z");
        assert_eq!(chrono_like(951_825_599), "2000-02-29T11:59:59Z");
    }
}
