//! The TLS contexts: downstream (an HTTPS listener, certificate by SDS name) and upstream (a
//! cluster reaching an HTTPS service: SNI, trusted CAs, the server name checked).
//!
//! xds-api lacks `envoy/extensions/transport_sockets/tls/v3/tls.proto`, so the messages
//! needed are declared here with `prost` (field numbers from that file); `SdsSecretConfig`
//! and `CertificateValidationContext` come from xds-api.

use xds_api::pb::envoy::{
    config::core::v3::{data_source::Specifier, transport_socket, DataSource, TransportSocket},
    extensions::transport_sockets::tls::v3::{
        subject_alt_name_matcher::SanType, CertificateValidationContext, SdsSecretConfig,
        SubjectAltNameMatcher,
    },
    r#type::matcher::v3::{string_matcher::MatchPattern, StringMatcher},
};

use super::ads_source;
use crate::{
    ir::{CaTrust, UpstreamTls, SYSTEM_CA_BUNDLE},
    resources::any,
};

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

/// `envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext` (the fields we set).
#[derive(Clone, PartialEq, prost::Message)]
pub struct UpstreamTlsContext {
    #[prost(message, optional, tag = "1")]
    pub common_tls_context: Option<CommonTlsContext>,
    #[prost(string, tag = "2")]
    pub sni: String,
}

impl prost::Name for UpstreamTlsContext {
    const NAME: &'static str = "UpstreamTlsContext";
    const PACKAGE: &'static str = "envoy.extensions.transport_sockets.tls.v3";
}

/// `envoy.extensions.transport_sockets.tls.v3.CommonTlsContext` (the fields we set).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CommonTlsContext {
    /// Member of the `validation_context_type` oneof; the only one we set.
    #[prost(message, optional, tag = "3")]
    pub validation_context: Option<CertificateValidationContext>,
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
            validation_context: None,
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

/// The TLS transport socket of a cluster: SNI `tls.sni`, the peer's chain checked against the
/// trusted CAs and its DNS names against the SNI (Envoy checks no name unless told to).
/// HTTP/1.1 is used inside (no ALPN offered): what `dispatch_http_call` needs.
pub(super) fn upstream_tls(tls: &UpstreamTls) -> TransportSocket {
    let trusted_ca = match &tls.trust {
        CaTrust::System => Specifier::Filename(SYSTEM_CA_BUNDLE.into()),
        CaTrust::Pem(pem) => Specifier::InlineString(pem.clone()),
    };
    let context = UpstreamTlsContext {
        common_tls_context: Some(CommonTlsContext {
            validation_context: Some(CertificateValidationContext {
                trusted_ca: Some(DataSource {
                    specifier: Some(trusted_ca),
                    ..Default::default()
                }),
                match_typed_subject_alt_names: vec![SubjectAltNameMatcher {
                    san_type: SanType::Dns as i32,
                    matcher: Some(StringMatcher {
                        match_pattern: Some(MatchPattern::Exact(tls.sni.clone())),
                        ..Default::default()
                    }),
                }],
                ..Default::default()
            }),
            alpn_protocols: Vec::new(),
            tls_certificate_sds_secret_configs: Vec::new(),
        }),
        sni: tls.sni.clone(),
    };
    TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&context))),
    }
}
