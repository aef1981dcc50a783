//! TLS secret -> Envoy SDS `Secret` (certificate chain and key inline, delivered over ADS so
//! no file is mounted into Envoy and a rotated certificate needs no restart).

use xds_api::pb::envoy::{
    config::core::v3::{data_source::Specifier, DataSource},
    extensions::transport_sockets::tls::v3::{secret, Secret, TlsCertificate},
};

use crate::{ir::TlsSecret, resources::Resource};

pub(super) fn secret(s: &TlsSecret) -> Resource {
    let inline = |pem: &str| DataSource {
        specifier: Some(Specifier::InlineString(pem.into())),
        ..Default::default()
    };
    let secret = Secret {
        name: s.name.clone(),
        r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(inline(&s.cert_chain_pem)),
            private_key: Some(inline(&s.private_key_pem)),
            ..Default::default()
        })),
    };
    Resource::new(&s.name, &secret, Vec::new())
}
