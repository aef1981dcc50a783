//! The JSON patch (RFC 6902) that injects a Pod: the shared tools emptyDir, the init container
//! that copies the agent and the two libraries into it, and in every container the mount, the
//! exec hook (`LD_PRELOAD`) and the agent's environment (docs/agent.md), plus the annotations
//! recording the decision.
//!
//! ```text
//! init nsight-tools: <source>/nsight-agent init --to <tools> [--wait <coordinator>]
//!                   (copies nsight-agent, libnsight_hook.so, libnsight_nvtx.so; waits, bounded)
//! container c:      LD_PRELOAD=<tools>/libnsight_hook.so[:previous]  NSIGHT_AGENT_BIN=...
//!                   NSIGHT_INJECT_INCLUDE/EXCLUDE, mode, coordinator, tag, pod/ns/node/container
//! ```
//!
//! Pure: the same Pod, tool config and settings always give the same patch.

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodSpec,
    Volume, VolumeMount,
};
use nsight_api::NsightToolConfig;
use serde::Serialize;
use serde_json::{json, Value};

use crate::{settings::Settings, INJECTED_ANNOTATION, REASON_ANNOTATION, TOOLS_INIT_CONTAINER};

/// Name of the shared emptyDir volume.
pub const TOOLS_VOLUME: &str = "nsight-tools";

/// In `Settings::coordinator_url`, replaced by the Pod's namespace.
pub const NAMESPACE_PLACEHOLDER: &str = "{namespace}";

/// The patch operations injecting `pod` with `tool`.
pub fn patch(pod: &Pod, tool: &NsightToolConfig, source: &str, settings: &Settings) -> Vec<Value> {
    let mut ops = Vec::new();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let no_spec = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&no_spec);

    let mut volumes = vec![Volume {
        name: TOOLS_VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }];
    volumes.extend(tool.volumes.iter().cloned());
    append_all(&mut ops, "/spec/volumes", spec.volumes.is_some(), &volumes);

    let init = init_container(namespace, tool, settings);
    if spec.init_containers.as_ref().is_some_and(|c| !c.is_empty()) {
        // First, so that the tools are in place before anything else starts.
        ops.push(json!({"op": "add", "path": "/spec/initContainers/0", "value": to_value(&init)}));
    } else {
        ops.push(json!({"op": "add", "path": "/spec/initContainers", "value": [to_value(&init)]}));
    }

    for (i, container) in spec.containers.iter().enumerate() {
        let base = format!("/spec/containers/{i}");
        let mut mounts = vec![VolumeMount {
            name: TOOLS_VOLUME.into(),
            mount_path: settings.tools_dir.clone(),
            read_only: Some(true),
            ..VolumeMount::default()
        }];
        mounts.extend(tool.volume_mounts.iter().cloned());
        append_all(
            &mut ops,
            &format!("{base}/volumeMounts"),
            container.volume_mounts.is_some(),
            &mounts,
        );
        let hook = format!("{}/libnsight_hook.so", settings.tools_dir);
        let existing = container
            .env
            .iter()
            .flatten()
            .enumerate()
            .find(|(_, e)| e.name == "LD_PRELOAD");
        let mut env = Vec::new();
        match existing {
            Some((
                j,
                EnvVar {
                    value: Some(old), ..
                },
            )) if !old.is_empty() => ops.push(json!({
                "op": "replace", "path": format!("{base}/env/{j}/value"),
                "value": format!("{hook}:{old}"),
            })),
            _ => env.push(plain("LD_PRELOAD", &hook)),
        }
        env.extend(agent_env(container, namespace, tool, settings));
        append_all(
            &mut ops,
            &format!("{base}/env"),
            container.env.is_some(),
            &env,
        );
    }

    let annotations = [
        (INJECTED_ANNOTATION, tool.name.as_str()),
        (REASON_ANNOTATION, source),
    ];
    if pod.metadata.annotations.is_some() {
        for (k, v) in annotations {
            let path = format!("/metadata/annotations/{}", escape(k));
            ops.push(json!({"op": "add", "path": path, "value": v}));
        }
    } else {
        let map: serde_json::Map<String, Value> = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": map}));
    }
    ops
}

