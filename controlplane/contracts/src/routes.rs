//! Route prefixes: where each REST API is served, directly and behind the gateway. Every party
//! builds URLs from these constants; none spells a prefix itself.
//!
//! ```text
//!  browser / CLI ──> gateway <gw>/coordinator/v1/status ──> coordinator /coordinator/v1/status
//!                                                                    (also /v1/status directly)
//!                    gateway <gw>/analysis/v1/jobs      ──> analysis    /analysis/v1/jobs
//!                    gateway <gw>/tenant/v1/streamers   ──> tenant API  /tenant/v1/streamers
//!                    gateway <gw>/storage/v1/objects/K  ──> signed-URL object server
//! ```

/// The version prefix each service also answers under when reached directly (not through the
/// gateway).
pub const V1: &str = "/v1";

/// The gateway's route prefix for the coordinator (the Envoy route matches on it).
pub const COORDINATOR: &str = "/coordinator/";
/// The coordinator's REST API as reached through the gateway; the coordinator serves it too.
pub const COORDINATOR_V1: &str = "/coordinator/v1";

/// The gateway's route prefix for the analysis service.
pub const ANALYSIS: &str = "/analysis/";
/// The analysis service's REST API as reached through the gateway; the service serves it too.
pub const ANALYSIS_V1: &str = "/analysis/v1";

/// The gateway's route prefix for the tenant API (streamers for the UI's "View trace").
pub const TENANT: &str = "/tenant/";
/// The tenant API as reached through the gateway; the service serves it too.
pub const TENANT_V1: &str = "/tenant/v1";

/// Where the gateway serves each NsightStreamer of its namespace: `/streamers/<name>/`, behind
/// its authentication, forwarded to the streamer's Service at `/` ("View trace" opens it).
pub const STREAMERS: &str = "/streamers/";
/// The last segment of a streamer grant: `POST /streamers/<name>/.nsight-grant` with the API
/// key gets a cookie that opens `/streamers/<name>/` in a new tab, where no `Authorization`
/// header goes (the auth filter's `grant` module; docs/auth.md, "Streamer grants").
pub const STREAMER_GRANT: &str = ".nsight-grant";

/// Report downloads through URLs signed by the coordinator (a local report store); the object
/// key follows.
pub const STORAGE_OBJECTS: &str = "/storage/v1/objects/";

/// Where an OAuth2 gateway's auth filter answers itself (callback, sign-in, logout): the
/// gateway keeps this prefix behind the filter even where the UI is served at `/` without it.
pub const OAUTH2: &str = "/oauth2/";
/// The sign-in entry point of an OAuth2 gateway: `GET /oauth2/signin?to=<local path>` signs the
/// user in (unless signed in) and comes back to `to` (the UI's "Sign in" link).
pub const OAUTH2_SIGNIN: &str = "/oauth2/signin";

/// Every service's liveness probe (outside the versioned API).
pub const HEALTHZ: &str = "/healthz";

/// The OpenAPI document, below each API prefix.
pub const OPENAPI: &str = "/openapi.json";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_prefixes_sit_below_the_gateway_prefixes() {
        assert_eq!(
            COORDINATOR_V1,
            format!("{}{}", COORDINATOR.trim_end_matches('/'), V1)
        );
        assert_eq!(
            ANALYSIS_V1,
            format!("{}{}", ANALYSIS.trim_end_matches('/'), V1)
        );
        assert_eq!(TENANT_V1, format!("{}{}", TENANT.trim_end_matches('/'), V1));
        assert!(STORAGE_OBJECTS.ends_with('/'));
    }
}
