//! Certificates the operator issues and renews itself (pure: names and the time come in, PEM
//! goes out; [`rotation`] decides when and renews).
//!
//! The agent channel of an NsightCoordinator is mutual TLS: one Secret `<name>-agent-tls`
//! holds a CA of its own (`ca.crt`, possibly a bundle during a CA change, and its private key
//! `ca.key`), the coordinator's server certificate (its Service's DNS names) and the client
//! certificate injected agents present. The coordinator mounts `ca.crt`, `tls.crt`, `tls.key`
//! ([`SERVER_KEYS`]); an injected Pod mounts only `ca.crt`, `agent.crt`, `agent.key`
//! ([`AGENT_KEYS`]), so a profiled process never holds the server's key, and nothing but the
//! operator ever reads `ca.key`.
//!
//! ```text
//!  CA "nsight-agent-channel <ns>/<name>" ──signs──> tls.crt   <name>, <name>.<ns>, <name>.<ns>.svc[.<domain>]
//!   (10 years, ca.key)                   └─signs──> agent.crt "nsight-agent" (client auth)
//!                                                   (leaves: 1 year, renewed with 1/3 left)
//! ```

pub mod rotation;

use std::time::{SystemTime, UNIX_EPOCH};

use rotation::{Files, Leaf, Reason, Usage, Wanted};

/// The keys of the agent-channel Secret (and of the webhook's).
pub const CA_KEY: &str = "ca.crt";
/// The CA's private key: read only by the operator, never mounted.
pub const CA_PRIVATE_KEY: &str = "ca.key";
pub const SERVER_CERT_KEY: &str = "tls.crt";
pub const SERVER_KEY_KEY: &str = "tls.key";
pub const AGENT_CERT_KEY: &str = "agent.crt";
pub const AGENT_KEY_KEY: &str = "agent.key";
/// What an injected Pod mounts of it.
pub const AGENT_KEYS: [&str; 3] = [CA_KEY, AGENT_CERT_KEY, AGENT_KEY_KEY];
/// What the coordinator mounts of it.
pub const SERVER_KEYS: [&str; 3] = [CA_KEY, SERVER_CERT_KEY, SERVER_KEY_KEY];

/// The DNS names a Service `service` in `namespace` is reached by.
pub fn service_names(service: &str, namespace: &str, cluster_domain: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.{cluster_domain}"),
    ]
}

/// A civil date (year, month, day) in UTC.
pub type Date = (i32, u8, u8);

/// Now, in seconds since 1970-01-01 UTC (what [`rotation`] takes).
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Days since 1970-01-01 -> (year, month, day), by jiff's civil calendar (k8s-openapi's).
fn civil_from_days(days: i64) -> Date {
    use k8s_openapi::jiff::{civil, Span};
    Span::new()
        .try_days(days)
        .ok()
        .and_then(|span| civil::date(1970, 1, 1).checked_add(span).ok())
        .map_or((1970, 1, 1), |d| {
            (
                i32::from(d.year()),
                u8::try_from(d.month()).unwrap_or(1),
                u8::try_from(d.day()).unwrap_or(1),
            )
        })
}

/// The webhook's serving certificate for `names` (its Service): `ca.crt`, `ca.key`, `tls.crt`,
/// `tls.key`. The API server trusts the CA through the webhook configuration's `caBundle`.
pub fn serving_wanted(label: &str, names: Vec<String>) -> Wanted {
    Wanted {
        ca_name: format!("nsight-operator {label}"),
        leaves: vec![Leaf {
            cert_key: SERVER_CERT_KEY,
            key_key: SERVER_KEY_KEY,
            common_name: "nsight-operator-webhook",
            names,
            usage: Usage::Server,
        }],
    }
}

/// The agent channel of the coordinator `label` (`<ns>/<name>`) reached at `server_names`.
pub fn agent_channel_wanted(label: &str, server_names: Vec<String>) -> Wanted {
    Wanted {
        ca_name: format!("nsight-agent-channel {label}"),
        leaves: vec![
            Leaf {
                cert_key: SERVER_CERT_KEY,
                key_key: SERVER_KEY_KEY,
                common_name: "nsight-coordinator",
                names: server_names,
                usage: Usage::Server,
            },
            Leaf {
                cert_key: AGENT_CERT_KEY,
                key_key: AGENT_KEY_KEY,
                common_name: "nsight-agent",
                names: vec!["nsight-agent".into()],
                usage: Usage::Client,
            },
        ],
    }
}

