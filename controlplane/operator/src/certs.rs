//! Certificates the operator issues itself (pure: names and the date come in, PEM goes out).
//!
//! The agent channel of an NsightCoordinator is mutual TLS: one Secret `<name>-agent-tls`
//! holds a CA of its own, the coordinator's server certificate (its Service's DNS names) and
//! the client certificate injected agents present. The coordinator mounts `ca.crt`, `tls.crt`,
//! `tls.key`; an injected Pod mounts only `ca.crt`, `agent.crt`, `agent.key`
//! ([`AGENT_KEYS`]), so a profiled process never holds the server's key.
//!
//! ```text
//!  CA "nsight-agent-channel <ns>/<name>" ──signs──> tls.crt   <name>, <name>.<ns>, <name>.<ns>.svc[.<domain>]
//!                                        └─signs──> agent.crt "nsight-agent" (client auth)
//! ```

use std::time::{SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// The keys of the agent-channel Secret.
pub const CA_KEY: &str = "ca.crt";
pub const SERVER_CERT_KEY: &str = "tls.crt";
pub const SERVER_KEY_KEY: &str = "tls.key";
pub const AGENT_CERT_KEY: &str = "agent.crt";
pub const AGENT_KEY_KEY: &str = "agent.key";
/// What an injected Pod mounts of it.
pub const AGENT_KEYS: [&str; 3] = [CA_KEY, AGENT_CERT_KEY, AGENT_KEY_KEY];
/// What the coordinator mounts of it.
pub const SERVER_KEYS: [&str; 3] = [CA_KEY, SERVER_CERT_KEY, SERVER_KEY_KEY];
/// How long issued certificates are valid; a Secret is replaced by deleting it (the operator
/// issues a new one on its next reconcile; docs/operator.md).
pub const VALIDITY_YEARS: i32 = 5;

/// The PEM files of one agent channel.
#[derive(Clone, Debug)]
pub struct AgentChannel {
    pub ca: String,
    pub server_cert: String,
    pub server_key: String,
    pub agent_cert: String,
    pub agent_key: String,
}

impl AgentChannel {
    /// `(key, PEM)` pairs in Secret order.
    pub fn files(&self) -> [(&'static str, &str); 5] {
        [
            (CA_KEY, self.ca.as_str()),
            (SERVER_CERT_KEY, self.server_cert.as_str()),
            (SERVER_KEY_KEY, self.server_key.as_str()),
            (AGENT_CERT_KEY, self.agent_cert.as_str()),
            (AGENT_KEY_KEY, self.agent_key.as_str()),
        ]
    }
}

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

/// Today in UTC.
pub fn today() -> Date {
    let days = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0);
    civil_from_days(i64::try_from(days).unwrap_or(0))
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

fn validity(params: &mut CertificateParams, (y, m, d): Date) {
    // From yesterday (clock skew between the operator and the Pods) for VALIDITY_YEARS; the
    // 29th of February does not exist every year, so the day is capped at 28.
    let (by, bm, bd) = if d > 1 {
        (y, m, d - 1)
    } else if m > 1 {
        (y, m - 1, 28)
    } else {
        (y - 1, 12, 28)
    };
    params.not_before = rcgen::date_time_ymd(by, bm, bd);
    params.not_after = rcgen::date_time_ymd(y + VALIDITY_YEARS, m, d.min(28));
}

/// A CA of its own, named `common_name`.
fn new_ca(
    common_name: String,
    today: Date,
) -> Result<CertifiedIssuer<'static, KeyPair>, rcgen::Error> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut ca_params, today);
    CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)
}

/// A serving certificate (PEM: CA, certificate, key) for `names`, e.g. the injector webhook's
/// Service: the API server trusts the CA through the webhook configuration's `caBundle`.
#[derive(Clone, Debug)]
pub struct Serving {
    pub ca: String,
    pub cert: String,
    pub key: String,
}

/// A new CA and a server certificate for `names`.
pub fn issue_serving(
    label: &str,
    names: Vec<String>,
    today: Date,
) -> Result<Serving, rcgen::Error> {
    let ca = new_ca(format!("nsight-operator {label}"), today)?;
    let mut params = CertificateParams::new(names)?;
    params.distinguished_name.push(DnType::CommonName, label);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    validity(&mut params, today);
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &ca)?;
    Ok(Serving {
        ca: ca.pem(),
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A new CA and both certificates for the coordinator reached at `server_names`.
pub fn issue_agent_channel(
    label: &str,
    server_names: Vec<String>,
    today: Date,
) -> Result<AgentChannel, rcgen::Error> {
    let ca = new_ca(format!("nsight-agent-channel {label}"), today)?;

    let leaf = |names: Vec<String>, cn: &str, usage: ExtendedKeyUsagePurpose| {
        let mut params = CertificateParams::new(names)?;
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        validity(&mut params, today);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &ca)?;
        Ok::<_, rcgen::Error>((cert.pem(), key.serialize_pem()))
    };
    let (server_cert, server_key) = leaf(
        server_names,
        "nsight-coordinator",
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    let (agent_cert, agent_key) = leaf(
        vec!["nsight-agent".into()],
        "nsight-agent",
        ExtendedKeyUsagePurpose::ClientAuth,
    )?;
    Ok(AgentChannel {
        ca: ca.pem(),
        server_cert,
        server_key,
        agent_cert,
        agent_key,
    })
}

#[cfg(test)]
mod tests {
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
        let set = issue_agent_channel("team/nsight-coordinator", names, (2026, 3, 1)).unwrap();
        for (key, pem) in set.files() {
            assert!(pem.starts_with("-----BEGIN"), "{key}: {pem}");
        }
        assert!(set.server_key.contains("PRIVATE KEY"));
        assert_ne!(set.server_cert, set.agent_cert);
        // The server certificate names the Service (DER holds the SAN as plain ASCII).
        let der = pem_body(&set.server_cert);
        assert!(contains(&der, b"nsight-coordinator.team.svc"));
        assert!(!contains(
            &pem_body(&set.agent_cert),
            b"nsight-coordinator.team.svc"
        ));
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
