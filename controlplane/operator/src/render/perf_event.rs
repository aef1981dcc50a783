//! The manager's cluster-wide `machineConfig` setting -> the ONE DaemonSet
//! `nsight-operator-perf-event` in the operator's namespace: on every (selected) node, a
//! privileged init container writes `kernel.perf_event_paranoid` (a global, not namespaced,
//! sysctl) and a pause container keeps the Pod, so the value is written again when a node
//! (re)joins.
//!
//! One setting for the cluster, not one per NsightOperatorProfileConfig: the value is per node,
//! so per-config DaemonSets would fight over the same nodes (and 1,000 configs would mean 1,000
//! privileged DaemonSets). `None` (chart `machineConfig: null`): nothing (the cluster manages
//! the setting out of band). Pure; the manager applies or deletes the result.

use k8s_openapi::{
    api::{
        apps::v1::{DaemonSet, DaemonSetSpec},
        core::v1::{Capabilities, Container, PodSpec, PodTemplateSpec, SecurityContext},
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta},
};

use super::{labels, Component, Desired, Object, LABEL_INSTANCE, LABEL_NAME};
use crate::settings::MachineConfig;

/// The `app.kubernetes.io/name` of the DaemonSet's Pods.
pub const NAME: &str = "perf-event-paranoid";
/// The DaemonSet (one per cluster, in the operator's namespace).
pub const DAEMON_SET_NAME: &str = "nsight-operator-perf-event";
/// The `nvidia.com/nsight-owner-kind` label: no custom resource owns it, the manager's
/// setting does (so no custom resource's garbage collection selects it).
pub const OWNER_KIND: &str = "OperatorSetting";
/// The `app.kubernetes.io/instance` label.
pub const INSTANCE: &str = "machine-config";
/// The image of the init container (it needs `sh`) unless `machineConfig.image` says otherwise.
pub const DEFAULT_IMAGE: &str = "docker.io/library/busybox:1.37.0";
/// What keeps the Pod running after the write.
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// The file the init container writes.
pub const SYSCTL_PATH: &str = "/proc/sys/kernel/perf_event_paranoid";
/// The annotation carrying the value written.
pub const VALUE_ANNOTATION: &str = "nvidia.com/nsight-perf-event-paranoid";

/// The DaemonSet of `machine` in `namespace` (the operator's); nothing for `None`.
pub fn render(machine: Option<&MachineConfig>, namespace: &str) -> Desired {
    let Some(machine) = machine else {
        return Desired::default();
    };
    Desired {
        objects: vec![Object::DaemonSet(Box::new(daemon_set(machine, namespace)))],
    }
}

fn daemon_set(machine: &MachineConfig, namespace: &str) -> DaemonSet {
    let value = machine.perf_event_paranoid;
    let init = Container {
        name: "write-sysctl".into(),
        image: Some(
            machine
                .image
                .clone()
                .unwrap_or_else(|| DEFAULT_IMAGE.into()),
        ),
        command: Some(vec!["sh".into(), "-c".into()]),
        args: Some(vec![format!(
            "echo {value} > {SYSCTL_PATH} && echo \"perf_event_paranoid=$(cat {SYSCTL_PATH})\""
        )]),
        security_context: Some(SecurityContext {
            // /proc/sys is read-only in unprivileged containers.
            privileged: Some(true),
            run_as_user: Some(0),
            ..SecurityContext::default()
        }),
        ..Container::default()
    };
    let pause = Container {
        name: "pause".into(),
        image: Some(PAUSE_IMAGE.into()),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            run_as_user: Some(65535),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Capabilities::default()
            }),
            ..SecurityContext::default()
        }),
        ..Container::default()
    };
    let labels = labels(Component::PerfEvent, OWNER_KIND, INSTANCE);
    let selector = [LABEL_NAME, LABEL_INSTANCE]
        .into_iter()
        .filter_map(|k| labels.get(k).map(|v| (k.to_owned(), v.clone())))
        .collect();
    DaemonSet {
        metadata: ObjectMeta {
            name: Some(DAEMON_SET_NAME.into()),
            namespace: Some(namespace.into()),
            labels: Some(labels.clone()),
            annotations: Some([(VALUE_ANNOTATION.to_owned(), value.to_string())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(selector),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    automount_service_account_token: Some(false),
                    init_containers: Some(vec![init]),
                    containers: vec![pause],
                    node_selector: (!machine.node_selector.is_empty())
                        .then(|| machine.node_selector.clone()),
                    tolerations: (!machine.tolerations.is_empty())
                        .then(|| machine.tolerations.clone()),
                    ..PodSpec::default()
                }),
            },
            ..DaemonSetSpec::default()
        }),
        status: None,
    }
}
