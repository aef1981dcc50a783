//! The building blocks every component shares: its ServiceAccount (no API token mounted), its
//! Service (type, port, labels and annotations from the CR's `service` section) and its
//! single-container Deployment (image, resources and placement from the CR's [`Workload`]).
//!
//! Pure; the per-kind modules decide the container's command, ports, volumes and env.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy},
        core::v1::{
            Container, ContainerPort, EnvVar, HTTPGetAction, PodSecurityContext, PodSpec,
            PodTemplateSpec, Probe, SeccompProfile, SecurityContext, Service, ServiceAccount,
            ServicePort, ServiceSpec as CoreServiceSpec, Volume, VolumeMount,
        },
        networking::v1::{
            NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
            NetworkPolicySpec,
        },
    },
    apimachinery::pkg::{
        apis::meta::v1::{LabelSelector, ObjectMeta},
        util::intstr::IntOrString,
    },
};
use nsight_api::{ServiceSpec, Workload};

use super::{Component, Owner};

/// A named TCP port of a component.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Port {
    pub name: &'static str,
    pub port: u16,
}

/// The one container of a component.
#[derive(Clone, Debug, Default)]
pub(crate) struct Main {
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    /// The first port is the one `spec.service.port` overrides on the Service.
    pub ports: Vec<Port>,
    pub env: Vec<EnvVar>,
    pub volumes: Vec<Volume>,
    pub mounts: Vec<VolumeMount>,
    /// HTTP readiness/liveness path on the first port.
    pub health_path: Option<&'static str>,
    /// The user to run as when the image's default is root.
    pub run_as_user: Option<i64>,
}

pub(crate) fn service_account(owner: &Owner) -> ServiceAccount {
    ServiceAccount {
        metadata: owner.meta(owner.name.clone()),
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    }
}

/// The Service in front of `ports`; `spec.port` replaces the first port's service port (the
/// target stays the container port).
pub(crate) fn service(owner: &Owner, spec: Option<&ServiceSpec>, ports: &[Port]) -> Service {
    let mut meta = owner.meta(owner.name.clone());
    if let Some(spec) = spec {
        let labels = meta.labels.get_or_insert_with(BTreeMap::new);
        for (k, v) in &spec.labels {
            labels.entry(k.clone()).or_insert_with(|| v.clone());
        }
        if !spec.annotations.is_empty() {
            meta.annotations = Some(spec.annotations.clone());
        }
    }
    let service_ports = ports
        .iter()
        .enumerate()
        .map(|(i, p)| ServicePort {
            name: Some(p.name.into()),
            port: i32::from(match (i, spec.and_then(|s| s.port)) {
                (0, Some(port)) => port,
                _ => p.port,
            }),
            target_port: Some(IntOrString::String(p.name.into())),
            protocol: Some("TCP".into()),
            ..ServicePort::default()
        })
        .collect();
    Service {
        metadata: meta,
        spec: Some(CoreServiceSpec {
            type_: Some(
                spec.and_then(|s| s.type_.clone())
                    .unwrap_or_else(|| "ClusterIP".into()),
            ),
            selector: Some(owner.selector()),
            ports: Some(service_ports),
            ..CoreServiceSpec::default()
        }),
        status: None,
    }
}

/// One replica (the components keep state on local volumes), replaced with `Recreate`.
pub(crate) fn deployment(owner: &Owner, workload: &Workload, main: Main) -> Deployment {
    let probe = main
        .health_path
        .zip(main.ports.first())
        .map(|(path, port)| Probe {
            http_get: Some(HTTPGetAction {
                path: Some(path.into()),
                port: IntOrString::String(port.name.into()),
                ..HTTPGetAction::default()
            }),
            period_seconds: Some(10),
            ..Probe::default()
        });
    let container = Container {
        name: owner.component.binary().into(),
        image: Some(workload.image.clone().unwrap_or(main.image)),
        command: (!main.command.is_empty()).then_some(main.command),
        args: (!main.args.is_empty()).then_some(main.args),
        ports: Some(
            main.ports
                .iter()
                .map(|p| ContainerPort {
                    name: Some(p.name.into()),
                    container_port: i32::from(p.port),
                    protocol: Some("TCP".into()),
                    ..ContainerPort::default()
                })
                .collect(),
        ),
        env: (!main.env.is_empty()).then_some(main.env),
        volume_mounts: (!main.mounts.is_empty()).then_some(main.mounts),
        resources: workload.resources.clone(),
        readiness_probe: probe.clone(),
        liveness_probe: probe.map(|p| Probe {
            failure_threshold: Some(6),
            ..p
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            ..SecurityContext::default()
        }),
        ..Container::default()
    };
    let labels = owner.labels();
    Deployment {
        metadata: owner.meta(owner.name.clone()),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(owner.selector()),
                ..LabelSelector::default()
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                ..DeploymentStrategy::default()
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(owner.name.clone()),
                    automount_service_account_token: Some(false),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: main.run_as_user,
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".into(),
                            ..SeccompProfile::default()
                        }),
                        ..PodSecurityContext::default()
                    }),
                    containers: vec![container],
                    volumes: (!main.volumes.is_empty()).then_some(main.volumes),
                    node_selector: (!workload.node_selector.is_empty())
                        .then(|| workload.node_selector.clone()),
                    tolerations: (!workload.tolerations.is_empty())
                        .then(|| workload.tolerations.clone()),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

/// Ingress to `owner`'s Pods: `gateway_only` ports from the platform's gateway Pods (in any
/// namespace: a shared gateway routes its tenants), `open` ports from anywhere (the agent
/// channel, which has its own mutual TLS), nothing else. Defence in depth beside the gateway
/// token, where the network plugin enforces policies; the kubelet's probes come from the node,
/// which policies do not block.
pub(crate) fn network_policy(owner: &Owner, gateway_only: &[Port], open: &[Port]) -> NetworkPolicy {
    let ports = |ports: &[Port]| {
        Some(
            ports
                .iter()
                .map(|p| NetworkPolicyPort {
                    port: Some(IntOrString::String(p.name.into())),
                    protocol: Some("TCP".into()),
                    ..NetworkPolicyPort::default()
                })
                .collect(),
        )
    };
    let gateways = NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector::default()),
        pod_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([
                (
                    super::LABEL_COMPONENT.into(),
                    Component::Gateway.label().into(),
                ),
                (super::LABEL_MANAGED_BY.into(), super::MANAGER.into()),
            ])),
            ..LabelSelector::default()
        }),
        ..NetworkPolicyPeer::default()
    };
    let mut ingress = vec![NetworkPolicyIngressRule {
        from: Some(vec![gateways]),
        ports: ports(gateway_only),
    }];
    if !open.is_empty() {
        ingress.push(NetworkPolicyIngressRule {
            from: None,
            ports: ports(open),
        });
    }
    NetworkPolicy {
        metadata: owner.meta(owner.name.clone()),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(owner.selector()),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(ingress),
            ..NetworkPolicySpec::default()
        }),
    }
}

/// An emptyDir volume and its mount.
pub(crate) fn scratch(name: &str, path: &str) -> (Volume, VolumeMount) {
    (
        Volume {
            name: name.into(),
            empty_dir: Some(Default::default()),
            ..Volume::default()
        },
        mount(name, path),
    )
}

pub(crate) fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        ..VolumeMount::default()
    }
}

pub(crate) fn read_only(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        read_only: Some(true),
        ..mount(name, path)
    }
}
