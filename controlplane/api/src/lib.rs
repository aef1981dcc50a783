//! The `nvidia.com` custom resources of the Nsight Operator, API-compatible with NVIDIA's:
//! `NsightOperatorProfileConfig` (`v1`) and the `v1alpha1` service resources.
//!
//! Plain data with `#[derive(CustomResource)]`: no client, no I/O. `crds` turns them into the
//! CRD documents committed in the Helm chart. Choices where the public documentation is silent
//! are listed in `docs/operator.md`.

pub mod chart;
pub mod common;
pub mod crds;
pub mod gateway;
pub mod profile;
pub mod services;
pub mod storage;
pub mod streamer_media;

pub use common::{NsightStatus, SecretRef, ServiceSpec, Toggle};
pub use gateway::{
    ApiKeyAuth, Authentication, JwtAuth, NsightGateway, NsightGatewaySpec, OAuth2Auth, Routing,
    Tenants,
};
pub use profile::{
    InjectionRule, NsightOperatorProfileConfig, NsightOperatorProfileConfigSpec, NsightToolConfig,
    ProfilerBackend, AGENT_BACKEND_ENV,
};
pub use services::{
    NsightAnalysis, NsightAnalysisSpec, NsightCloudUI, NsightCloudUISpec, NsightCoordinator,
    NsightCoordinatorSpec, NsightOtelCollector, NsightOtelCollectorSpec, NsightStreamer,
    NsightStreamerSpec, NsightStreamerStatus, NsightTenantOperator, NsightTenantOperatorSpec,
    OTLPProxyConfig, OTLPProxyConfigSpec, StreamerLaunch, Workload,
};
pub use storage::{
    MinioSpec, NsightCloudStorageConfig, NsightCloudStorageConfigSpec, Persistence, StorageType,
};
pub use streamer_media::{MediaPort, MediaProtocol, StreamerMedia, Turn};

/// The API group of every resource.
pub const GROUP: &str = "nvidia.com";
/// The Pod (and namespace) label that opts into injection.
pub const PROFILE_LABEL: &str = "nvidia-nsight-profile";
/// Its value that enables injection.
pub const PROFILE_LABEL_ENABLED: &str = "enabled";
