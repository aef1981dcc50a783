//! The gateway's auth filter.
//!
//! ```text
//!  Envoy ──on_http_request_headers──> glue (filter.rs, wasm32 only)
//!                                        │ header values
//!                                        v
//!                                  decide() (policy.rs, plain Rust, tested on the host)
//!                                        │   └─ JWT: jwt.rs (claims) + jwks.rs (trusted keys)
//!                                        │        keys inline, or fetched: remote.rs (cache)
//!                                        ├─ streamer grants: grant.rs (a cookie for one
//!                                        │   streamer's path, for a new tab)
//!                                        ├─ OAuth2: oauth/ (discovery, code flow with PKCE,
//!                                        │   signed session cookie; glue in filter/oidc_glue.rs)
//!                                        │ Decision
//!                                        v
//!                       resume the request, or answer 401 with a reason
//! ```
//! The policy is parsed once per plugin configuration; a configuration that does not parse makes
//! the filter refuse to start, which Envoy reports as a rejected (NACKed) configuration.

pub mod config;
pub mod grant;
pub mod jwks;
pub mod jwt;
pub mod oauth;
pub mod policy;
pub mod remote;

#[cfg(target_arch = "wasm32")]
mod filter;

pub use config::{AuthConfig, ConfigError};
pub use policy::{decide, decide_with, Decision, Denial};
