//! The manager's xDS side: NsightGateways (+ their Secrets and the Services they route to)
//! become the gateway crate's IR, published per gateway node on the ADS server Envoy
//! bootstraps against (`--xds-host:--xds-port`, see `render::gateway`).
//!
//! ```text
//! secrets    (pure)  TLS / API-key Secret checks -> actionable condition messages
//! translate  (pure)  NsightGateway + Services + Secrets -> GatewayIr | why not, + conditions
//! controller (shell) watches, reads, XdsHandle::set_ir, status
//! ```

pub mod controller;
pub mod secrets;
pub mod translate;
