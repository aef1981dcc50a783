//! The local mode: the whole platform on one machine, from the same binaries and the same gateway
//! configuration as in a cluster.
//!
//! ```text
//!  nsight-controlplane local
//!    ├─ nsight-coordinator   (child process; reports in <state>/reports, mTLS certs in <state>/tls)
//!    ├─ nsight-analysis      (child process; recipes from <wasm dir>/recipes)
//!    ├─ UI file server       (in process; <wasm dir>/ui)
//!    ├─ xDS server           (in process; publishes the gateway IR)
//!    └─ envoy                (supervised; :8888 API + UI, API-key or OAuth2 auth; :9000 storage)
//! ```
//!
//! | module | owns |
//! |---|---|
//! | [`plan`] | settings -> ports, paths, child command lines, the gateway IR (pure) |
//! | [`oauth2`] | browser sign-in through an OpenID provider: settings, the filter, its upstream (pure) |
//! | [`secrets`] | the API key, gateway token and cookie key files (generated once, mode 0600) |
//! | [`ui_server`] | serving the built UI (a single-page app) |
//! | [`status`] | the control plane's status endpoint (xDS ACK/NACK per node, metrics) |
//! | [`platform`] | starting, watching and stopping the parts |
//! | [`survivors`] | one platform per state directory; stopping what an earlier one left running |

pub mod oauth2;
pub mod plan;
pub mod platform;
pub mod secrets;
pub mod status;
pub mod survivors;
pub mod ui_server;
