//! Chart values of the operator's own Pod (manager, webhook, injection defaults) and of the
//! control-plane resources the chart renders (coordinator, analysis, storage, UI, tenant
//! operator, OTLP collector and proxy).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PodSecurityContext, ResourceRequirements, SecurityContext, Toleration,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::NsightToolConfig;

/// Single-tenant (default): one control plane in the release namespace, for every namespace.
/// Multi-tenant: none there; each namespace has its own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MultiTenant {
    pub enabled: bool,
    /// Multi-tenant only: the first profiled Pod admitted in a namespace creates the
    /// namespace's control plane (each kind only when the namespace has none).
    pub auto_provision: bool,
}

/// The operator's manager container.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manager {
    #[schemars(range(min = 1))]
    pub replicas: u32,
    /// Watch one namespace only; empty: the whole cluster.
    pub watch_namespace: String,
    pub metrics_port: u16,
    pub xds_port: u16,
    pub resources: ResourceRequirements,
    /// The operator Pod's security context.
    pub pod_security_context: PodSecurityContext,
    /// Each operator container's security context.
    pub security_context: SecurityContext,
}

/// The injector webhook container and its configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Webhook {
    pub enabled: bool,
    pub port: u16,
    pub failure_policy: FailurePolicy,
    #[schemars(range(min = 1, max = 30))]
    pub timeout_seconds: u32,
    /// A `kubernetes.io/tls` Secret with the serving certificate (with `caBundle`, or made by
    /// cert-manager); empty with `caBundle` empty: the webhook issues its own.
    pub tls_secret_name: String,
    /// The base64 PEM CA that signed `tlsSecretName`'s certificate.
    pub ca_bundle: String,
    pub cert_manager: CertManager,
    /// The coordinator's agent channel given to injected agents; `{namespace}` is the Pod's.
    /// Empty: the coordinator this chart renders (multi-tenant: the namespace's own).
    pub coordinator_url: String,
    /// The profiling tag of injected agents.
    pub tag: String,
    pub resources: ResourceRequirements,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FailurePolicy {
    Ignore,
    Fail,
}

/// The webhook's serving certificate from cert-manager: a `Certificate` for the webhook's
/// Service and the CA injected into the webhook configuration by cert-manager's CA injector.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CertManager {
    pub enabled: bool,
    /// The cert-manager issuer (`{name, kind: Issuer|ClusterIssuer}`).
    pub issuer_ref: IssuerRef,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssuerRef {
    pub name: String,
    pub kind: String,
}

/// `nsight-injector`: how labelled Pods are profiled when no NsightOperatorProfileConfig of
/// their namespace says otherwise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Injector {
    pub nsight_tool_config: InjectorToolConfig,
    /// Where injected Pods whose tool config asks for Nsight Systems (`backend: nsys`) get
    /// `nsys` from (flag `--nsys` of the webhook).
    #[serde(default)]
    pub nsys: NsysValues,
}

/// `nsight-injector.nsys`: the Nsight Systems installation the cluster provides, from a node
/// directory or from an image. Neither: a Pod asking for nsys uses `nsys` on its own PATH.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NsysValues {
    /// A directory on the GPU nodes holding Nsight Systems (e.g.
    /// `/opt/nvidia/nsight-systems/2025.3.1`), mounted read-only into the Pods.
    #[serde(default)]
    pub host_path: String,
    /// An image holding Nsight Systems under `imageDir`; an init container copies it into
    /// the Pod's tools volume. It must have glibc (the agent does the copy).
    #[serde(default)]
    pub image: String,
    /// Where `image` holds Nsight Systems.
    #[serde(default = "default_nsys_image_dir")]
    pub image_dir: String,
}

fn default_nsys_image_dir() -> String {
    "/opt/nvidia/nsight-systems".into()
}

impl Default for NsysValues {
    fn default() -> Self {
        Self {
            host_path: String::new(),
            image: String::new(),
            image_dir: default_nsys_image_dir(),
        }
    }
}

/// Where injected Pods get Nsight Systems from ([`NsysValues`], checked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NsysSource {
    /// A directory of every GPU node, mounted read-only.
    HostPath(String),
    /// `dir` of `image`, copied into the tools volume by an init container.
    Image { image: String, dir: String },
}

impl NsysValues {
    /// The source these values name, or why they are wrong (both set, a relative path).
    pub fn source(&self) -> Result<Option<NsysSource>, String> {
        let host_path = self.host_path.trim();
        let image = self.image.trim();
        match (host_path.is_empty(), image.is_empty()) {
            (true, true) => Ok(None),
            (false, false) => Err(format!(
                "nsight-injector.nsys sets both hostPath ({host_path}) and image ({image}): \
                 give one"
            )),
            (false, true) if !host_path.starts_with('/') => Err(format!(
                "nsight-injector.nsys.hostPath must be an absolute path on the nodes, not {host_path}"
            )),
            (false, true) => Ok(Some(NsysSource::HostPath(host_path.to_owned()))),
            (true, false) if !self.image_dir.starts_with('/') => Err(format!(
                "nsight-injector.nsys.imageDir must be an absolute path in {image}, not {}",
                self.image_dir
            )),
            (true, false) => Ok(Some(NsysSource::Image {
                image: image.to_owned(),
                dir: self.image_dir.trim_end_matches('/').to_owned(),
            })),
        }
    }

