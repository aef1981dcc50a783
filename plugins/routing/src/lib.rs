//! The gateway's tenant routing filter: one gateway shared by several namespaces.
//!
//! ```text
//!  Envoy ──on_http_request_headers──> glue (filter.rs, wasm32 only)
//!   (after the auth filter)              │ :path, tenant header, x-nsight-auth-identity
//!                                        v
//!                                  route() (route.rs, plain Rust, tested on the host)
//!                                        │ Decision
//!                                        v
//!        set the cluster header (+ strip `/t/<namespace>`), or answer 403 / 404 (JSON)
//! ```
//! Envoy's `cluster_header` route then sends the request to the tenant's cluster. The routing
//! table is parsed once per plugin configuration (`config.rs`); a table that does not validate
//! makes the filter refuse to start, which Envoy reports as a rejected (NACKed) configuration.

pub mod config;
pub mod route;

#[cfg(target_arch = "wasm32")]
mod filter;

pub use config::{ConfigError, RoutingConfig, TenantSource};
pub use route::{route, Decision, Request};
