//! The manager's xDS side: NsightGateways (+ their Secrets and the Services they route to)
//! become the gateway crate's IR, published per gateway node on the ADS server Envoy
//! bootstraps against (`--xds-host:--xds-port`, see `render::gateway`); OTLPProxyConfigs
//! become the IR of the OTLP proxy sidecars of mirroring Pods (`otlp_sidecar`).
//!
//! ```text
//! secrets    (pure)  TLS / API-key / CA Secret checks -> actionable condition messages
//! oauth2     (pure)  spec.authentication.oauth2 -> the filter's OAuth2 mode + the issuer's
//!                    TLS upstream
//! tenants    (pure)  spec.tenants + namespaces + tenant Services/Secrets -> the routing
//!                    filter's table, tenant upstreams and API keys, `TenantRoutingValid`
//! translate  (pure)  NsightGateway + Services + Secrets -> GatewayIr | why not, + conditions
//! controller (shell) watches, reads, XdsHandle::set_ir, status
//! otlp_proxies (shell) OTLPProxyConfig -> the sidecars' snapshot, status
//! sweep      (shell) removes the snapshots of deleted gateways and configs
//! ```

pub mod controller;
pub mod oauth2;
pub mod otlp_proxies;
pub mod secrets;
pub mod sweep;
pub mod tenants;
pub mod translate;