/// A first issue of `wanted`: a new CA and every leaf.
pub fn issue(wanted: &Wanted, now: i64) -> Result<Files, rotation::Error> {
    rotation::renew(&Files::new(), wanted, &[Reason::CaMissing], now)
}

/// Secret data (bytes) as PEM text; a value that is not UTF-8 is left out (and so renewed).
pub fn files_of(data: &std::collections::BTreeMap<String, Vec<u8>>) -> Files {
    data.iter()
        .filter_map(|(k, v)| Some((k.clone(), String::from_utf8(v.clone()).ok()?)))
        .collect()
}

/// A short fingerprint of what a server presents and trusts (`tls.crt` and `ca.crt`): the
/// first 16 hex digits of their SHA-256. A Pod-template annotation with it rolls the server
/// when either is renewed.
pub fn fingerprint(files: &Files) -> String {
    use std::fmt::Write as _;

    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for key in [SERVER_CERT_KEY, CA_KEY] {
        hasher.update(key.as_bytes());
        hasher.update([0]);
        hasher.update(files.get(key).map_or(&b""[..], |v| v.as_bytes()));
        hasher.update([0]);
    }
    hasher.finalize()[..8]
        .iter()
        .fold(String::new(), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(20_784), (2026, 11, 27));
    }

    #[test]
    fn issues_a_ca_a_server_and_a_client_certificate() {
        let names = service_names("nsight-coordinator", "team", "cluster.local");
        assert_eq!(names[3], "nsight-coordinator.team.svc.cluster.local");
        let wanted = agent_channel_wanted("team/nsight-coordinator", names);
        let set = issue(&wanted, 1_772_323_200).unwrap();
        let keys: Vec<&str> = set.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "agent.crt",
                "agent.key",
                "ca.crt",
                "ca.key",
                "tls.crt",
                "tls.key"
            ]
        );
        for (key, pem) in &set {
            assert!(pem.starts_with("-----BEGIN"), "{key}");
        }
        assert!(set[SERVER_KEY_KEY].contains("PRIVATE KEY"));
        assert_ne!(set[SERVER_CERT_KEY], set[AGENT_CERT_KEY]);
        // The server certificate names the Service (DER holds the SAN as plain ASCII).
        let der = pem_body(&set[SERVER_CERT_KEY]);
        assert!(contains(&der, b"nsight-coordinator.team.svc"));
        assert!(!contains(
            &pem_body(&set[AGENT_CERT_KEY]),
            b"nsight-coordinator.team.svc"
        ));
    }

    #[test]
    fn the_ca_key_is_mounted_by_nobody() {
        assert!(!SERVER_KEYS.contains(&CA_PRIVATE_KEY));
        assert!(!AGENT_KEYS.contains(&CA_PRIVATE_KEY));
        // Nor any other private key than the mounting side's own.
        assert!(!AGENT_KEYS.contains(&SERVER_KEY_KEY));
        assert!(!SERVER_KEYS.contains(&AGENT_KEY_KEY));
    }

    #[test]
    fn the_fingerprint_follows_the_served_certificate_and_the_bundle_only() {
        let mut files = Files::from([
            (CA_KEY.to_owned(), "ca".to_owned()),
            (SERVER_CERT_KEY.to_owned(), "cert".to_owned()),
            (AGENT_CERT_KEY.to_owned(), "agent".to_owned()),
        ]);
        let first = fingerprint(&files);
        assert_eq!(first.len(), 16);
        assert!(first.chars().all(|c| c.is_ascii_hexdigit()));
        files.insert(AGENT_CERT_KEY.to_owned(), "agent 2".to_owned());
        assert_eq!(fingerprint(&files), first);
        files.insert(CA_KEY.to_owned(), "ca + old".to_owned());
        assert_ne!(fingerprint(&files), first);
    }

    fn pem_body(pem: &str) -> Vec<u8> {
        use base64::Engine as _;
        let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap_or_default()
    }

    fn contains(hay: &[u8], needle: &[u8]) -> bool {
        hay.windows(needle.len()).any(|w| w == needle)
    }
}
