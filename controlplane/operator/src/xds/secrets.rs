//! Validation of the Secrets an NsightGateway references, before anything reaches Envoy: the
//! TLS Secret (`tls.crt` + `tls.key`: PEM, an X.509 chain, the matching private key, inside its
//! validity period), the API-key Secret (the key present and usable by the auth filter) and a CA
//! bundle (`ca.crt`: PEM certificates).
//!
//! Pure: the Secret comes in as read from the API server (or absent), the clock as an
//! argument. Every refusal names the Secret, the key and what to do about it.

use k8s_openapi::api::core::v1::Secret;
use tokio_rustls::rustls::{
    crypto::ring,
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    sign::CertifiedKey,
    Error as TlsError, InconsistentKeys,
};

/// The keys of a `kubernetes.io/tls` Secret.
pub const TLS_CERT_KEY: &str = "tls.crt";
pub const TLS_KEY_KEY: &str = "tls.key";
/// The key of the API-key Secret when `keySecretRef.key` is not given.
pub const DEFAULT_API_KEY_KEY: &str = "api-key";
/// The auth filter refuses shorter API keys (`plugins/auth`, `MIN_API_KEY_LEN`).
pub const MIN_API_KEY_LEN: usize = 16;

/// A certificate chain and key that passed [`tls`].
#[derive(Clone, PartialEq, Eq)]
pub struct ValidTls {
    pub cert_chain_pem: String,
    pub private_key_pem: String,
    /// `notAfter` of the leaf, Unix seconds.
    pub not_after: i64,
    /// The leaf's DNS subject alternative names, in order (wildcards included).
    pub dns_names: Vec<String>,
}

impl std::fmt::Debug for ValidTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValidTls")
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

/// The value of `key` in the Secret (`data`, or `stringData` as written by a client).
pub fn value<'a>(secret: &'a Secret, key: &str) -> Option<&'a [u8]> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|v| v.0.as_slice())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(String::as_bytes)
        })
}

