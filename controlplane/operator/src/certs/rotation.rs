//! When the operator's certificates are renewed, and the renewal itself (pure: the Secret's
//! PEM files and the time come in, the new files go out; only the new keys are random).
//!
//! ```text
//!  files (ca.crt bundle, ca.key, leaves) ──plan(now)──> reasons   (empty: nothing due)
//!        ──renew(now)──> files'
//!    CA due (missing, unreadable, no ca.key, < 13 months left):
//!        new CA; ca.crt = new CA + the old ones still valid; every leaf re-signed
//!    else a leaf due (missing, unreadable, other issuer, names changed, < 1/3 of its life left):
//!        that leaf re-signed by the same CA (rebuilt from ca.crt + ca.key)
//!    an old CA of the bundle expired: dropped from ca.crt
//! ```
//!
//! The CA lives [`CA_DAYS`], leaves [`LEAF_DAYS`]; the CA is replaced while it still has
//! [`CA_RENEW_DAYS`] left, so it always outlives the leaves it signed. The bundle's overlap lets
//! whoever still trusts only the old CA (an agent whose volume the kubelet has not refreshed
//! yet, the API server before the caBundle is patched) keep verifying what the old CA signed.
//! Nothing here logs or formats key material: [`Reason`] names keys, never their values.

use std::{collections::BTreeMap, fmt};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use x509_parser::{
    certificate::X509Certificate, extensions::GeneralName, pem::Pem, prelude::FromDer,
};

use super::{civil_from_days, CA_KEY, CA_PRIVATE_KEY};

/// How long a CA is valid (10 years).
pub const CA_DAYS: i64 = 3652;
/// How long a leaf certificate is valid (1 year).
pub const LEAF_DAYS: i64 = 365;
/// A CA with less than this left (13 months) is replaced.
pub const CA_RENEW_DAYS: i64 = 396;
const DAY: i64 = 86_400;

/// A Secret's data as PEM text, by key.
pub type Files = BTreeMap<String, String>;

/// What a leaf certificate is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Usage {
    Server,
    Client,
}

/// One leaf certificate of a Secret.
#[derive(Clone, Debug)]
pub struct Leaf {
    /// The key of its certificate (`tls.crt`) and of its private key (`tls.key`).
    pub cert_key: &'static str,
    pub key_key: &'static str,
    pub common_name: &'static str,
    /// Its DNS names (subject alternative names); renewed when they differ.
    pub names: Vec<String>,
    pub usage: Usage,
}

/// What a Secret of certificates must hold: a CA named `ca_name` and these leaves.
#[derive(Clone, Debug)]
pub struct Wanted {
    pub ca_name: String,
    pub leaves: Vec<Leaf>,
}

