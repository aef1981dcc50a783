//! What the webhook injects with, fixed at start-up (flags of `nsight-operator webhook`): the
//! agent image and where it holds the tools, the coordinator, the tag, and the cluster-wide
//! default tool config used for labelled Pods when no NsightOperatorProfileConfig applies.

use nsight_api::NsightToolConfig;

/// Injection settings. Invariant: `tools_dir` is an absolute path (the emptyDir mount point).
#[derive(Clone, Debug)]
pub struct Settings {
    /// Image of the init container; it holds the agent and the two libraries in `source_dir`.
    pub agent_image: String,
    /// Directory in the agent image with `nsight-agent`, `libnsight_hook.so`, `libnsight_nvtx.so`.
    pub source_dir: String,
    /// Mount point of the shared emptyDir in every container.
    pub tools_dir: String,
    /// The coordinator the agents register with (coordinator mode); `{namespace}` in it is
    /// replaced by the Pod's namespace (multi-tenant: each namespace has its coordinator, e.g.
    /// `http://nsight-operator-coordinator.{namespace}.svc:8081`).
    pub coordinator_url: Option<String>,
    /// The profiling tag (default `default`).
    pub tag: String,
    /// Used when a Pod is selected by label and no profile config names a tool config.
    pub default_tool_config: NsightToolConfig,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            agent_image: concat!(
                "nvcr.io/nvidia/devtools/nsight-agent:",
                env!("CARGO_PKG_VERSION")
            )
            .into(),
            source_dir: "/opt/nsight".into(),
            tools_dir: "/nsight-tools".into(),
            coordinator_url: None,
            tag: "default".into(),
            default_tool_config: NsightToolConfig {
                name: "default".into(),
                injection_include_patterns: vec![".*".into()],
                ..NsightToolConfig::default()
            },
        }
    }
}

/// The cluster-wide node setting of the manager (chart value `machineConfig`, flag
/// `--machine-config`): `kernel.perf_event_paranoid` is one value per node, not per namespace
/// or profile config, so the operator writes it with ONE DaemonSet in its own namespace.
/// `null` (no setting): no DaemonSet, the cluster manages the value out of band.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MachineConfig {
    /// The value written to `/proc/sys/kernel/perf_event_paranoid` (-1..=4, default 2).
    #[serde(default = "MachineConfig::default_perf_event_paranoid")]
    pub perf_event_paranoid: i32,
    /// The image of the init container that writes it (it needs `sh`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Only nodes with these labels (default: every node).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub node_selector: std::collections::BTreeMap<String, String>,
    /// Taints the DaemonSet's Pods tolerate (e.g. GPU nodes' `nvidia.com/gpu`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
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
            node_selector: Default::default(),
            tolerations: Vec::new(),
        }
    }
}
