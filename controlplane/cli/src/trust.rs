//! Which gateway certificates the CLI trusts: the public roots built into it, plus the CA a user
//! configured with `configure --ca-cert` (a self-signed gateway, or the local mode's
//! `<state>/tls/ca.crt`). The CA's PEM is kept in the configuration file itself, so moving or
//! deleting the original file does not break a configured CLI.

use reqwest::{blocking::ClientBuilder, Certificate};
use serde::{Deserialize, Serialize};

/// The text a failed TLS handshake with an unknown issuer shows, so the error can say what to do.
const UNTRUSTED_MARKERS: &[&str] = &["UnknownIssuer", "invalid peer certificate"];

/// One or more PEM certificates, checked to parse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CaCert(String);

/// Why a `--ca-cert` file is not usable.
#[derive(Debug, thiserror::Error)]
pub enum CaCertError {
    #[error("cannot read the CA certificate {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} holds no PEM certificate (expected `-----BEGIN CERTIFICATE-----` blocks, e.g. a Kubernetes TLS secret's ca.crt)")]
    NotPem { path: String },
}

impl CaCert {
    /// The PEM text of `path` (named in errors), with at least one parsable certificate.
    pub fn parse(path: &str, pem: &str) -> Result<Self, CaCertError> {
        let not_pem = || CaCertError::NotPem {
            path: path.to_owned(),
        };
        if !pem.contains("-----BEGIN CERTIFICATE-----") {
            return Err(not_pem());
        }
        match Certificate::from_pem_bundle(pem.as_bytes()) {
            Ok(certs) if !certs.is_empty() => Ok(Self(pem.to_owned())),
            _ => Err(not_pem()),
        }
    }

    /// Reads and checks the file at `path`.
    pub fn read(path: &std::path::Path) -> Result<Self, CaCertError> {
        let shown = path.display().to_string();
        let pem = std::fs::read_to_string(path).map_err(|source| CaCertError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&shown, &pem)
    }
}

/// `builder` trusting `ca` as well as the built-in roots.
pub fn with_ca(mut builder: ClientBuilder, ca: Option<&CaCert>) -> ClientBuilder {
    if let Some(CaCert(pem)) = ca {
        // Checked when configured; a file edited by hand into nonsense adds nothing and the
        // handshake then fails with the untrusted-certificate hint.
        for cert in Certificate::from_pem_bundle(pem.as_bytes()).unwrap_or_default() {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder
}

/// What to do when `error_text` (an error chain) is a handshake refused for an unknown issuer.
pub fn untrusted_hint(error_text: &str) -> Option<&'static str> {
    UNTRUSTED_MARKERS
        .iter()
        .any(|m| error_text.contains(m))
        .then_some(
            "the gateway's certificate is not signed by a CA this CLI trusts; run `nsight-cloud \
             configure ... --ca-cert CA.crt` with the CA that issued it (local mode: \
             <state>/tls/ca.crt; in a cluster: the ca.crt of the gateway's TLS secret)",
        )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    const CA: &str = include_str!("../tests/data/test-ca.crt");

    #[test]
    fn a_pem_bundle_is_kept_and_nonsense_is_named() {
        assert!(CaCert::parse("ca.crt", CA).is_ok());
        let err = CaCert::parse("key.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n").unwrap_err();
        assert!(
            err.to_string().contains("key.pem holds no PEM certificate"),
            "{err}"
        );
        let err = CaCert::parse(
            "bad.crt",
            "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
        )
        .unwrap_err();
        assert!(matches!(err, CaCertError::NotPem { .. }), "{err}");
    }

    #[test]
    fn unknown_issuer_gets_the_hint_other_failures_do_not() {
        assert!(untrusted_hint("invalid peer certificate: UnknownIssuer").is_some());
        assert!(untrusted_hint("connection refused").is_none());
    }
}
