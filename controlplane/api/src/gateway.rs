//! `NsightGateway` (`nvidia.com/v1alpha1`): the Envoy gateway in front of the coordinator,
//! analysis, tenant API, UI (port 8888) and the storage proxy (9000): TLS, authentication,
//! routing prefixes.
//!
//! The CRD rejects OAuth2 without TLS (a CEL rule): browsers drop secure cookies over HTTP.
//! `spec.tenants` shares one gateway among several namespaces (multi-tenant mode): a CEL rule
//! requires authentication with it (tenants are told apart by the caller's identity), another
//! one namespace list or selector.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::common::{NsightStatus, SecretRef, ServiceSpec};

/// The gateway of one namespace.
#[derive(CustomResource, KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "nvidia.com",
    version = "v1alpha1",
    kind = "NsightGateway",
    namespaced,
    status = "NsightStatus",
    shortname = "nsightgw",
    category = "nsight",
    printcolumn = r#"{"name":"Port","type":"integer","jsonPath":".spec.port"}"#,
    printcolumn = r#"{"name":"TLS","type":"string","jsonPath":".spec.tlsSecretRef.name"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[x_kube(validation = Rule::new(
    "!has(self.authentication) || !has(self.authentication.oauth2) || !has(self.authentication.oauth2.enabled) || !self.authentication.oauth2.enabled || has(self.tlsSecretRef)"
).message("OAuth2 requires TLS on the gateway: set spec.tlsSecretRef"))]
#[x_kube(validation = Rule::new(
    "!has(self.tenants) || (has(self.authentication) && ((has(self.authentication.apikey) && has(self.authentication.apikey.enabled) && self.authentication.apikey.enabled) || (has(self.authentication.jwt) && has(self.authentication.jwt.enabled) && self.authentication.jwt.enabled) || (has(self.authentication.oauth2) && has(self.authentication.oauth2.enabled) && self.authentication.oauth2.enabled)))"
).message("spec.tenants needs authentication: enable spec.authentication.apikey, jwt or oauth2 (tenants are told apart by the caller's identity)"))]
#[serde(rename_all = "camelCase")]
pub struct NsightGatewaySpec {
    /// HTTP(S) listener port (default 8888).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceSpec>,
    /// A `kubernetes.io/tls` Secret (`tls.crt`, `tls.key`, optional `ca.crt`): HTTPS on the port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_secret_ref: Option<SecretRef>,
    /// No section enabled: the gateway is open (development only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<Authentication>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
    /// Name of an `NsightCloudStorageConfig`; with MinIO enabled the gateway proxies it on 9000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_storage_ref: Option<String>,
    /// Multi-tenant mode: the gateway also routes `/t/<namespace>/...` to the coordinator and
    /// analysis of other namespaces, each reachable only by its own callers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenants: Option<Tenants>,
}

/// The namespaces a shared gateway serves (those listed plus those selected) and who may reach
/// each. A tenant's backends are the Services the operator rendered for its NsightCoordinator
/// and NsightAnalysis (and NsightTenantOperator); a request `<pathPrefix><namespace>/<rest>`
/// reaches them as `/<rest>` (e.g. `/t/team-a/coordinator/v1/...`). Callers of another
/// namespace get 403.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[x_kube(validation = Rule::new(
    "(has(self.namespaces) && size(self.namespaces) > 0) || has(self.namespaceSelector)"
).message("spec.tenants names no namespace: list them in namespaces or select them with namespaceSelector"))]
#[serde(rename_all = "camelCase")]
pub struct Tenants {
    /// Tenant namespaces by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 1024),
        inner(length(min = 1, max = 63), pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))
    )]
    pub namespaces: Vec<String>,
    /// Tenant namespaces by their labels (an empty selector selects every namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Where requests name their tenant (default `/t/`): `<pathPrefix><namespace>/...`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), pattern(r"^(/[^/?#\s]+)+/$"))]
    pub path_prefix: Option<String>,
    /// Callers whose identity (the JWT/OAuth2 `identityClaim`, default `sub`; each value of a
    /// list claim) equals a tenant's namespace reach that tenant (e.g. a `namespace` claim, or
    /// groups named after namespaces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_is_namespace: Option<bool>,
    /// Per tenant namespace, the identities (values of the identity claim) that may reach it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "identities_schema")]
    pub identities: BTreeMap<String, Vec<String>>,
    /// A Secret looked up in each tenant namespace (key default `api-key`): that tenant's API
    /// key, which reaches only its own namespace (accepted beside the gateway's other modes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_secret_ref: Option<SecretRef>,
}

/// API key, JWT and OAuth2; JWT and OAuth2 may be enabled together.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Authentication {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apikey: Option<ApiKeyAuth>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<JwtAuth>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth2: Option<OAuth2Auth>,
}

/// A shared secret sent as `Authorization: Bearer <key>`.
#[derive(KubeSchema, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyAuth {
    #[serde(default)]
    pub enabled: bool,
    /// Inline key (prefer `keySecretRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_secret_ref: Option<SecretRef>,
}

impl std::fmt::Debug for ApiKeyAuth {
    /// Never prints the inline key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeyAuth")
            .field("enabled", &self.enabled)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .field("key_secret_ref", &self.key_secret_ref)
            .finish()
    }
}

/// Bearer tokens checked against a JWKS (inline or from a Secret).
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JwtAuth {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audiences: Vec<String>,
    /// The JWKS document, inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification_jwks: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_secret_ref: Option<SecretRef>,
    /// The token claim forwarded upstream as the caller's identity (default `sub`); a dotted
    /// path reaches a nested claim (`realm_access.roles`), a list is forwarded comma-separated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_claim: Option<String>,
}

/// OIDC authorization-code flow for browsers, JWKS-validated bearer tokens for the CLI.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuth2Auth {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// A Secret with `client_secret.key` and `hmac.key` (and optionally `ca.crt`: the CA that
    /// signed the issuer's certificate, when not a public one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_ref: Option<SecretRef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The callback registered at the identity provider (default
    /// `https://<first DNS name of the TLS certificate>:<port>/oauth2/callback`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    /// `aud` values accepted in bearer tokens (default: the client id).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audiences: Vec<String>,
    /// As `jwt.identityClaim` (default `sub`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_claim: Option<String>,
}

/// URL prefixes of the backends (defaults `/coordinator/`, `/analysis/`, `/tenant/`).
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Routing {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordinator_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_prefix: Option<String>,
}

/// `tenants.identities`: namespace -> identities, each 1-256 printable ASCII characters without
/// a comma (the routing filter splits list claims on commas).
fn identities_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "maxProperties": 1024,
        "additionalProperties": {
            "type": "array",
            "maxItems": 256,
            "items": {
                "type": "string",
                "minLength": 1,
                "maxLength": 256,
                "pattern": "^[ -+\\--~]+$"
            }
        }
    })
}
