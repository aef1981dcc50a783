//! What an injected Pod gets for the agent channel's mutual TLS (pure).
//!
//! When the coordinator URL the webhook hands agents is `https://<service>.<namespace>...`, the
//! operator has issued the Secret `<service>-agent-tls` for that coordinator (the Service is
//! named after its NsightCoordinator: `render::coordinator`). Each injected Pod mounts only the
//! client half of it (`ca.crt`, `agent.crt`, `agent.key`) read-only, and the agent finds it
//! through `NSIGHT_AGENT_TLS_DIR`. The volume is optional: when the Secret is missing (another
//! namespace's coordinator, or not issued yet), the Pod still starts, the agent cannot read its
//! certificates and the program runs unprofiled with that reason in the agent's log.
//!
//! ```text
//!  https://nsight-coordinator.team.svc:8081 -> Secret nsight-coordinator-agent-tls
//!      items ca.crt agent.crt agent.key -> /etc/nsight/agent-tls (ro) -> NSIGHT_AGENT_TLS_DIR
//!  http://...                                -> nothing (a plaintext channel)
//! ```

use k8s_openapi::api::core::v1::{SecretVolumeSource, Volume, VolumeMount};

use crate::{
    certs::AGENT_KEYS,
    render::coordinator::{key_items, tls_secret_name},
};

/// The volume's name in the Pod.
pub const VOLUME: &str = "nsight-agent-tls";
/// Where containers see it.
pub const DIR: &str = "/etc/nsight/agent-tls";
/// The agent's variable naming `DIR`.
pub const ENV: &str = "NSIGHT_AGENT_TLS_DIR";

/// The Secret of the coordinator at `url` when the channel is TLS: `<service>-agent-tls`.
pub fn secret_for(url: &str) -> Option<String> {
    let rest = url.strip_prefix("https://")?;
    let host = rest.split(['/', ':', '?']).next()?;
    let service = host.split('.').next().filter(|s| !s.is_empty())?;
    // An IP address names no Service.
    if service.parse::<u8>().is_ok() || host.starts_with('[') {
        return None;
    }
    Some(tls_secret_name(service))
}

/// Where the client half must be copied from for a Pod of `namespace` (single-tenant: the
/// coordinator lives in another namespace, whose Secret the Pod cannot mount): the
/// coordinator's namespace and the Secret's name, or `None` when the Pod's namespace has it
/// (its own coordinator), the URL names no namespace, or the channel is plaintext.
///
/// `https://nsight-operator-coordinator.nsight.svc:8081`, Pod in `team` ->
/// `("nsight", "nsight-operator-coordinator-agent-tls")`.
pub fn copy_source(url_template: &str, namespace: &str) -> Option<(String, String)> {
    let url = url_template.replace("{namespace}", namespace);
    let secret = secret_for(&url)?;
    let host = url
        .strip_prefix("https://")?
        .split(['/', ':', '?'])
        .next()?;
    let source = host.split('.').nth(1).filter(|s| !s.is_empty())?;
    (source != namespace).then(|| (source.to_owned(), secret))
}

/// The optional Secret volume with the client half.
pub fn volume(secret: &str) -> Volume {
    Volume {
        name: VOLUME.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.to_owned()),
            items: Some(key_items(&AGENT_KEYS)),
            optional: Some(true),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

pub fn mount() -> VolumeMount {
    VolumeMount {
        name: VOLUME.into(),
        mount_path: DIR.into(),
        read_only: Some(true),
        ..VolumeMount::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_follows_the_service_of_an_https_url() {
        assert_eq!(
            secret_for("https://nsight-coordinator.team.svc:8081").as_deref(),
            Some("nsight-coordinator-agent-tls")
        );
        assert_eq!(
            secret_for("https://coord:8081/").as_deref(),
            Some("coord-agent-tls")
        );
        assert_eq!(secret_for("http://nsight-coordinator.team.svc:8081"), None);
        assert_eq!(secret_for("https://10.0.0.7:8081"), None);
        assert_eq!(secret_for("https://[fd00::1]:8081"), None);
        assert_eq!(secret_for("https://"), None);
    }

    #[test]
    fn a_coordinator_of_another_namespace_needs_a_copy() {
        let url = "https://nsight-operator-coordinator.nsight.svc:8081";
        assert_eq!(
            copy_source(url, "team"),
            Some((
                "nsight".into(),
                "nsight-operator-coordinator-agent-tls".into()
            ))
        );
        assert_eq!(copy_source(url, "nsight"), None);
        let per_namespace = "https://nsight-operator-coordinator.{namespace}.svc:8081";
        assert_eq!(copy_source(per_namespace, "team"), None);
        assert_eq!(copy_source("https://coord:8081", "team"), None);
        assert_eq!(copy_source("http://c.nsight.svc:8081", "team"), None);
    }

    #[test]
    fn only_the_client_half_is_mounted_and_the_pod_starts_without_it() {
        let v = volume("c-agent-tls");
        let s = v.secret.unwrap();
        assert_eq!(s.optional, Some(true));
        let keys: Vec<String> = s.items.unwrap().into_iter().map(|i| i.key).collect();
        assert_eq!(keys, ["ca.crt", "agent.crt", "agent.key"]);
        assert!(!keys.iter().any(|k| k == "tls.key"));
    }
}
