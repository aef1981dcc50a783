//! The Helm chart's values (`charts/nsight-operator/values.yaml`) as types: the one home of
//! that contract. `values.schema.json` is generated from [`Values`] (`cargo xtask codegen`), so
//! helm refuses a misspelt key or a wrong type with its path before anything is rendered, and
//! the operator parses the values the chart passes it (`--machine-config`,
//! `--default-tool-config`) with the same types.
//!
//! Names follow NVIDIA's user guide (`nsight-gateway.*`, `nsight-injector.nsightToolConfig.*`,
//! `cloudStorage.*`, ...). Every struct denies unknown fields; the defaults live in
//! values.yaml, which a test parses into [`Values`].

mod components;
mod gateway;

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{LocalObjectReference, Toleration},
    apimachinery::pkg::apis::meta::v1::LabelSelector,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use components::{
    CertManager, CloudStorage, Component, Coordinator, FailurePolicy, Injector, InjectorToolConfig,
    IssuerRef, Manager, MinioValues, MultiTenant, NameRef, NsysSource, NsysValues,
    OtelCollectorValues, OtlpProxyValues, PersistenceValues, StreamerLaunchValues,
    TenantOperatorValues, Webhook,
};
pub use gateway::{
    GatewayApiKey, GatewayAuthentication, GatewayJwt, GatewayOAuth2, GatewayRouting,
    GatewayService, GatewayValues, ServiceType,
};

/// Everything `values.yaml` may set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "nsight-operator chart values")]
pub struct Values {
    pub image: Image,
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// The Envoy image of gateways; empty: `<image.repository>/nsight-gateway:<tag>`.
    pub envoy_image: String,
    /// The image whose `/plugins/*.wasm` gateways install; empty: the operator image.
    pub plugins_image: String,
    /// Control plane per tenant namespace instead of one in the release namespace.
    pub multi_tenant: MultiTenant,
    pub leader_election: Enabled,
    pub manager: Manager,
    pub webhook: Webhook,
    /// Cluster-wide: which namespaces and Pods the injector webhook is called for at all.
    pub injection_filter: InjectionFilter,
    #[serde(rename = "nsight-injector")]
    pub injector: Injector,
    #[serde(rename = "nsight-coordinator")]
    pub coordinator: Coordinator,
    #[serde(rename = "nsight-analysis")]
    pub analysis: Component,
    #[serde(rename = "nsight-gateway")]
    pub gateway: GatewayValues,
    pub cloud_storage: CloudStorage,
    #[serde(rename = "nsight-cloud-ui")]
    pub cloud_ui: Component,
    #[serde(rename = "nsight-tenant-operator")]
    pub tenant_operator: TenantOperatorValues,
    #[serde(rename = "nsight-otel-collector")]
    pub otel_collector: OtelCollectorValues,
    pub otlp_proxy_config: OtlpProxyValues,
    /// The cluster-wide node setting; `null`: none (the cluster manages it out of band).
    pub machine_config: Option<MachineConfig>,
    /// Scheduling of the operator's own Pod.
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
}

/// `<repository>/<component>:<tag>` of every image.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Image {
    pub repository: String,
    /// Empty: the chart's appVersion.
    pub tag: String,
    pub pull_policy: PullPolicy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

/// `{enabled: bool}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Enabled {
    pub enabled: bool,
}

/// Selectors of the webhook configuration, added to the chart's own exclusion of
/// `kube-system` and the release namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InjectionFilter {
    /// Only namespaces with these labels (e.g. `{matchLabels: {nsight-profiling: allowed}}`).
    pub namespace_selector: Option<LabelSelector>,
    /// Only Pods with these labels.
    pub object_selector: Option<LabelSelector>,
}

/// The cluster-wide node setting of the manager (chart value `machineConfig`, flag
/// `--machine-config`): `kernel.perf_event_paranoid` is one value per node, not per namespace
/// or profile config, so the operator writes it with ONE DaemonSet in its own namespace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MachineConfig {
    /// The value written to `/proc/sys/kernel/perf_event_paranoid` (-1..=4, default 2).
    #[serde(default = "MachineConfig::default_perf_event_paranoid")]
    #[schemars(range(min = -1, max = 4))]
    pub perf_event_paranoid: i32,
    /// The image of the init container that writes it (it needs `sh`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Only nodes with these labels (default: every node).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Taints the DaemonSet's Pods tolerate (e.g. GPU nodes' `nvidia.com/gpu`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

impl MachineConfig {
    /// The documented default of the operator.
    pub const DEFAULT_PERF_EVENT_PARANOID: i32 = 2;

    fn default_perf_event_paranoid() -> i32 {
        Self::DEFAULT_PERF_EVENT_PARANOID
    }

    /// Parses the `--machine-config` value: a JSON object, or `null` for none.
    pub fn parse_setting(text: &str) -> Result<Option<Self>, String> {
        let config: Option<Self> = serde_json::from_str(text).map_err(|e| {
            format!(
                "--machine-config must be JSON: null, or {{\"perfEventParanoid\": -1..4, \
                 \"image\"?, \"nodeSelector\"?, \"tolerations\"?}} ({e})"
            )
        })?;
        match config {
            Some(c) if !(-1..=4).contains(&c.perf_event_paranoid) => Err(format!(
                "--machine-config: perfEventParanoid {} is out of range (-1..4)",
                c.perf_event_paranoid
            )),
            config => Ok(config),
        }
    }
}

impl Default for MachineConfig {
    fn default() -> Self {
        Self {
            perf_event_paranoid: Self::DEFAULT_PERF_EVENT_PARANOID,
            image: None,
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
        }
    }
}

/// `values.schema.json`: the JSON schema of [`Values`], pretty-printed with a final newline.
pub fn values_schema() -> String {
    let schema = schemars::schema_for!(Values);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

/// Where the chart's schema is committed, relative to the workspace root.
pub const VALUES_SCHEMA_PATH: &str = "charts/nsight-operator/values.schema.json";
