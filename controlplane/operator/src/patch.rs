//! The JSON patch (RFC 6902) that injects a Pod: the shared tools emptyDir, the init container
//! that copies the agent and the two libraries into it, and in every container the mount, the
//! exec hook (`LD_PRELOAD`) and the agent's environment (docs/agent.md), plus the annotations
//! recording the decision.
//!
//! ```text
//! init nsight-tools: <source>/nsight-agent init --to <tools> [--wait <coordinator>]
//!                   (copies nsight-agent, libnsight_hook.so, libnsight_nvtx.so; waits, bounded)
//! init nsight-nsys (backend nsys from an image, see `nsys_volume`): copies nsys into the tools
//! init nsight-otlp-proxy (otlpMirroringEnabled, see `otlp_sidecar`): Envoy, restartPolicy Always
//! container c:      LD_PRELOAD=<tools>/libnsight_hook.so[:previous]  NSIGHT_AGENT_BIN=...
//!                   NSIGHT_INJECT_INCLUDE/EXCLUDE, mode, coordinator, tag, pod/ns/node/container
//!                   [NSIGHT_AGENT_BACKEND] [NSIGHT_NSYS] [NSIGHT_OTLP_MIRROR_ENDPOINT=http://127.0.0.1:4317]
//! ```
//!
//! Pure: the same Pod, tool config and settings always give the same patch.

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, KeyToPath, ObjectFieldSelector, Pod,
    PodSpec, SecretVolumeSource, Volume, VolumeMount,
};
use nsight_api::{NsightToolConfig, SecretRef};
use serde::Serialize;
use serde_json::{json, Value};

use crate::{
    agent_tls,
    nsys_volume::{self, Nsys},
    otlp_sidecar::{self, Mirroring},
    render::storage::STORAGE_CONFIG_KEY,
    settings::Settings,
    world::{PodStorage, StorageSecrets},
    INJECTED_ANNOTATION, REASON_ANNOTATION, TOOLS_INIT_CONTAINER,
};

/// The annotation saying where the Pod's agents store reports, or why they cannot.
pub const STORAGE_ANNOTATION: &str = "nvidia.com/nsight-storage";
/// The volume with the storage config, and where it is mounted read-only in each container.
const STORAGE_VOLUME: &str = "nsight-storage-config";
const STORAGE_DIR: &str = "/etc/nsight/storage";
/// Where a Pod with local storage keeps its reports.
pub const LOCAL_REPORTS_DIR: &str = "/nsight-reports";
const LOCAL_REPORTS_VOLUME: &str = "nsight-reports";

/// Where an injected Pod's agents store their reports.
#[derive(Debug, Clone, PartialEq)]
pub enum ReportStorage {
    /// The `storage-config.yaml` in this Secret of the Pod's namespace (from this config).
    /// `copied_from`: the Secret is the cluster namespace's, copied into the Pod's namespace
    /// by the webhook (single-tenant; see `secret_copy`).
    Secret {
        config: String,
        secret: SecretRef,
        copied_from: Option<String>,
    },
    /// `storage_type: local` (this config): reports stay in the Pod, in an emptyDir at
    /// [`LOCAL_REPORTS_DIR`] of every container (`kubectl cp` them out).
    Local { config: String },
    /// None: the reason goes on the Pod; its agents run their programs unprofiled and say why.
    Unavailable(String),
}

