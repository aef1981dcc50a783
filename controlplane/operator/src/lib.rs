//! The Nsight operator: the manager (one controller per custom resource, leader election,
//! metrics and health) and the injector webhook.
//!
//! ```text
//! CR watch ──> controller::reconcile ──> render::<kind>::render (pure) ──> server-side apply,
//!              prune by label, conditions::applied (pure) ──> status subresource
//!
//! API server ──AdmissionReview──> server (HTTPS, /mutate) ──> admission::review (pure)
//!     decide: Pod + namespace labels + NsightOperatorProfileConfigs -> inject(tool) | skip(why)
//!     patch:  Pod + tool + settings -> JSON patch (init container, emptyDir, env, annotations)
//! ```
//!
//! `render`, `conditions`, `decide`, `cel`, `patch`, `selector`, `tool_args` and `admission`
//! are pure; `controller`, `server` and `main` are the shell.

pub mod admission;
pub mod agent_tls;
pub mod cel;
pub mod certs;
pub mod conditions;
pub mod controller;
pub mod decide;
pub mod events;
pub mod leader;
pub mod manager;
pub mod metrics;
pub mod nsys_volume;
pub mod otlp_sidecar;
pub mod patch;
pub mod plugins;
pub mod probe;
pub mod provision;
pub mod render;
pub mod secret_copy;
pub mod selector;
pub mod server;
pub mod settings;
pub mod tool_args;
pub mod webhook_tls;
pub mod world;
pub mod xds;

/// Marker annotation on injected Pods; its value is the tool config's name.
pub const INJECTED_ANNOTATION: &str = "nvidia.com/nsight-injected";
/// Why the Pod was injected (which rule or label, which profile config).
pub const REASON_ANNOTATION: &str = "nvidia.com/nsight-injection-reason";
/// The init container that copies the tools into the shared volume.
pub const TOOLS_INIT_CONTAINER: &str = "nsight-tools";
