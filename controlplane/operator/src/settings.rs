//! What the webhook injects with, fixed at start-up (flags of `nsight-operator webhook`): the
//! agent image and where it holds the tools, the coordinator, the tag, the cluster-wide
//! default tool config used for labelled Pods when no NsightOperatorProfileConfig applies, the
//! OTLP proxy sidecar's image, and where Nsight Systems comes from.

use nsight_api::{chart::NsysSource, NsightToolConfig};

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
    /// Image of the OTLP proxy sidecar (an Envoy with `envoy` on PATH) of mirroring Pods.
    pub otlp_proxy_image: String,
    /// The ADS server OTLP proxy sidecars fetch their configuration from (the manager's xDS
    /// Service); without it no sidecar is injected, and the Pod's annotation says why.
    pub otlp_xds: Option<XdsServer>,
    /// Where Pods whose tool config asks for nsys get it (chart value `nsight-injector.nsys`);
    /// `None`: from their own PATH.
    pub nsys: Option<NsysSource>,
}

/// Where an Envoy reaches our ADS server: a DNS name (in a cluster) or an IP, and a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdsServer {
    pub host: String,
    pub port: u16,
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
            otlp_proxy_image: concat!(
                "nvcr.io/nvidia/devtools/nsight-gateway:",
                env!("CARGO_PKG_VERSION")
            )
            .into(),
            otlp_xds: None,
            nsys: None,
        }
    }
}

/// The cluster-wide node setting of the manager (chart value `machineConfig`, flag
/// `--machine-config`); its home is the chart values' types.
pub use nsight_api::chart::MachineConfig;