    /// Parses the webhook's `--nsys` value (JSON of this type).
    pub fn parse_flag(text: &str) -> Result<Option<NsysSource>, String> {
        serde_json::from_str::<Self>(text)
            .map_err(|e| {
                format!(
                    "--nsys must be the JSON of nsight-injector.nsys ({{\"hostPath\", \"image\", \
                     \"imageDir\"}}): {e}"
                )
            })?
            .source()
    }
}

/// The cluster-wide default tool config (flag `--default-tool-config` of the webhook).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InjectorToolConfig {
    /// Nsight Systems arguments (`-t cuda,nvtx ...`).
    #[serde(default)]
    pub nsight_tool_args: String,
    /// Regexes over `<executable> <args>`: which processes are profiled.
    #[serde(default)]
    pub injection_include_patterns: Vec<String>,
    #[serde(default)]
    pub injection_exclude_patterns: Vec<String>,
    /// Coordinator mode (sessions started by users); `false`: each process profiles itself
    /// from start (launch mode).
    #[serde(default = "yes")]
    pub coordinator: bool,
    #[serde(default)]
    pub otlp_mirroring_enabled: bool,
    /// Seconds of collection (`--duration`); 0: until stopped or the process ends.
    #[serde(default)]
    pub duration: u32,
    /// The agent's profiler (`auto`, `nvtx`, `cupti`, `nvtx+cupti`, `nsys`).
    #[serde(default)]
    pub backend: crate::ProfilerBackend,
}

fn yes() -> bool {
    true
}

impl InjectorToolConfig {
    /// The tool config named `default` this describes (`duration` becomes `--duration=N`).
    pub fn to_tool_config(&self) -> NsightToolConfig {
        let mut args = self.nsight_tool_args.trim().to_owned();
        if self.duration > 0 {
            if !args.is_empty() {
                args.push(' ');
            }
            args.push_str(&format!("--duration={}", self.duration));
        }
        NsightToolConfig {
            name: "default".into(),
            nsight_tool_args: (!args.is_empty()).then_some(args),
            injection_include_patterns: self.injection_include_patterns.clone(),
            injection_exclude_patterns: self.injection_exclude_patterns.clone(),
            coordinator: Some(self.coordinator),
            otlp_mirroring_enabled: Some(self.otlp_mirroring_enabled),
            backend: (self.backend != crate::ProfilerBackend::Auto).then_some(self.backend),
            ..NsightToolConfig::default()
        }
    }

    /// Parses the `--default-tool-config` value (JSON of this type).
    pub fn parse_flag(text: &str) -> Result<NsightToolConfig, String> {
        serde_json::from_str::<Self>(text)
            .map(|c| c.to_tool_config())
            .map_err(|e| {
                format!(
                    "--default-tool-config must be the JSON of nsight-injector.nsightToolConfig \
                     ({{\"nsightToolArgs\", \"injectionIncludePatterns\", \
                     \"injectionExcludePatterns\", \"coordinator\", \"otlpMirroringEnabled\", \
                     \"duration\", \"backend\"}}): {e}"
                )
            })
    }
}

/// A control-plane resource the chart renders in the release namespace (single-tenant).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Component {
    pub enabled: bool,
    pub resources: Option<ResourceRequirements>,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
}

/// `nsight-otel-collector`: the OpenTelemetry collector mirrored spans go to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OtelCollectorValues {
    pub enabled: bool,
    /// The OTLP converter beside the collector: mirrored spans become reports in the chart's
    /// storage, and the release's coordinator stops each collection on it.
    pub converter: crate::Toggle,
    pub resources: Option<ResourceRequirements>,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
}

/// `nsight-coordinator`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Coordinator {
    pub enabled: bool,
    /// Where users reach the gateway's storage proxy: download URLs are signed for it.
    /// Empty: `http://localhost:9000` (the port-forward `autoconfigure` sets up) for a
    /// ClusterIP gateway; set it for LoadBalancer and NodePort gateways.
    pub storage_public_url: String,
    pub resources: Option<ResourceRequirements>,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
}

/// Where reports are stored (the chart's NsightCloudStorageConfig).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CloudStorage {
    pub enabled: bool,
    /// The operator-managed S3 server (the guide's "MinIO").
    pub minio: MinioValues,
    /// External S3: a Secret whose `storage-config.yaml` holds the bucket and credentials
    /// (used when `minio.enabled` is false).
    pub secret_ref: Option<NameRef>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MinioValues {
    pub enabled: bool,
    pub persistence: PersistenceValues,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PersistenceValues {
    pub enabled: bool,
    /// Empty: the cluster's default StorageClass.
    pub storage_class_name: String,
    /// A Kubernetes quantity (`20Gi`).
    #[schemars(regex(pattern = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"))]
    pub size: String,
}

/// `{name}` of a Secret in the release namespace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NameRef {
    #[schemars(length(min = 1))]
    pub name: String,
}

