//! The OTLP mirroring part of an injection (pure): when the tool config turns
//! `otlpMirroringEnabled` on, the Pod gets the namespace's OTLP proxy sidecar (an Envoy running
//! the bootstrap of its OTLPProxyConfig's ConfigMap, `render::otlp_proxy`) as a native sidecar,
//! and every container's agent the sidecar's OTLP/gRPC address to mirror NVTX ranges to.
//!
//! ```text
//! tool.otlpMirroringEnabled ──> the namespace's OTLPProxyConfigs (world) ──> first naming a collector
//!   ├─ found:   initContainers += nsight-otlp-proxy (restartPolicy Always, ConfigMap <name>)
//!   │           env NSIGHT_OTLP_MIRROR_ENDPOINT=http://127.0.0.1:4317; annotation says which
//!   └─ none:    no sidecar; the annotation says why (profiling goes on, unmirrored)
//! ```
//! The Pod never waits on something that cannot come: without a config that forwards, nothing
//! is added but the annotation.

use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapVolumeSource, Container, SecurityContext, Volume, VolumeMount,
};
use nsight_api::NsightToolConfig;

use crate::{
    render::{gateway::ENVOY_UID, otlp_proxy},
    settings::Settings,
    world::OtlpProxy,
};

/// The annotation saying where the Pod's mirrored spans go, or why they do not.
pub const ANNOTATION: &str = "nvidia.com/nsight-otlp-mirroring";
/// The sidecar's container name.
pub const CONTAINER: &str = "nsight-otlp-proxy";
/// The agent's setting (`nsight-agent run --otlp-mirror`).
pub const ENDPOINT_ENV: &str = "NSIGHT_OTLP_MIRROR_ENDPOINT";
const VOLUME: &str = "nsight-otlp-proxy";
const DIR: &str = "/etc/nsight/otlp-proxy";

/// What mirroring an injected Pod gets.
#[derive(Debug, Clone, PartialEq)]
pub enum Mirroring {
    /// The tool config does not ask for it.
    Off,
    /// The sidecar of this OTLPProxyConfig carries the spans.
    Proxy(OtlpProxy),
    /// Asked for but not possible here: the reason goes on the Pod.
    Unavailable(String),
}

/// Mirroring for a Pod injected with `tool` in a namespace with `proxies` (sorted by name):
/// the first that names a collector.
pub fn choose(tool: &NsightToolConfig, proxies: &[OtlpProxy]) -> Mirroring {
    if tool.otlp_mirroring_enabled != Some(true) {
        return Mirroring::Off;
    }
    if let Some(proxy) = proxies.iter().find(|p| p.forwarding) {
        return Mirroring::Proxy(proxy.clone());
    }
    let names: Vec<&str> = proxies.iter().map(|p| p.name.as_str()).collect();
    Mirroring::Unavailable(if names.is_empty() {
        "the tool config turns otlpMirroringEnabled on but the namespace has no OTLPProxyConfig; \
         create one whose collectorRef names an NsightOtelCollector"
            .into()
    } else {
        format!(
            "the tool config turns otlpMirroringEnabled on but no OTLPProxyConfig of the \
             namespace ({}) names a collector; set spec.collectorRef",
            names.join(", ")
        )
    })
}

/// The agent's endpoint: the sidecar's OTLP/gRPC listener.
pub fn endpoint() -> String {
    format!("http://127.0.0.1:{}", otlp_proxy::GRPC_PORT)
}

/// The volume with the sidecar's bootstrap (the OTLPProxyConfig's ConfigMap).
pub fn volume(proxy: &OtlpProxy) -> Volume {
    Volume {
        name: VOLUME.into(),
        config_map: Some(ConfigMapVolumeSource {
            name: proxy.name.clone(),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// The sidecar: Envoy with the bootstrap, restarted on its own (`restartPolicy: Always` in
/// `initContainers`: started before the app containers, stopped after them), unprivileged.
pub fn container(proxy: &OtlpProxy, settings: &Settings) -> Container {
    Container {
        name: CONTAINER.into(),
        image: Some(settings.otlp_proxy_image.clone()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(vec!["envoy".into()]),
        args: Some(vec![
            "-c".into(),
            format!("{DIR}/{}", otlp_proxy::ENVOY_KEY),
            "--disable-hot-restart".into(),
            "--log-level".into(),
            "warn".into(),
        ]),
        restart_policy: Some("Always".into()),
        resources: proxy.resources.clone(),
        volume_mounts: Some(vec![VolumeMount {
            name: VOLUME.into(),
            mount_path: DIR.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        }]),
        security_context: Some(SecurityContext {
            run_as_user: Some(ENVOY_UID),
            run_as_non_root: Some(true),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Capabilities::default()
            }),
            ..SecurityContext::default()
        }),
        ..Container::default()
    }
}

/// The annotation's value.
pub fn note(mirroring: &Mirroring) -> Option<String> {
    match mirroring {
        Mirroring::Off => None,
        Mirroring::Proxy(p) => Some(format!(
            "OTLPProxyConfig {} (sidecar {CONTAINER}, OTLP/gRPC {})",
            p.name,
            endpoint()
        )),
        Mirroring::Unavailable(why) => Some(format!("off: {why}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn proxy(name: &str, forwarding: bool) -> OtlpProxy {
        OtlpProxy {
            name: name.into(),
            forwarding,
            resources: None,
        }
    }

    fn tool(on: Option<bool>) -> NsightToolConfig {
        NsightToolConfig {
            otlp_mirroring_enabled: on,
            ..NsightToolConfig::default()
        }
    }

    #[test]
    fn only_a_tool_config_that_asks_gets_mirroring() {
        let proxies = [proxy("p", true)];
        assert_eq!(choose(&tool(None), &proxies), Mirroring::Off);
        assert_eq!(choose(&tool(Some(false)), &proxies), Mirroring::Off);
        assert_eq!(
            choose(&tool(Some(true)), &proxies),
            Mirroring::Proxy(proxy("p", true))
        );
    }

    #[test]
    fn the_first_proxy_naming_a_collector_is_used_and_none_is_said() {
        let on = tool(Some(true));
        assert_eq!(
            choose(
                &on,
                &[proxy("a", false), proxy("b", true), proxy("c", true)]
            ),
            Mirroring::Proxy(proxy("b", true))
        );
        let Mirroring::Unavailable(why) = choose(&on, &[]) else {
            panic!("no proxy config")
        };
        assert!(why.contains("no OTLPProxyConfig"), "{why}");
        let Mirroring::Unavailable(why) = choose(&on, &[proxy("a", false)]) else {
            panic!("no collector")
        };
        assert!(why.contains("(a)") && why.contains("collectorRef"), "{why}");
        assert!(note(&choose(&on, &[])).unwrap().starts_with("off: "));
        assert_eq!(note(&Mirroring::Off), None);
    }

    #[test]
    fn the_sidecar_runs_envoy_on_the_configs_bootstrap_unprivileged() {
        let c = container(&proxy("otlp", true), &Settings::default());
        assert_eq!(c.restart_policy.as_deref(), Some("Always"));
        assert_eq!(
            c.args.unwrap()[1],
            format!("{DIR}/{}", otlp_proxy::ENVOY_KEY)
        );
        let sc = c.security_context.unwrap();
        assert_eq!(sc.run_as_non_root, Some(true));
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(
            volume(&proxy("otlp", true)).config_map.unwrap().name,
            "otlp"
        );
        assert_eq!(endpoint(), "http://127.0.0.1:4317");
    }
}