/// The tool config's `cloudStorageConfigRef` in the namespace's storage configs; without a
/// reference, the namespace's only storage config with a Secret (what auto-provisioning
/// creates), else the cluster namespace's only one (a single-tenant install: its Secret is
/// copied into the Pod's namespace).
pub fn report_storage(
    tool: &NsightToolConfig,
    storage: &StorageSecrets,
    cluster: Option<&(String, std::sync::Arc<StorageSecrets>)>,
) -> ReportStorage {
    match &tool.cloud_storage_config_ref {
        Some(name) => match storage.get(name) {
            Some(PodStorage::Secret(secret)) => ReportStorage::Secret {
                config: name.clone(),
                secret: secret.clone(),
                copied_from: None,
            },
            Some(PodStorage::Local) => ReportStorage::Local {
                config: name.clone(),
            },
            Some(PodStorage::None) => ReportStorage::Unavailable(format!(
                "NsightCloudStorageConfig {name} is disabled or names no Secret"
            )),
            None => ReportStorage::Unavailable(format!(
                "NsightCloudStorageConfig {name} (cloudStorageConfigRef of tool config {}) is not in this namespace",
                tool.name
            )),
        },
        None => match only_one(tool, storage, "this namespace") {
            Err(None) => match cluster {
                Some((namespace, cluster_storage)) => {
                    match only_one(tool, cluster_storage, namespace) {
                        Ok(ReportStorage::Secret { config, secret, .. }) => ReportStorage::Secret {
                            config: format!("{namespace}/{config}"),
                            secret,
                            copied_from: Some(namespace.clone()),
                        },
                        Ok(other) | Err(Some(other)) => other,
                        Err(None) => ReportStorage::Unavailable(format!(
                            "no NsightCloudStorageConfig in this namespace or in {namespace}"
                        )),
                    }
                }
                None => ReportStorage::Unavailable(
                    "no NsightCloudStorageConfig in this namespace".into(),
                ),
            },
            Ok(found) | Err(Some(found)) => found,
        },
    }
}

/// The only usable storage config of `storage` (`Ok`), a reason (`Err(Some)`), or none at all
/// (`Err(None)`).
fn only_one(
    tool: &NsightToolConfig,
    storage: &StorageSecrets,
    place: &str,
) -> Result<ReportStorage, Option<ReportStorage>> {
    let mut usable = storage
        .iter()
        .filter(|(_, s)| !matches!(s, PodStorage::None));
    match (usable.next(), usable.next()) {
        (Some((name, PodStorage::Secret(secret))), None) => Ok(ReportStorage::Secret {
            config: name.clone(),
            secret: secret.clone(),
            copied_from: None,
        }),
        (Some((name, _)), None) => Ok(ReportStorage::Local {
            config: name.clone(),
        }),
        (None, _) => Err(None),
        (Some(_), Some(_)) => Err(Some(ReportStorage::Unavailable(format!(
            "several NsightCloudStorageConfigs in {place}: name one in tool config {}'s cloudStorageConfigRef",
            tool.name
        )))),
    }
}

/// Name of the shared emptyDir volume.
pub const TOOLS_VOLUME: &str = "nsight-tools";

/// In `Settings::coordinator_url`, replaced by the Pod's namespace.
pub const NAMESPACE_PLACEHOLDER: &str = "{namespace}";