/// Checks the TLS Secret `name` in `namespace` (`None`: it does not exist) at Unix time `now`.
/// `Err` is the condition message.
pub fn tls(
    namespace: &str,
    name: &str,
    secret: Option<&Secret>,
    now: i64,
) -> Result<ValidTls, String> {
    let what = format!("Secret {namespace}/{name} (spec.tlsSecretRef)");
    let create =
        format!("kubectl create secret tls {name} --cert=tls.crt --key=tls.key -n {namespace}");
    let Some(secret) = secret else {
        return Err(format!("{what} does not exist; create it: {create}"));
    };
    let text = |key: &str| -> Result<String, String> {
        let bytes = value(secret, key)
            .filter(|b| !b.is_empty())
            .ok_or_else(|| {
                format!("{what} has no `{key}` (or it is empty); recreate it: {create}")
            })?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| format!("{what}: `{key}` is not PEM text (binary DER?); convert it with `openssl x509 -inform der` / `openssl pkey -inform der` and recreate the Secret"))
    };
    let cert_pem = text(TLS_CERT_KEY)?;
    let key_pem = text(TLS_KEY_KEY)?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what}: `{TLS_CERT_KEY}` is not valid PEM ({e})"))?;
    let Some(leaf) = chain.first() else {
        return Err(format!(
            "{what}: `{TLS_CERT_KEY}` holds no `BEGIN CERTIFICATE` block; put the server certificate (then its intermediates) in it"
        ));
    };
    let (_, parsed) = x509_parser::parse_x509_certificate(leaf).map_err(|e| {
        format!("{what}: the first certificate of `{TLS_CERT_KEY}` is not valid X.509 ({e})")
    })?;
    for (i, cert) in chain.iter().enumerate().skip(1) {
        x509_parser::parse_x509_certificate(cert).map_err(|e| {
            format!(
                "{what}: certificate {} of `{TLS_CERT_KEY}` is not valid X.509 ({e})",
                i + 1
            )
        })?;
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| {
        format!("{what}: `{TLS_KEY_KEY}` holds no PEM private key (PKCS#8, PKCS#1 or SEC1): {e}")
    })?;
    let signing = ring::default_provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| {
            format!("{what}: `{TLS_KEY_KEY}` is not a usable private key (RSA >= 2048 bits, ECDSA P-256/P-384 or Ed25519): {e}")
        })?;
    match CertifiedKey::new(chain.clone(), signing).keys_match() {
        Ok(()) => {}
        Err(TlsError::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {
            return Err(format!(
                "{what}: `{TLS_KEY_KEY}` is not the private key of the first certificate in `{TLS_CERT_KEY}`; put the matching pair in the Secret (the server certificate must come first)"
            ))
        }
        Err(e) => return Err(format!("{what}: cannot check that `{TLS_KEY_KEY}` matches `{TLS_CERT_KEY}`: {e}")),
    }
    let validity = parsed.validity();
    let (not_before, not_after) = (
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    );
    if now > not_after {
        return Err(format!(
            "{what}: the certificate expired on {} (notAfter); renew it and update the Secret",
            validity.not_after
        ));
    }
    if now < not_before {
        return Err(format!(
            "{what}: the certificate is not valid before {} (notBefore); check the issuer's clock or wait",
            validity.not_before
        ));
    }
    let dns_names = parsed
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    x509_parser::extensions::GeneralName::DNSName(d) => Some((*d).to_owned()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(ValidTls {
        cert_chain_pem: cert_pem,
        private_key_pem: key_pem,
        not_after,
        dns_names,
    })
}

/// The API key in Secret `name` under `key` (`None`: the Secret does not exist). `Err` is the
/// condition message; never contains the key.
pub fn api_key(
    namespace: &str,
    name: &str,
    key: &str,
    secret: Option<&Secret>,
) -> Result<String, String> {
    api_key_of(
        "spec.authentication.apikey.keySecretRef",
        namespace,
        name,
        key,
        secret,
    )
}

/// As [`api_key`], for the Secret the gateway's field `field` names (in the messages).
pub fn api_key_of(
    field: &str,
    namespace: &str,
    name: &str,
    key: &str,
    secret: Option<&Secret>,
) -> Result<String, String> {
    let what = format!("Secret {namespace}/{name} ({field})");
    let create = format!(
        "kubectl create secret generic {name} --from-literal={key}=\"$(openssl rand -hex 24)\" -n {namespace}"
    );
    let Some(secret) = secret else {
        return Err(format!("{what} does not exist; create it: {create}"));
    };
    let Some(bytes) = value(secret, key) else {
        return Err(format!("{what} has no key `{key}`; add it or set {field}.key to the key that holds the API key"));
    };
    let text = std::str::from_utf8(bytes)
        .map_err(|_| format!("{what}: `{key}` is not UTF-8 text"))?
        .trim();
    check_api_key(&what, key, text)?;
    Ok(text.to_owned())
}

/// `pem` as a CA bundle: at least one PEM certificate, each valid X.509. `Err` says what is
/// wrong, naming `what` (the Secret and key).
pub fn ca_bundle(what: &str, pem: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(pem).map_err(|_| {
        format!("{what} is not PEM text (binary DER?); convert it with `openssl x509 -inform der`")
    })?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(text.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what} is not valid PEM ({e})"))?;
    if certs.is_empty() {
        return Err(format!(
            "{what} holds no `BEGIN CERTIFICATE` block; put the CA certificate(s) in it"
        ));
    }
    for (i, cert) in certs.iter().enumerate() {
        x509_parser::parse_x509_certificate(cert)
            .map_err(|e| format!("{what}: certificate {} is not valid X.509 ({e})", i + 1))?;
    }
    Ok(text.to_owned())
}

/// An inline or Secret-held key the filter would accept (`what` names where it came from).
pub fn check_api_key(what: &str, key: &str, text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err(format!("{what}: `{key}` is empty; put the API key in it"));
    }
    if text.chars().count() < MIN_API_KEY_LEN {
        return Err(format!(
            "{what}: `{key}` is shorter than {MIN_API_KEY_LEN} characters, which the gateway refuses as guessable; use e.g. `openssl rand -hex 24`"
        ));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn secret(pairs: &[(&str, &str)]) -> Secret {
        Secret {
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Secret::default()
        }
    }

    fn pair(not_after_year: i32) -> (String, String) {
        let mut params = rcgen::CertificateParams::new(vec!["gw.example".into()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(not_after_year, 1, 1);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// 2025-01-01T00:00:00Z.
    const NOW: i64 = 1_735_689_600;

    #[test]
    fn a_good_pair_passes() {
        let (cert, key) = pair(2030);
        let ok = tls(
            "ns",
            "gw-tls",
            Some(&secret(&[("tls.crt", &cert), ("tls.key", &key)])),
            NOW,
        )
        .unwrap();
        assert_eq!(ok.cert_chain_pem, cert);
        assert!(ok.not_after > NOW);
        assert_eq!(ok.dns_names, ["gw.example"]);
    }

    #[test]
    fn each_broken_secret_gets_an_actionable_message() {
        let (cert, key) = pair(2030);
        let (_, other_key) = pair(2030);
        let (old_cert, old_key) = pair(2024);
        let cases: Vec<(Option<Secret>, &str)> = vec![
            (
                None,
                "does not exist; create it: kubectl create secret tls gw-tls",
            ),
            (Some(secret(&[("tls.key", &key)])), "has no `tls.crt`"),
            (Some(secret(&[("tls.crt", &cert)])), "has no `tls.key`"),
            (
                Some(secret(&[("tls.crt", "hello"), ("tls.key", &key)])),
                "holds no `BEGIN CERTIFICATE` block",
            ),
            (
                Some(secret(&[
                    (
                        "tls.crt",
                        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                    ),
                    ("tls.key", &key),
                ])),
                "is not valid X.509",
            ),
            (
                Some(secret(&[("tls.crt", &cert), ("tls.key", "nope")])),
                "holds no PEM private key",
            ),
            (
                Some(secret(&[("tls.crt", &cert), ("tls.key", &other_key)])),
                "is not the private key of the first certificate",
            ),
            (
                Some(secret(&[("tls.crt", &old_cert), ("tls.key", &old_key)])),
                "the certificate expired on",
            ),
        ];
        for (s, want) in cases {
            let err = tls("ns", "gw-tls", s.as_ref(), NOW).unwrap_err();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
            assert!(err.contains("Secret ns/gw-tls"), "{err}");
            assert!(
                !err.contains("PRIVATE KEY-----\n"),
                "no key material: {err}"
            );
        }
        let (future, future_key) = pair(2030);
        assert!(tls(
            "ns",
            "gw-tls",
            Some(&secret(&[("tls.crt", &future), ("tls.key", &future_key)])),
            1_500_000_000
        )
        .unwrap_err()
        .contains("not valid before"));
    }

    #[test]
    fn api_keys() {
        let good = "0123456789abcdef0123";
        assert_eq!(
            api_key(
                "ns",
                "k",
                "api-key",
                Some(&secret(&[("api-key", &format!("{good}\n"))]))
            )
            .unwrap(),
            good
        );
        for (s, want) in [
            (None, "does not exist"),
            (Some(secret(&[("other", good)])), "has no key `api-key`"),
            (Some(secret(&[("api-key", "  ")])), "is empty"),
            (Some(secret(&[("api-key", "short")])), "shorter than 16"),
        ] {
            let err = api_key("ns", "k", "api-key", s.as_ref()).unwrap_err();
            assert!(err.contains(want), "{err}");
        }
    }
}
