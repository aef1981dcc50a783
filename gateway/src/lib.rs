//! The gateway control plane: what an Envoy gateway must do (IR), its translation to Envoy v3
//! resources, a versioned snapshot cache, an ADS server (state-of-the-world and delta), the
//! Envoy bootstrap and a supervisor for a local Envoy process.
//!
//! ```text
//!   pure core                                         shell (I/O)
//!   ir ──> translate ──> resources ──> cache ─────> server (tonic ADS) <──gRPC── Envoy
//!                                        │            │ uses protocol::{sotw, delta}
//!                                        └ nacks <────┘
//!   bootstrap ───────────────────────────────────────> supervisor (spawns Envoy)
//!   otlp_sidecar: the IR and bootstrap of a mirroring Pod's OTLP proxy Envoy
//! ```
//! See docs/gateway.md for the public API the local mode uses.

pub mod auth;
pub mod bootstrap;
pub mod cache;
pub mod client;
pub mod ir;
pub mod local;
pub mod otlp_sidecar;
pub mod protocol;
pub mod render;
pub mod resources;
pub mod server;
pub mod status;
pub mod supervisor;
pub mod translate;
