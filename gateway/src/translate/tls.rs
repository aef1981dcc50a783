//! The downstream TLS context of an HTTPS listener, certificate by SDS name.
//!
//! xds-api lacks `envoy/extensions/transport_sockets/tls/v3/tls.proto`, so the two messages
//! needed are declared here with `prost` (field numbers from that file); `SdsSecretConfig`
//! comes from xds-api.

use xds_api::pb::envoy::{
    config::core::v3::{transport_socket, TransportSocket},
    extensions::transport_sockets::tls::v3::SdsSecretConfig,
};

use super::ads_source;
use crate::resources::any;

/// `envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext` (the fields we set).
#[derive(Clone, PartialEq, prost::Message)]
pub struct DownstreamTlsContext {
    #[prost(message, optional, tag = "1")]
    pub common_tls_context: Option<CommonTlsContext>,
}

impl prost::Name for DownstreamTlsContext {
    const NAME: &'static str = "DownstreamTlsContext";
    const PACKAGE: &'static str = "envoy.extensions.transport_sockets.tls.v3";
}

/// `envoy.extensions.transport_sockets.tls.v3.CommonTlsContext` (the fields we set).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CommonTlsContext {
    #[prost(string, repeated, tag = "4")]
    pub alpn_protocols: Vec<String>,
    #[prost(message, repeated, tag = "6")]
    pub tls_certificate_sds_secret_configs: Vec<SdsSecretConfig>,
}

impl prost::Name for CommonTlsContext {
    const NAME: &'static str = "CommonTlsContext";
    const PACKAGE: &'static str = "envoy.extensions.transport_sockets.tls.v3";
}

/// The TLS transport socket serving the certificate of SDS secret `secret` (HTTP/2 and
/// HTTP/1.1 offered by ALPN).
pub(super) fn downstream_tls(secret: &str) -> TransportSocket {
    let context = DownstreamTlsContext {
        common_tls_context: Some(CommonTlsContext {
            alpn_protocols: vec!["h2".into(), "http/1.1".into()],
            tls_certificate_sds_secret_configs: vec![SdsSecretConfig {
                name: secret.into(),
                sds_config: Some(ads_source()),
            }],
        }),
    };
    TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&context))),
    }
}