/// `nsight-tenant-operator`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantOperatorValues {
    pub enabled: bool,
    pub streamer_launch: StreamerLaunchValues,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamerLaunchValues {
    /// Streamers running at once in a namespace, at most.
    #[schemars(range(min = 1))]
    pub max_active: u32,
    /// A streamer neither launched nor opened for this long is deleted (`30m`, `90s`, `1h`;
    /// null: the tenant API's default, 30 minutes).
    #[serde(default)]
    #[schemars(regex(pattern = r"^[0-9]*[1-9][0-9]*(ms|s|m|h)$"))]
    pub idle_timeout: Option<String>,
    /// The image of launched streamers (NVIDIA's Nsight Streamer for Nsight Systems, e.g.
    /// `nvcr.io/nvidia/devtools/nsight-streamer-nsys:<tag>`); null: `<image.repository>/nsight-streamer:<tag>`.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub image: Option<String>,
    /// The RuntimeClass of launched streamers' Pods (e.g. `nvidia`, where the GPU Operator's
    /// runtime must be named to give the Pod a GPU for encoding); null: the cluster's default.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub runtime_class_name: Option<String>,
    /// The WebRTC media ports of launched streamers, on their container and Service
    /// (`[{name, port, protocol: UDP|TCP}]`; docs/tenant.md).
    #[serde(default)]
    pub media_ports: Vec<crate::MediaPort>,
    /// The TURN relay launched streamers hand to the browser (`{enabled, urls,
    /// credentialsSecret}`); null: none.
    #[serde(default)]
    pub turn: Option<crate::Turn>,
    /// More environment for launched streamers: the streamer image's own settings.
    #[serde(default)]
    pub env: Vec<k8s_openapi::api::core::v1::EnvVar>,
}

/// `otlpProxyConfig`: the OTLP proxy sidecar's configuration (needs the collector).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OtlpProxyValues {
    pub enabled: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nsys(host_path: &str, image: &str, image_dir: &str) -> NsysValues {
        NsysValues {
            host_path: host_path.into(),
            image: image.into(),
            image_dir: image_dir.into(),
        }
    }

    #[test]
    fn nsys_values_name_one_source_or_say_what_is_wrong() {
        assert_eq!(NsysValues::default().source(), Ok(None));
        assert_eq!(
            nsys("/opt/nvidia/nsight-systems/2025.3.1", "", "/x").source(),
            Ok(Some(NsysSource::HostPath(
                "/opt/nvidia/nsight-systems/2025.3.1".into()
            )))
        );
        assert_eq!(
            nsys(
                "",
                "registry.example/nsys:2025.3",
                "/opt/nvidia/nsight-systems/"
            )
            .source(),
            Ok(Some(NsysSource::Image {
                image: "registry.example/nsys:2025.3".into(),
                dir: "/opt/nvidia/nsight-systems".into(),
            }))
        );
        let both = nsys("/opt/nsys", "nsys:1", "/opt").source().unwrap_err();
        assert!(
            both.contains("both hostPath") && both.contains("give one"),
            "{both}"
        );
        let relative = nsys("opt/nsys", "", "/opt").source().unwrap_err();
        assert!(
            relative.contains("absolute path on the nodes"),
            "{relative}"
        );
        let relative = nsys("", "nsys:1", "nsys").source().unwrap_err();
        assert!(
            relative.contains("imageDir must be an absolute path"),
            "{relative}"
        );
    }

    #[test]
    fn the_nsys_flag_is_the_values_json_with_defaults() {
        assert_eq!(
            NsysValues::parse_flag(r#"{"image": "nsys:1"}"#),
            Ok(Some(NsysSource::Image {
                image: "nsys:1".into(),
                dir: "/opt/nvidia/nsight-systems".into(),
            }))
        );
        assert_eq!(NsysValues::parse_flag(r#"{"hostPath": ""}"#), Ok(None));
        let typo = NsysValues::parse_flag(r#"{"hostpath": "/opt"}"#).unwrap_err();
        assert!(
            typo.contains("--nsys must be the JSON") && typo.contains("hostpath"),
            "{typo}"
        );
    }

    #[test]
    fn the_default_tool_config_carries_its_backend() {
        let tool = InjectorToolConfig::parse_flag(r#"{"backend": "nsys"}"#).unwrap();
        assert_eq!(tool.backend, Some(crate::ProfilerBackend::Nsys));
        assert!(tool.wants_nsys());
        let tool = InjectorToolConfig::parse_flag("{}").unwrap();
        assert_eq!(tool.backend, None);
        assert!(!tool.wants_nsys());
    }
}