/// Why (part of) a Secret is renewed. Names keys, never their values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// No `ca.crt`: a first issue.
    CaMissing,
    CaUnreadable(String),
    /// No `ca.key`: written by an operator that did not rotate; a new CA is issued, the old
    /// one stays in the bundle.
    CaKeyMissing,
    CaKeyUnusable(String),
    CaExpiring {
        days_left: i64,
    },
    /// An old CA of the bundle expired and is dropped from it.
    OldCaExpired,
    LeafMissing(&'static str),
    LeafUnreadable(&'static str, String),
    /// The leaf is not signed by the current CA (or its key does not match it).
    LeafNotOfThisCa(&'static str),
    LeafKeyMismatch(&'static str),
    LeafExpiring {
        key: &'static str,
        days_left: i64,
    },
    NamesChanged(&'static str),
}

impl Reason {
    /// Whether this reason needs a new CA (and so every leaf re-signed).
    pub fn new_ca(&self) -> bool {
        matches!(
            self,
            Reason::CaMissing
                | Reason::CaUnreadable(_)
                | Reason::CaKeyMissing
                | Reason::CaKeyUnusable(_)
                | Reason::CaExpiring { .. }
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::CaMissing => write!(f, "no {CA_KEY}: first issue"),
            Reason::CaUnreadable(why) => write!(f, "{CA_KEY} is not a readable certificate ({why})"),
            Reason::CaKeyMissing => write!(
                f,
                "no {CA_PRIVATE_KEY} (issued by an older operator): a new CA, the old one stays trusted until it expires"
            ),
            Reason::CaKeyUnusable(why) => write!(f, "{CA_PRIVATE_KEY} cannot sign for {CA_KEY} ({why})"),
            Reason::CaExpiring { days_left } => write!(f, "the CA expires in {days_left} days"),
            Reason::OldCaExpired => write!(f, "an old CA in {CA_KEY} expired"),
            Reason::LeafMissing(key) => write!(f, "no {key}"),
            Reason::LeafUnreadable(key, why) => write!(f, "{key} is not a readable certificate ({why})"),
            Reason::LeafNotOfThisCa(key) => write!(f, "{key} is not signed by the current CA"),
            Reason::LeafKeyMismatch(key) => write!(f, "{key} does not match its private key"),
            Reason::LeafExpiring { key, days_left } => write!(f, "{key} expires in {days_left} days"),
            Reason::NamesChanged(key) => write!(f, "the DNS names of {key} changed"),
        }
    }
}

/// The reasons as one line for a log.
pub fn describe(reasons: &[Reason]) -> String {
    reasons
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The DER of every certificate in a PEM text, or why it is unreadable.
fn certificates(pem: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    for block in Pem::iter_from_buffer(pem.as_bytes()) {
        let block = block.map_err(|e| e.to_string())?;
        if block.label != "CERTIFICATE" {
            continue;
        }
        X509Certificate::from_der(&block.contents).map_err(|e| e.to_string())?;
        out.push(block.contents);
    }
    if out.is_empty() {
        return Err("no certificate in it".into());
    }
    Ok(out)
}

fn parse(der: &[u8]) -> Option<X509Certificate<'_>> {
    X509Certificate::from_der(der).ok().map(|(_, c)| c)
}

fn not_after(cert: &X509Certificate<'_>) -> i64 {
    cert.validity().not_after.timestamp()
}

fn days_left(cert: &X509Certificate<'_>, now: i64) -> i64 {
    (not_after(cert) - now).div_euclid(DAY)
}

/// The DNS names of a certificate, sorted.
fn dns_names(cert: &X509Certificate<'_>) -> Vec<String> {
    let mut names: Vec<String> = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::DNSName(d) => Some((*d).to_owned()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Whether `key` (PEM) is the private key of `cert`.
fn key_matches(key: &str, cert: &X509Certificate<'_>) -> Result<bool, String> {
    let pair = KeyPair::from_pem(key).map_err(|e| e.to_string())?;
    Ok(pair.public_key_raw() == &*cert.public_key().subject_public_key.data)
}

/// What is due in `files` at `now` (Unix seconds); empty when nothing is.
pub fn plan(files: &Files, wanted: &Wanted, now: i64) -> Vec<Reason> {
    let mut reasons = Vec::new();
    let bundle = match files.get(CA_KEY).map(|pem| certificates(pem)) {
        None => {
            reasons.push(Reason::CaMissing);
            return reasons;
        }
        Some(Err(why)) => {
            reasons.push(Reason::CaUnreadable(why));
            return reasons;
        }
        Some(Ok(bundle)) => bundle,
    };
    let Some(ca) = bundle.first().and_then(|der| parse(der)) else {
        reasons.push(Reason::CaUnreadable("no certificate in it".into()));
        return reasons;
    };
    match files.get(CA_PRIVATE_KEY).map(|key| key_matches(key, &ca)) {
        None => reasons.push(Reason::CaKeyMissing),
        Some(Err(why)) => reasons.push(Reason::CaKeyUnusable(why)),
        Some(Ok(false)) => reasons.push(Reason::CaKeyUnusable(
            "it is not the key of the first certificate".into(),
        )),
        Some(Ok(true)) => {}
    }
    let ca_left = days_left(&ca, now);
    if ca_left < CA_RENEW_DAYS {
        reasons.push(Reason::CaExpiring { days_left: ca_left });
    }
    if reasons.iter().any(Reason::new_ca) {
        return reasons;
    }
    if bundle[1..]
        .iter()
        .any(|der| parse(der).is_none_or(|old| not_after(&old) <= now))
    {
        reasons.push(Reason::OldCaExpired);
    }
    for leaf in &wanted.leaves {
        if let Some(reason) = leaf_due(files, leaf, &ca, now) {
            reasons.push(reason);
        }
    }
    reasons
}

/// Why `leaf` of `files` is due under the CA `ca`, if it is.
fn leaf_due(files: &Files, leaf: &Leaf, ca: &X509Certificate<'_>, now: i64) -> Option<Reason> {
    let Some(pem) = files.get(leaf.cert_key) else {
        return Some(Reason::LeafMissing(leaf.cert_key));
    };
    let Some(key) = files.get(leaf.key_key) else {
        return Some(Reason::LeafMissing(leaf.key_key));
    };
    let der = match certificates(pem) {
        Ok(mut ders) => ders.swap_remove(0),
        Err(why) => return Some(Reason::LeafUnreadable(leaf.cert_key, why)),
    };
    let cert = parse(&der)?;
    if cert.verify_signature(Some(ca.public_key())).is_err()
        || cert.issuer().as_raw() != ca.subject().as_raw()
    {
        return Some(Reason::LeafNotOfThisCa(leaf.cert_key));
    }
    if key_matches(key, &cert) != Ok(true) {
        return Some(Reason::LeafKeyMismatch(leaf.key_key));
    }
    let lifetime = not_after(&cert) - cert.validity().not_before.timestamp();
    let left = not_after(&cert) - now;
    if left < lifetime / 3 {
        return Some(Reason::LeafExpiring {
            key: leaf.cert_key,
            days_left: left.div_euclid(DAY),
        });
    }
    let mut want = leaf.names.clone();
    want.sort();
    (dns_names(&cert) != want).then_some(Reason::NamesChanged(leaf.cert_key))
}

/// Cannot issue a certificate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot generate or sign a certificate")]
    Sign(#[source] rcgen::Error),
    #[error("cannot use the stored CA to sign")]
    StoredCa(#[source] rcgen::Error),
}

/// From the day before `now` (clock skew between the operator and the Pods) for `days`.
fn validity(params: &mut CertificateParams, now: i64, days: i64) {
    let today = now.div_euclid(DAY);
    let date = |d: i64| {
        let (y, m, d) = civil_from_days(d);
        rcgen::date_time_ymd(y, m, d)
    };
    params.not_before = date(today - 1);
    params.not_after = date(today + days);
}

fn ca_params(name: &str, now: i64) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut params, now, CA_DAYS);
    Ok(params)
}

/// `(certificate, key)` PEM of `leaf`, signed by `issuer`.
fn sign(leaf: &Leaf, issuer: &Issuer<'_, KeyPair>, now: i64) -> Result<(String, String), Error> {
    let mut params = CertificateParams::new(leaf.names.clone()).map_err(Error::Sign)?;
    params
        .distinguished_name
        .push(DnType::CommonName, leaf.common_name);
    params.extended_key_usages = vec![match leaf.usage {
        Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
        Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
    }];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    // Names the signing CA's key: the old and the new CA of a bundle share their name.
    params.use_authority_key_identifier_extension = true;
    validity(&mut params, now, LEAF_DAYS);
    let key = KeyPair::generate().map_err(Error::Sign)?;
    let cert = params.signed_by(&key, issuer).map_err(Error::Sign)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// PEM of a DER certificate.
fn to_pem(der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// The certificates of the old bundle still valid at `now`, as PEM (unreadable ones dropped).
fn still_valid(files: &Files, now: i64) -> Vec<Vec<u8>> {
    files
        .get(CA_KEY)
        .and_then(|pem| certificates(pem).ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|der| parse(der).is_some_and(|c| not_after(&c) > now))
        .collect()
}

/// `files` with what `reasons` (from [`plan`]) says is due renewed; other keys are kept.
pub fn renew(files: &Files, wanted: &Wanted, reasons: &[Reason], now: i64) -> Result<Files, Error> {
    let mut out = files.clone();
    let old = still_valid(files, now);
    let put = |out: &mut Files, leaf: &Leaf, (cert, key): (String, String)| {
        out.insert(leaf.cert_key.to_owned(), cert);
        out.insert(leaf.key_key.to_owned(), key);
    };
    if reasons.iter().any(Reason::new_ca) {
        let key = KeyPair::generate().map_err(Error::Sign)?;
        let key_pem = key.serialize_pem();
        let params = ca_params(&wanted.ca_name, now).map_err(Error::Sign)?;
        let ca = CertifiedIssuer::self_signed(params, key).map_err(Error::Sign)?;
        let mut bundle = ca.pem();
        for der in &old {
            bundle.push_str(&to_pem(der));
        }
        out.insert(CA_KEY.to_owned(), bundle);
        out.insert(CA_PRIVATE_KEY.to_owned(), key_pem);
        for leaf in &wanted.leaves {
            put(&mut out, leaf, sign(leaf, &ca, now)?);
        }
        return Ok(out);
    }
    // The same CA: the first certificate of the bundle, which plan() checked is readable and
    // matches ca.key.
    let current = files
        .get(CA_KEY)
        .and_then(|pem| certificates(pem).ok())
        .and_then(|ders| ders.into_iter().next())
        .unwrap_or_default();
    if reasons.contains(&Reason::OldCaExpired) {
        let mut bundle = to_pem(&current);
        for der in old.iter().filter(|d| **d != current) {
            bundle.push_str(&to_pem(der));
        }
        out.insert(CA_KEY.to_owned(), bundle);
    }
    let due: Vec<&Leaf> = wanted
        .leaves
        .iter()
        .filter(|leaf| {
            reasons.iter().any(|r| match r {
                Reason::LeafMissing(k) | Reason::LeafKeyMismatch(k) => {
                    *k == leaf.cert_key || *k == leaf.key_key
                }
                Reason::LeafUnreadable(k, _)
                | Reason::LeafNotOfThisCa(k)
                | Reason::LeafExpiring { key: k, .. }
                | Reason::NamesChanged(k) => *k == leaf.cert_key,
                _ => false,
            })
        })
        .collect();
    if due.is_empty() {
        return Ok(out);
    }
    let key = files
        .get(CA_PRIVATE_KEY)
        .map(|pem| KeyPair::from_pem(pem))
        .transpose()
        .map_err(Error::StoredCa)?
        .ok_or(Error::StoredCa(rcgen::Error::CouldNotParseKeyPair))?;
    let issuer =
        Issuer::from_ca_cert_der(&current.as_slice().into(), key).map_err(Error::StoredCa)?;
    for leaf in due {
        put(&mut out, leaf, sign(leaf, &issuer, now)?);
    }
    Ok(out)
}

/// [`plan`] then [`renew`]: the renewed files and why, or `None` when nothing is due.
pub fn rotate(
    files: &Files,
    wanted: &Wanted,
    now: i64,
) -> Result<Option<(Files, Vec<Reason>)>, Error> {
    let reasons = plan(files, wanted, now);
    if reasons.is_empty() {
        return Ok(None);
    }
    let renewed = renew(files, wanted, &reasons, now)?;
    Ok(Some((renewed, reasons)))
}

#[cfg(test)]
#[path = "rotation_tests.rs"]
mod tests;
