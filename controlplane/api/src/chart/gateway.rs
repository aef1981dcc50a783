//! `nsight-gateway` values: the chart's NsightGateway, with the guide's inline secrets (API
//! key, OAuth2 client secret and HMAC) turned into chart-managed Secrets so that no secret sits
//! in a custom resource.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::NameRef;
use crate::SecretRef;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayValues {
    pub enabled: bool,
    /// The HTTP(S) port of the gateway (the storage proxy is 9000).
    pub port: u16,
    pub service: GatewayService,
    /// A `kubernetes.io/tls` Secret (`tls.crt`, `tls.key`, optional `ca.crt`): HTTPS.
    pub tls_secret_ref: Option<NameRef>,
    pub authentication: GatewayAuthentication,
    pub routing: GatewayRouting,
    pub resources: Option<ResourceRequirements>,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayService {
    #[serde(rename = "type")]
    pub type_: ServiceType,
    pub annotations: BTreeMap<String, String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ServiceType {
    ClusterIP,
    NodePort,
    LoadBalancer,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayAuthentication {
    pub apikey: GatewayApiKey,
    pub jwt: GatewayJwt,
    pub oauth2: GatewayOAuth2,
}

/// One shared key; inline (`key`, kept in the chart's Secret `<release>-gateway-apikey`) or
/// from the admin's Secret (`keySecretRef`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayApiKey {
    pub enabled: bool,
    pub key: String,
    pub key_secret_ref: Option<SecretRef>,
}

/// Bearer tokens checked against a JWKS, inline or from a Secret (`jwks` key).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayJwt {
    pub enabled: bool,
    pub issuer: String,
    pub audiences: Vec<String>,
    pub verification_jwks: String,
    pub jwks_secret_ref: Option<SecretRef>,
}

/// The authorization-code flow at an OpenID provider. `clientSecret` and `hmac` inline make
/// the chart's Secret `<release>-gateway-oauth2` (`client_secret.key`, `hmac.key`); else
/// `clientSecretRef` names the admin's Secret with those keys.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayOAuth2 {
    pub enabled: bool,
    pub issuer: String,
    pub client_id: String,
    pub client_secret: String,
    pub hmac: String,
    pub client_secret_ref: Option<NameRef>,
    pub scopes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayRouting {
    #[schemars(regex(pattern = r"^/.*/$"))]
    pub coordinator_prefix: String,
    #[schemars(regex(pattern = r"^/.*/$"))]
    pub analysis_prefix: String,
}