/// The environment the hook and the agent read (names from docs/agent.md).
fn agent_env(
    container: &Container,
    namespace: &str,
    tool: &NsightToolConfig,
    settings: &Settings,
) -> Vec<EnvVar> {
    let dir = &settings.tools_dir;
    let mut env = vec![
        plain("NSIGHT_AGENT_BIN", &format!("{dir}/nsight-agent")),
        plain("NSIGHT_NVTX_LIB", &format!("{dir}/libnsight_nvtx.so")),
        plain(
            "NSIGHT_INJECT_INCLUDE",
            &tool.injection_include_patterns.join("\n"),
        ),
    ];
    if !tool.injection_exclude_patterns.is_empty() {
        env.push(plain(
            "NSIGHT_INJECT_EXCLUDE",
            &tool.injection_exclude_patterns.join("\n"),
        ));
    }
    let mode = if tool.coordinator_mode() {
        "coordinator"
    } else {
        "launch"
    };
    env.push(plain("NSIGHT_AGENT_MODE", mode));
    if let (true, Some(url)) = (tool.coordinator_mode(), &settings.coordinator_url) {
        // Multi-tenant: `{namespace}` names the Pod's namespace (its own coordinator).
        env.push(plain(
            "NSIGHT_COORDINATOR_URL",
            &url.replace(NAMESPACE_PLACEHOLDER, namespace),
        ));
    }
    env.push(plain("NSIGHT_TAG", &settings.tag));
    if let Some(args) = &tool.nsight_tool_args {
        env.push(plain("NSIGHT_TOOL_ARGS", args));
    }
    env.push(field("NSIGHT_POD_NAME", "metadata.name"));
    env.push(field("NSIGHT_NAMESPACE", "metadata.namespace"));
    env.push(field("NODE_NAME", "spec.nodeName"));
    env.push(plain("NSIGHT_CONTAINER_NAME", &container.name));
    env.extend(tool.env.iter().cloned());
    env
}

/// The init container: `nsight-agent init` copies the tools (no shell in the agent image) and
/// waits, bounded, for the coordinator's agent channel when the Pod is in coordinator mode.
fn init_container(namespace: &str, tool: &NsightToolConfig, settings: &Settings) -> Container {
    let mut command = vec![
        format!("{}/nsight-agent", settings.source_dir),
        "init".into(),
        "--to".into(),
        settings.tools_dir.clone(),
    ];
    if let (true, Some(url)) = (tool.coordinator_mode(), &settings.coordinator_url) {
        command.push("--wait".into());
        command.push(url.replace(NAMESPACE_PLACEHOLDER, namespace));
    }
    Container {
        name: TOOLS_INIT_CONTAINER.into(),
        image: Some(settings.agent_image.clone()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(command),
        volume_mounts: Some(vec![VolumeMount {
            name: TOOLS_VOLUME.into(),
            mount_path: settings.tools_dir.clone(),
            ..VolumeMount::default()
        }]),
        ..Container::default()
    }
}

/// Adds `items` to the array at `path`: one `add .../-` each when it exists, else the array.
fn append_all<T: Serialize>(ops: &mut Vec<Value>, path: &str, exists: bool, items: &[T]) {
    if items.is_empty() {
        return;
    }
    if exists {
        for item in items {
            ops.push(json!({"op": "add", "path": format!("{path}/-"), "value": to_value(item)}));
        }
    } else {
        let all: Vec<Value> = items.iter().map(to_value).collect();
        ops.push(json!({"op": "add", "path": path, "value": all}));
    }
}

fn to_value<T: Serialize>(v: &T) -> Value {
    // Serializing k8s-openapi types into a Value cannot fail (string keys, no custom errors).
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn plain(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    }
}

fn field(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: path.into(),
            }),
            ..EnvVarSource::default()
        }),
    }
}

/// JSON pointer escaping of one reference token (RFC 6901).
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}
