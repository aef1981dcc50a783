//! `NsightOperatorProfileConfig` (`nvidia.com/v1`): the namespace-scoped profile definitions
//! (nsight tool configs) and the injection rules that pick which Pods get which tool config.
//!
//! The webhook reads these (controlplane/operator `inject`); nothing here evaluates a rule.

use k8s_openapi::{
    api::core::v1::{EnvVar, Volume, VolumeMount},
    apimachinery::pkg::apis::meta::v1::LabelSelector,
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::NsightStatus;

/// Profile definitions and injection rules of one namespace.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nvidia.com",
    version = "v1",
    kind = "NsightOperatorProfileConfig",
    namespaced,
    status = "NsightStatus",
    shortname = "nsightprofile",
    category = "nsight",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NsightOperatorProfileConfigSpec {
    /// Named, reusable profile definitions.
    #[serde(default)]
    pub nsight_tool_configs: Vec<NsightToolConfig>,
    /// Which Pods are injected, and with which tool config. Without rules, a Pod selected by
    /// the `nvidia-nsight-profile=enabled` label (or its namespace's) gets the first tool config.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub injection_rules: Vec<InjectionRule>,
}

/// How to profile: tool arguments, which processes, environment, volumes, mode and storage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NsightToolConfig {
    /// Referenced by injection rules.
    pub name: String,
    /// Nsight Systems arguments, as one command-line string (`--trace=cuda,nvtx ...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nsight_tool_args: Option<String>,
    /// Regexes over `<executable path> <args>`: a process is profiled when one matches...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub injection_include_patterns: Vec<String>,
    /// ...and none of these (merged with the default list of shells and utilities) does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub injection_exclude_patterns: Vec<String>,
    /// Extra environment for the injected containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Extra volumes added to the Pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// Where the extra volumes are mounted in the injected containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    /// Coordinator mode (default `true`); `false` is launch mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordinator: Option<bool>,
    /// Mirror NVTX ranges as OTLP through an injected proxy sidecar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp_mirroring_enabled: Option<bool>,
    /// Name of an `NsightCloudStorageConfig` in the namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_storage_config_ref: Option<String>,
    /// The profiler the agent runs the selected processes under (default `auto`). `nsys` runs
    /// Nsight Systems: the operator's nsys (chart value `nsight-injector.nsys`) when the
    /// cluster provides one, else `nsys` on the container's PATH.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<ProfilerBackend>,
}

/// The agent's profiler (its `--backend`, docs/agent.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ProfilerBackend {
    /// NVTX ranges, and GPU activity through CUPTI where the container sees a GPU (built in).
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// NVTX ranges only (built in).
    #[serde(rename = "nvtx")]
    Nvtx,
    /// GPU kernels, copies and CUDA API calls through CUPTI (built in).
    #[serde(rename = "cupti")]
    Cupti,
    /// Both built-in recorders.
    #[serde(rename = "nvtx+cupti")]
    NvtxCupti,
    /// NVIDIA Nsight Systems (`nsys`).
    #[serde(rename = "nsys")]
    Nsys,
}

impl ProfilerBackend {
    /// The agent's spelling (`--backend` / `NSIGHT_AGENT_BACKEND`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Nvtx => "nvtx",
            Self::Cupti => "cupti",
            Self::NvtxCupti => "nvtx+cupti",
            Self::Nsys => "nsys",
        }
    }
}

/// The environment variable the agent reads its backend from.
pub const AGENT_BACKEND_ENV: &str = "NSIGHT_AGENT_BACKEND";

impl NsightToolConfig {
    /// Coordinator mode unless `coordinator: false`.
    pub fn coordinator_mode(&self) -> bool {
        self.coordinator.unwrap_or(true)
    }

    /// Whether its processes run under Nsight Systems: `backend: nsys`, or (the older way) its
    /// `env` setting `NSIGHT_AGENT_BACKEND=nsys`.
    pub fn wants_nsys(&self) -> bool {
        self.backend == Some(ProfilerBackend::Nsys)
            || self
                .env
                .iter()
                .any(|e| e.name == AGENT_BACKEND_ENV && e.value.as_deref() == Some("nsys"))
    }
}

/// A predicate over a Pod (and its namespace) that selects a tool config. All the selectors
/// that are set must match; a rule with none set matches nothing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InjectionRule {
    pub name: String,
    /// The `nsightToolConfigs[].name` used for Pods this rule matches.
    pub nsight_tool_config: String,
    /// Labels of the Pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Labels of the Pod's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// A CEL expression over the Pod (`object`), e.g. `object.metadata.name.startsWith('train')`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel_expression: Option<String>,
}