/// The patch operations injecting `pod` with `tool`.
pub fn patch(
    pod: &Pod,
    tool: &NsightToolConfig,
    source: &str,
    settings: &Settings,
    storage: &ReportStorage,
    mirroring: &Mirroring,
) -> Vec<Value> {
    let mut ops = Vec::new();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let no_spec = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&no_spec);
    let nsys = nsys_volume::choose(tool, settings);

    let mut volumes = vec![Volume {
        name: TOOLS_VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }];
    volumes.extend(tool.volumes.iter().cloned());
    volumes.extend(nsys_volume::volume(&nsys));
    if matches!(storage, ReportStorage::Local { .. }) {
        volumes.push(Volume {
            name: LOCAL_REPORTS_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        });
    }
    if let ReportStorage::Secret { secret, .. } = storage {
        volumes.push(Volume {
            name: STORAGE_VOLUME.into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.name.clone()),
                items: Some(vec![KeyToPath {
                    key: secret
                        .key
                        .clone()
                        .unwrap_or_else(|| STORAGE_CONFIG_KEY.into()),
                    path: STORAGE_CONFIG_KEY.into(),
                    ..KeyToPath::default()
                }]),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    let tls_secret = agent_coordinator_url(namespace, tool, settings)
        .as_deref()
        .and_then(agent_tls::secret_for);
    if let Some(secret) = &tls_secret {
        volumes.push(agent_tls::volume(secret));
    }
    append_all(&mut ops, "/spec/volumes", spec.volumes.is_some(), &volumes);

    // First the tools, so that they are in place before anything else starts (nsys from an
    // image is copied with their agent); then the OTLP proxy sidecar (started before the app
    // containers, stopped after them).
    let mut init = vec![to_value(&init_container(namespace, tool, settings))];
    init.extend(nsys_volume::init_container(&nsys, settings).map(|c| to_value(&c)));
    if let Mirroring::Proxy(proxy, xds) = mirroring {
        init.push(to_value(&otlp_sidecar::container(
            proxy,
            xds,
            &settings.otlp_proxy_image,
        )));
    }
    if spec.init_containers.as_ref().is_some_and(|c| !c.is_empty()) {
        for (i, c) in init.into_iter().enumerate() {
            ops.push(json!({"op": "add", "path": format!("/spec/initContainers/{i}"), "value": c}));
        }
    } else {
        ops.push(json!({"op": "add", "path": "/spec/initContainers", "value": init}));
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
        mounts.extend(nsys_volume::mount(&nsys));
        if matches!(storage, ReportStorage::Secret { .. }) {
            mounts.push(VolumeMount {
                name: STORAGE_VOLUME.into(),
                mount_path: STORAGE_DIR.into(),
                read_only: Some(true),
                ..VolumeMount::default()
            });
        }
        if matches!(storage, ReportStorage::Local { .. }) {
            mounts.push(VolumeMount {
                name: LOCAL_REPORTS_VOLUME.into(),
                mount_path: LOCAL_REPORTS_DIR.into(),
                ..VolumeMount::default()
            });
        }
        if tls_secret.is_some() {
            mounts.push(agent_tls::mount());
        }
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
        env.extend(agent_env(container, namespace, tool, settings, &nsys));
        match storage {
            ReportStorage::Secret { .. } => env.push(plain(
                "NSIGHT_CLOUD_STORAGE_CONFIG_FILE",
                &format!("{STORAGE_DIR}/{STORAGE_CONFIG_KEY}"),
            )),
            ReportStorage::Local { .. } => env.push(plain("NSIGHT_STORAGE_DIR", LOCAL_REPORTS_DIR)),
            ReportStorage::Unavailable(_) => {}
        }
        if tls_secret.is_some() {
            env.push(plain(agent_tls::ENV, agent_tls::DIR));
        }
        if matches!(mirroring, Mirroring::Proxy(..)) {
            env.push(plain(otlp_sidecar::ENDPOINT_ENV, &otlp_sidecar::endpoint()));
        }
        append_all(
            &mut ops,
            &format!("{base}/env"),
            container.env.is_some(),
            &env,
        );
    }

    let storage_note = match storage {
        ReportStorage::Secret {
            config,
            secret,
            copied_from,
        } => match copied_from {
            None => format!("NsightCloudStorageConfig {config} (Secret {})", secret.name),
            Some(from) => format!(
                "NsightCloudStorageConfig {config} (Secret {} copied from {from})",
                secret.name
            ),
        },
        ReportStorage::Local { config } => {
            format!("NsightCloudStorageConfig {config} (local: {LOCAL_REPORTS_DIR} in the Pod)")
        }
        ReportStorage::Unavailable(why) => format!("none: {why}"),
    };
    let mirroring_note = otlp_sidecar::note(mirroring);
    let nsys_note = nsys_volume::note(&nsys);
    let mut annotations = vec![
        (INJECTED_ANNOTATION, tool.name.as_str()),
        (REASON_ANNOTATION, source),
        (STORAGE_ANNOTATION, storage_note.as_str()),
    ];
    if let Some(note) = &mirroring_note {
        annotations.push((otlp_sidecar::ANNOTATION, note.as_str()));
    }
    if let Some(note) = &nsys_note {
        annotations.push((nsys_volume::ANNOTATION, note.as_str()));
    }
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

/// The environment the hook and the agent read (names from docs/agent.md). The tool config's
/// own `env` comes last, so that it wins.
fn agent_env(
    container: &Container,
    namespace: &str,
    tool: &NsightToolConfig,
    settings: &Settings,
    nsys: &Nsys,
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
    if let Some(url) = agent_coordinator_url(namespace, tool, settings) {
        env.push(plain("NSIGHT_COORDINATOR_URL", &url));
    }
    env.push(plain("NSIGHT_TAG", &settings.tag));
    if let Some(args) = &tool.nsight_tool_args {
        env.push(plain("NSIGHT_TOOL_ARGS", args));
    }
    if let Some(backend) = tool.backend {
        env.push(plain(nsight_api::AGENT_BACKEND_ENV, backend.as_str()));
    }
    if let Some(path) = nsys_volume::nsys_path(nsys, settings) {
        env.push(plain(nsys_volume::NSYS_ENV, &path));
    }
    env.push(field("NSIGHT_POD_NAME", "metadata.name"));
    env.push(field("NSIGHT_NAMESPACE", "metadata.namespace"));
    env.push(field("NODE_NAME", "spec.nodeName"));
    env.push(plain("NSIGHT_CONTAINER_NAME", &container.name));
    env.extend(tool.env.iter().cloned());
    env
}

/// The coordinator URL agents of a Pod in `namespace` connect to (coordinator mode only).
/// Multi-tenant: `{namespace}` names the Pod's namespace (its own coordinator).
fn agent_coordinator_url(
    namespace: &str,
    tool: &NsightToolConfig,
    settings: &Settings,
) -> Option<String> {
    match (tool.coordinator_mode(), &settings.coordinator_url) {
        (true, Some(url)) => Some(url.replace(NAMESPACE_PLACEHOLDER, namespace)),
        _ => None,
    }
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

#[cfg(test)]
mod storage_tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn tool(reference: Option<&str>) -> NsightToolConfig {
        NsightToolConfig {
            name: "t".into(),
            cloud_storage_config_ref: reference.map(str::to_owned),
            ..NsightToolConfig::default()
        }
    }

    fn secret_ref(name: &str) -> SecretRef {
        SecretRef {
            name: name.into(),
            key: Some("storage-config.yaml".into()),
        }
    }

    fn secret(name: &str) -> PodStorage {
        PodStorage::Secret(secret_ref(name))
    }

    #[test]
    fn a_named_storage_config_is_mounted_and_a_missing_one_is_said() {
        let storage: StorageSecrets = [
            ("team".to_owned(), secret("team-credentials")),
            ("local".to_owned(), PodStorage::Local),
            ("off".to_owned(), PodStorage::None),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            report_storage(&tool(Some("team")), &storage, None),
            ReportStorage::Secret {
                config: "team".into(),
                secret: secret_ref("team-credentials"),
                copied_from: None,
            }
        );
        let ReportStorage::Unavailable(why) = report_storage(&tool(Some("gone")), &storage, None)
        else {
            panic!("a missing config cannot be mounted");
        };
        assert!(
            why.contains("gone") && why.contains("not in this namespace"),
            "{why}"
        );
        assert_eq!(
            report_storage(&tool(Some("local")), &storage, None),
            ReportStorage::Local {
                config: "local".into()
            }
        );
        assert!(matches!(
            report_storage(&tool(Some("off")), &storage, None),
            ReportStorage::Unavailable(_)
        ));
    }

    #[test]
    fn without_a_reference_the_only_storage_config_is_used() {
        let one: StorageSecrets = [("only".to_owned(), secret("s"))].into_iter().collect();
        assert!(matches!(
            report_storage(&tool(None), &one, None),
            ReportStorage::Secret { .. }
        ));
        let none = StorageSecrets::new();
        assert!(matches!(
            report_storage(&tool(None), &none, None),
            ReportStorage::Unavailable(_)
        ));
        let two: StorageSecrets = [("a".to_owned(), secret("a")), ("b".to_owned(), secret("b"))]
            .into_iter()
            .collect();
        let ReportStorage::Unavailable(why) = report_storage(&tool(None), &two, None) else {
            panic!("two configs are ambiguous");
        };
        assert!(why.contains("cloudStorageConfigRef"), "{why}");
        // Single-tenant: the release namespace's only storage config, copied.
        let cluster = ("nsight".to_owned(), std::sync::Arc::new(one.clone()));
        assert_eq!(
            report_storage(&tool(None), &none, Some(&cluster)),
            ReportStorage::Secret {
                config: "nsight/only".into(),
                secret: secret_ref("s"),
                copied_from: Some("nsight".into()),
            }
        );
        // The namespace's own comes first.
        assert!(matches!(
            report_storage(&tool(None), &one, Some(&cluster)),
            ReportStorage::Secret {
                copied_from: None,
                ..
            }
        ));
        let ReportStorage::Unavailable(why) = report_storage(
            &tool(None),
            &none,
            Some(&(
                "nsight".to_owned(),
                std::sync::Arc::new(StorageSecrets::new()),
            )),
        ) else {
            panic!("nothing to copy");
        };
        assert!(why.contains("or in nsight"), "{why}");
    }

    #[test]
    fn local_storage_keeps_reports_in_a_writable_directory_of_the_pod() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "team"},
            "spec": {"containers": [{"name": "main", "image": "x"}]},
        }))
        .unwrap();
        let only: StorageSecrets = [("mine".to_owned(), PodStorage::Local)]
            .into_iter()
            .collect();
        let storage = report_storage(&tool(None), &only, None);
        assert_eq!(
            storage,
            ReportStorage::Local {
                config: "mine".into()
            }
        );
        let ops = patch(
            &pod,
            &tool(None),
            "label",
            &Settings::default(),
            &storage,
            &Mirroring::Off,
        );
        let text = serde_json::to_string(&ops).unwrap();
        assert!(
            text.contains(r#""name":"NSIGHT_STORAGE_DIR","value":"/nsight-reports""#),
            "{text}"
        );
        assert!(
            text.contains(r#""mountPath":"/nsight-reports","name":"nsight-reports""#),
            "{text}"
        );
        assert!(!text.contains("NSIGHT_CLOUD_STORAGE_CONFIG_FILE"), "{text}");
        assert!(text.contains("local: /nsight-reports in the Pod"), "{text}");
    }

    #[test]
    fn the_patch_mounts_the_secret_and_names_the_file() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "team"},
            "spec": {"containers": [{"name": "main", "image": "x"}]},
        }))
        .unwrap();
        let storage = ReportStorage::Secret {
            config: "team".into(),
            secret: secret_ref("team-credentials"),
            copied_from: None,
        };
        let ops = patch(
            &pod,
            &tool(None),
            "label",
            &Settings::default(),
            &storage,
            &Mirroring::Off,
        );
        let text = serde_json::to_string(&ops).unwrap();
        assert!(
            text.contains(r#""secretName":"team-credentials""#),
            "{text}"
        );
        assert!(
            text.contains("/etc/nsight/storage/storage-config.yaml"),
            "{text}"
        );
        assert!(text.contains("NsightCloudStorageConfig team (Secret team-credentials)"));
        let none = patch(
            &pod,
            &tool(None),
            "label",
            &Settings::default(),
            &ReportStorage::Unavailable("no NsightCloudStorageConfig in this namespace".into()),
            &Mirroring::Off,
        );
        let text = serde_json::to_string(&none).unwrap();
        assert!(!text.contains("NSIGHT_CLOUD_STORAGE_CONFIG_FILE"), "{text}");
        assert!(text.contains("none: no NsightCloudStorageConfig"), "{text}");
    }

    #[test]
    fn a_mirroring_pod_gets_the_sidecar_after_the_tools_and_the_endpoint() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "team"},
            "spec": {
                "initContainers": [{"name": "setup", "image": "x"}],
                "containers": [{"name": "main", "image": "x"}, {"name": "side", "image": "y"}],
            },
        }))
        .unwrap();
        let proxy = crate::world::OtlpProxy {
            name: "otlp".into(),
            forwarding: true,
            resources: None,
        };
        let ops = patch(
            &pod,
            &tool(None),
            "label",
            &Settings::default(),
            &ReportStorage::Local {
                config: "team".into(),
            },
            &Mirroring::Proxy(
                proxy,
                crate::settings::XdsServer {
                    host: "nsight-operator-xds.nsight.svc".into(),
                    port: 18000,
                },
            ),
        );
        let at = |path: &str| {
            ops.iter()
                .find(|op| op["path"] == path)
                .unwrap_or_else(|| panic!("no op at {path}: {ops:?}"))["value"]
                .clone()
        };
        assert_eq!(at("/spec/initContainers/0")["name"], TOOLS_INIT_CONTAINER);
        let sidecar = at("/spec/initContainers/1");
        assert_eq!(sidecar["name"], otlp_sidecar::CONTAINER);
        assert_eq!(sidecar["restartPolicy"], "Always");
        let text = serde_json::to_string(&ops).unwrap();
        assert_eq!(
            text.matches(r#""NSIGHT_OTLP_MIRROR_ENDPOINT","value":"http://127.0.0.1:4317""#)
                .count(),
            2,
            "every container's agent: {text}"
        );
        assert_eq!(
            sidecar["args"][5], "otlp",
            "its OTLPProxyConfig names its node cluster"
        );
        assert!(
            !text.contains("configMap"),
            "the bootstrap is inline: {text}"
        );
        assert!(
            text.contains("OTLPProxyConfig otlp (sidecar nsight-otlp-proxy"),
            "{text}"
        );

        // Asked for but impossible: no sidecar, no endpoint, the reason on the Pod.
        let ops = patch(
            &pod,
            &tool(None),
            "label",
            &Settings::default(),
            &ReportStorage::Local {
                config: "team".into(),
            },
            &Mirroring::Unavailable("no OTLPProxyConfig".into()),
        );
        let text = serde_json::to_string(&ops).unwrap();
        assert!(!text.contains("nsight-otlp-proxy") && !text.contains("MIRROR_ENDPOINT"));
        assert!(text.contains("off: no OTLPProxyConfig"), "{text}");
    }

    #[test]
    fn an_nsys_pod_gets_the_copy_after_the_tools_and_the_backend_in_every_container() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "team"},
            "spec": {"containers": [{"name": "main", "image": "x"}, {"name": "side", "image": "y"}]},
        }))
        .unwrap();
        let nsys_tool = NsightToolConfig {
            backend: Some(nsight_api::ProfilerBackend::Nsys),
            nsight_tool_args: Some("-t cuda,nvtx".into()),
            ..tool(None)
        };
        let image = Settings {
            nsys: Some(nsight_api::chart::NsysSource::Image {
                image: "registry.example/nsys:2025.3".into(),
                dir: "/opt/nvidia/nsight-systems".into(),
            }),
            ..Settings::default()
        };
        let local = ReportStorage::Local {
            config: "team".into(),
        };
        let ops = patch(&pod, &nsys_tool, "label", &image, &local, &Mirroring::Off);
        let init = &ops
            .iter()
            .find(|op| op["path"] == "/spec/initContainers")
            .unwrap()["value"];
        assert_eq!(init[0]["name"], TOOLS_INIT_CONTAINER);
        assert_eq!(init[1]["name"], nsys_volume::INIT_CONTAINER);
        let text = serde_json::to_string(&ops).unwrap();
        for env in [
            r#""NSIGHT_AGENT_BACKEND","value":"nsys""#,
            r#""NSIGHT_NSYS","value":"/nsight-tools/nsys""#,
        ] {
            assert_eq!(
                text.matches(env).count(),
                2,
                "{env} in every container: {text}"
            );
        }
        assert!(
            text.contains("/opt/nvidia/nsight-systems of image registry.example/nsys:2025.3"),
            "{text}"
        );

        // From a node directory: a volume and a read-only mount in each container.
        let host = Settings {
            nsys: Some(nsight_api::chart::NsysSource::HostPath(
                "/opt/nvidia/nsight-systems/2025.3.1".into(),
            )),
            ..Settings::default()
        };
        let ops = patch(&pod, &nsys_tool, "label", &host, &local, &Mirroring::Off);
        let text = serde_json::to_string(&ops).unwrap();
        assert!(text.contains(r#""hostPath":{"path":"/opt/nvidia/nsight-systems/2025.3.1","type":"DirectoryOrCreate"}"#), "{text}");
        assert_eq!(
            text.matches(r#""mountPath":"/opt/nsight-nsys""#).count(),
            2,
            "{text}"
        );
        assert!(!text.contains(nsys_volume::INIT_CONTAINER) || !text.contains("install-nsys"));

        // Not asked for: nothing of nsys, even where the cluster has one.
        let ops = patch(&pod, &tool(None), "label", &host, &local, &Mirroring::Off);
        let text = serde_json::to_string(&ops).unwrap();
        assert!(!text.contains("nsys"), "{text}");
    }
}
