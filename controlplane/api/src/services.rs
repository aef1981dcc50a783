//! The service resources of `nvidia.com/v1alpha1` that the operator turns into Deployments and
//! Services: NsightCoordinator, NsightAnalysis, NsightOtelCollector, OTLPProxyConfig,
//! NsightStreamer, NsightTenantOperator, NsightCloudUI.
//!
//! Each spec flattens [`Workload`] (image, resources, service, placement) and adds its own
//! section; every one reports [`NsightStatus`] (the streamer with its `url`, [`NsightStreamerStatus`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    common::{NsightStatus, ServiceSpec, Toggle},
    streamer_media::StreamerMedia,
};

/// What every deployed component accepts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Workload {
    /// Container image override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceSpec>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

/// Brokers sessions and collections; agents connect to it.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nvidia.com",
    version = "v1alpha1",
    kind = "NsightCoordinator",
    namespaced,
    status = "NsightStatus",
    shortname = "nsightcoord",
    category = "nsight",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NsightCoordinatorSpec {
    #[serde(flatten)]
    pub workload: Workload,
    /// Encryption of the agent channel (mutual TLS here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub curve_encryption: Option<Toggle>,
    /// Name of an `NsightCloudStorageConfig` whose reports `ls` and `download` serve (the one
    /// the injected agents upload to). Without it, the namespace's only storage config, if
    /// there is exactly one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_storage_ref: Option<String>,
    /// The base URL users download reports from (their view of the gateway's storage proxy,
    /// e.g. `https://nsight.example.com:9000`); download URLs are signed for it. Without it,
    /// they are signed for the S3 endpoint of the storage config (reachable in the cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), pattern(r"^https?://[^/?#\s]+/?$"))]
    pub storage_public_url: Option<String>,
}

/// Runs analysis recipes on collected reports.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nvidia.com",
    version = "v1alpha1",
    kind = "NsightAnalysis",
    plural = "nsightanalyses",
    namespaced,
    status = "NsightStatus",
    category = "nsight",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NsightAnalysisSpec {
    #[serde(flatten)]
    pub workload: Workload,
    /// Name of an `NsightCloudStorageConfig`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_storage_ref: Option<String>,
    /// Jobs running at once (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_jobs: Option<u32>,
}

/// An OpenTelemetry collector receiving mirrored NVTX spans, with an optional converter.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nvidia.com",
    version = "v1alpha1",
    kind = "NsightOtelCollector",
    namespaced,
    status = "NsightStatus",
    category = "nsight",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NsightOtelCollectorSpec {
    #[serde(flatten)]
    pub workload: Workload,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The OTLP-to-report converter sidecar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converter: Option<Toggle>,
    /// OTLP endpoints the collector exports to as well (e.g. a Jaeger collector).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exporters: Vec<OtlpExporter>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_storage_ref: Option<String>,
}

/// One OTLP export target.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OtlpExporter {
    pub name: String,
    pub endpoint: String,
}

/// The OTLP proxy sidecar injected into profiled Pods when mirroring is on.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nvidia.com",
    version = "v1alpha1",
    kind = "OTLPProxyConfig",
    plural = "otlpproxyconfigs",
    namespaced,
    status = "NsightStatus",
    category = "nsight",
    printcolumn = r#"{"name":"Collector","type":"string","jsonPath":".spec.collectorRef"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct OTLPProxyConfigSpec {
    /// Name of the `NsightOtelCollector` spans go to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collector_ref: Option<String>,
    /// Port the sidecar listens on inside the Pod (default 4318).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// A browser-based Nsight Systems GUI with access to the reports in storage.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nvidia.com",
    version = "v1alpha1",
    kind = "NsightStreamer",
    namespaced,
    status = "NsightStreamerStatus",
    category = "nsight",
    printcolumn = r#"{"name":"Session","type":"string","jsonPath":".spec.sessionId"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NsightStreamerSpec {
    #[serde(flatten)]
    pub workload: Workload,
    /// The session whose reports are mounted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_storage_ref: Option<String>,
    /// WebRTC media ports, the TURN relay (e.g. a STUNner gateway for reachability from outside
    /// the cluster) and the image's own environment.
    #[serde(flatten)]
    pub media: StreamerMedia,
    /// The Pod's RuntimeClass (e.g. `nvidia`, the GPU Operator's runtime, for a streamer that
    /// encodes on a GPU); none: the cluster's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub runtime_class_name: Option<String>,
}

/// A streamer's status: the common conditions, and where it is served once Ready.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NsightStreamerStatus {
    #[serde(flatten)]
    pub common: NsightStatus,
    /// The streamer's address (its Service's in-cluster URL), set while it is Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// The tenant-scoped API the UI calls to create and delete streamers.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nvidia.com",
    version = "v1alpha1",
    kind = "NsightTenantOperator",
    namespaced,
    status = "NsightStatus",
    category = "nsight",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NsightTenantOperatorSpec {
    #[serde(flatten)]
    pub workload: Workload,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streamer_launch: Option<StreamerLaunch>,
}

/// Limits on streamers launched through the tenant API.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamerLaunch {
    /// Concurrent streamers (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_active: Option<u32>,
    /// A streamer neither launched nor opened for this long is deleted: a number and `ms`,
    /// `s`, `m` or `h` (default `30m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]*[1-9][0-9]*(ms|s|m|h)$"))]
    pub idle_timeout: Option<String>,
    /// The image of launched streamers (default: the operator's `<repository>/nsight-streamer:<tag>`;
    /// a real install names NVIDIA's Nsight Streamer image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub image: Option<String>,
    /// The RuntimeClass of launched streamers' Pods (e.g. `nvidia`, where the GPU Operator's
    /// runtime must be named to give the Pod a GPU for encoding); null: the cluster's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub runtime_class_name: Option<String>,
    /// The media ports, TURN relay and environment of every launched streamer.
    #[serde(flatten)]
    pub media: StreamerMedia,
}

/// The web UI, served at the gateway root.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nvidia.com",
    version = "v1alpha1",
    kind = "NsightCloudUI",
    plural = "nsightclouduis",
    namespaced,
    status = "NsightStatus",
    category = "nsight",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NsightCloudUISpec {
    #[serde(flatten)]
    pub workload: Workload,
}
