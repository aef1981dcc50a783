//! The OTLP mirroring part of an injection (pure): when the tool config turns
//! `otlpMirroringEnabled` on, the Pod gets the namespace's OTLP proxy sidecar as a native
//! sidecar (an Envoy whose bootstrap names only the manager's ADS server), and every
//! container's agent the sidecar's OTLP/gRPC address to mirror NVTX ranges to.
//!
//! ```text
//! tool.otlpMirroringEnabled ──> the namespace's OTLPProxyConfigs (world) ──> first naming a collector
//!   ├─ found:   initContainers += nsight-otlp-proxy (restartPolicy Always): envoy --config-yaml
//!   │           <ADS only> --service-node nsight-otlp-sidecar/<ns>/<pod> --service-cluster <config>
//!   │           env NSIGHT_OTLP_MIRROR_ENDPOINT=http://127.0.0.1:4317; annotation says which
//!   └─ none:    no sidecar; the annotation says why (profiling goes on, unmirrored)
//! ```
//! Listeners and clusters come over ADS (`xds::otlp_proxies` publishes the config's
//! `nsight_gateway::otlp_sidecar::ir`), so a changed OTLPProxyConfig reaches running Pods; each
//! Pod is its own node (its ACKs and NACKs show on the config's status). The Pod never waits on
//! something that cannot come: without a config that forwards, nothing is added but the
//! annotation.

use k8s_openapi::api::core::v1::{
    Capabilities, Container, EnvVar, EnvVarSource, ObjectFieldSelector, SecurityContext,
};
use nsight_api::NsightToolConfig;
use nsight_gateway::{cache::node_id, otlp_sidecar};

use crate::{render::gateway::ENVOY_UID, settings::XdsServer, world::OtlpProxy};

/// The annotation saying where the Pod's mirrored spans go, or why they do not.
pub const ANNOTATION: &str = "nvidia.com/nsight-otlp-mirroring";
/// The sidecar's container name.
pub const CONTAINER: &str = "nsight-otlp-proxy";
/// The agent's setting (`nsight-agent run --otlp-mirror`).
pub const ENDPOINT_ENV: &str = "NSIGHT_OTLP_MIRROR_ENDPOINT";

/// What mirroring an injected Pod gets.
#[derive(Debug, Clone, PartialEq)]
pub enum Mirroring {
    /// The tool config does not ask for it.
    Off,
    /// The sidecar of this OTLPProxyConfig, fed by this ADS server, carries the spans.
    Proxy(OtlpProxy, XdsServer),
    /// Asked for but not possible here: the reason goes on the Pod.
    Unavailable(String),
}

