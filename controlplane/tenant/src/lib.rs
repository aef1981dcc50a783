//! The tenant API: what the Cloud UI's "View trace" calls to launch an Nsight Streamer for a
//! session or one report, list the caller's streamers, open one and delete it. Each streamer is
//! an `NsightStreamer` resource in the tenant operator's own namespace (the operator renders
//! its Deployment and Service), owned by the identity the gateway forwards, at most
//! `streamerLaunch.maxActive` at once, deleted once idle.
//!
//! ```text
//!  UI ──/tenant/v1/streamers──> gateway (auth filter: x-nsight-auth-identity)
//!        ──> api (parse, check) ──> core (cap, owner, idle: pure) ──> store (kube-rs) ──> NsightStreamer
//!                                        reaper (every reap_interval) ──┘
//! ```
//!
//! Owns: the tenant API's rules and its writes to `NsightStreamer`s labelled
//! `app.kubernetes.io/created-by=nsight-tenant-operator`. Must not touch: any other kind or
//! namespace, or a streamer someone created by hand.

pub mod api;
pub mod core;
pub mod reaper;
pub mod store;

use std::io;

pub use api::{Config, Service};
use tokio::net::TcpListener;

/// Serves the API on `listener` and reaps idle streamers, until the server fails.
pub async fn run(
    listener: TcpListener,
    client: kube::Client,
    namespace: &str,
    config: Config,
) -> io::Result<()> {
    let store = store::Streamers::new(client, namespace);
    let reaper = tokio::spawn(reaper::run(store.clone(), config.idle));
    let served = axum::serve(listener, api::router(Service::new(store, config))).await;
    reaper.abort();
    served
}