/// Mirroring for a Pod injected with `tool` in a namespace with `proxies` (sorted by name):
/// the first that names a collector, fed by the ADS server at `xds`.
pub fn choose(
    tool: &NsightToolConfig,
    proxies: &[OtlpProxy],
    xds: Option<&XdsServer>,
) -> Mirroring {
    if tool.otlp_mirroring_enabled != Some(true) {
        return Mirroring::Off;
    }
    if let Some(proxy) = proxies.iter().find(|p| p.forwarding) {
        return match xds {
            Some(xds) => Mirroring::Proxy(proxy.clone(), xds.clone()),
            None => Mirroring::Unavailable(
                "the injector webhook was started without --xds-host (the manager's xDS \
                 Service, which configures the OTLP proxy sidecar); the Helm chart sets it"
                    .into(),
            ),
        };
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
    format!("http://127.0.0.1:{}", otlp_sidecar::GRPC_PORT)
}

fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// The sidecar: Envoy bootstrapped from the ADS server at `xds` (the bootstrap inline, no
/// ConfigMap to wait for), named after its Pod (the downward API; the name is not known at
/// admission when the Pod has a generateName) and its OTLPProxyConfig; restarted on its own
/// (`restartPolicy: Always` in `initContainers`: started before the app containers, stopped
/// after them); unprivileged; no admin port (it shares the workload's network).
pub fn container(proxy: &OtlpProxy, xds: &XdsServer, image: &str) -> Container {
    let bootstrap = otlp_sidecar::bootstrap(&xds.host, xds.port).to_json();
    Container {
        name: CONTAINER.into(),
        image: Some(image.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(vec!["envoy".into()]),
        args: Some(vec![
            "--config-yaml".into(),
            bootstrap.to_string(),
            "--service-node".into(),
            node_id::otlp_sidecar("$(NSIGHT_POD_NAMESPACE)", "$(NSIGHT_POD_NAME)"),
            "--service-cluster".into(),
            proxy.name.clone(),
            "--disable-hot-restart".into(),
            "--log-level".into(),
            "warn".into(),
        ]),
        env: Some(vec![
            field_env("NSIGHT_POD_NAME", "metadata.name"),
            field_env("NSIGHT_POD_NAMESPACE", "metadata.namespace"),
        ]),
        restart_policy: Some("Always".into()),
        resources: proxy.resources.clone(),
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
        Mirroring::Proxy(p, _) => Some(format!(
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

    fn xds() -> XdsServer {
        XdsServer {
            host: "nsight-operator-xds.nsight.svc".into(),
            port: 18000,
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
        let xds = Some(xds());
        assert_eq!(choose(&tool(None), &proxies, xds.as_ref()), Mirroring::Off);
        assert_eq!(
            choose(&tool(Some(false)), &proxies, xds.as_ref()),
            Mirroring::Off
        );
        assert_eq!(
            choose(&tool(Some(true)), &proxies, xds.as_ref()),
            Mirroring::Proxy(proxy("p", true), xds.clone().unwrap())
        );
        // No ADS server to configure the sidecar: no sidecar, and the reason.
        let Mirroring::Unavailable(why) = choose(&tool(Some(true)), &proxies, None) else {
            panic!("no xDS server")
        };
        assert!(why.contains("--xds-host"), "{why}");
    }

    #[test]
    fn the_first_proxy_naming_a_collector_is_used_and_none_is_said() {
        let on = tool(Some(true));
        let xds = Some(xds());
        let choose = |proxies: &[OtlpProxy]| choose(&on, proxies, xds.as_ref());
        assert_eq!(
            choose(&[proxy("a", false), proxy("b", true), proxy("c", true)]),
            Mirroring::Proxy(proxy("b", true), xds.clone().unwrap())
        );
        let Mirroring::Unavailable(why) = choose(&[]) else {
            panic!("no proxy config")
        };
        assert!(why.contains("no OTLPProxyConfig"), "{why}");
        let Mirroring::Unavailable(why) = choose(&[proxy("a", false)]) else {
            panic!("no collector")
        };
        assert!(why.contains("(a)") && why.contains("collectorRef"), "{why}");
        assert!(note(&choose(&[])).unwrap().starts_with("off: "));
        assert_eq!(note(&Mirroring::Off), None);
    }

    #[test]
    fn the_sidecar_runs_envoy_fed_by_ads_as_its_pod_unprivileged() {
        let c = container(&proxy("otlp", true), &xds(), "envoy:test");
        assert_eq!(c.image.as_deref(), Some("envoy:test"));
        assert_eq!(c.restart_policy.as_deref(), Some("Always"));
        let args = c.args.unwrap();
        let after = |flag: &str| {
            let i = args.iter().position(|a| a == flag).unwrap();
            args[i + 1].clone()
        };
        let bootstrap: serde_json::Value = serde_json::from_str(&after("--config-yaml")).unwrap();
        assert_eq!(
            bootstrap["static_resources"]["clusters"][0]["load_assignment"]["endpoints"][0]
                ["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]["address"],
            "nsight-operator-xds.nsight.svc"
        );
        assert!(bootstrap.get("admin").is_none(), "no admin port in the Pod");
        assert_eq!(
            after("--service-node"),
            "nsight-otlp-sidecar/$(NSIGHT_POD_NAMESPACE)/$(NSIGHT_POD_NAME)"
        );
        assert_eq!(after("--service-cluster"), "otlp");
        let env: Vec<(String, String)> = c
            .env
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.value_from.unwrap().field_ref.unwrap().field_path))
            .collect();
        assert_eq!(
            env,
            [
                ("NSIGHT_POD_NAME".to_owned(), "metadata.name".to_owned()),
                (
                    "NSIGHT_POD_NAMESPACE".to_owned(),
                    "metadata.namespace".to_owned()
                )
            ]
        );
        let sc = c.security_context.unwrap();
        assert_eq!(sc.run_as_non_root, Some(true));
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(endpoint(), "http://127.0.0.1:4317");
    }
}
