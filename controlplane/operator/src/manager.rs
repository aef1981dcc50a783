//! The manager: the controllers of every kind, run only while this replica holds the leader
//! Lease (when election is on), and its HTTP endpoints on one port (default :8080):
//!
//! ```text
//! GET /healthz  200 while the process serves
//! GET /readyz   200 once the API server answered (leader or standby), 503 before
//! GET /metrics  Prometheus text (metrics.rs)
//! ```
//!
//! Owns wiring and the health endpoints; reconcile logic is in `controller`. The one
//! cluster-wide node setting (`machineConfig`: the perf_event_paranoid DaemonSet, rendered by
//! `render::perf_event`) is applied here when leading, at start-up.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
};

use axum::{extract::State, http::StatusCode, response::IntoResponse, routing::get, Router};
use k8s_openapi::api::apps::v1::DaemonSet;
use kube::{
    api::{DeleteParams, Patch, PatchParams},
    Api, Client,
};
use tokio::net::TcpListener;

use crate::{
    controller::{self, Context},
    leader::{Elector, LeadError},
    metrics::Metrics,
    render::{perf_event, Object, RenderSettings, MANAGER},
    settings::MachineConfig,
    xds::{self, controller::XdsContext, translate::XdsSettings},
};
use nsight_gateway::server::XdsHandle;

/// How the manager runs.
#[derive(Debug, Clone)]
pub struct Config {
    pub settings: RenderSettings,
    /// Watch one namespace only (`None`: the whole cluster).
    pub namespace: Option<String>,
}

/// The manager's cluster-wide node setting: what `machine_config` says (`None`: no
/// DaemonSet, and a previous one is deleted) for the DaemonSet in `namespace` (the operator's).
#[derive(Debug, Clone)]
pub struct MachineSetting {
    pub machine_config: Option<MachineConfig>,
    pub namespace: String,
}

/// Server-side applies the one perf_event_paranoid DaemonSet of `setting`, or deletes it when
/// the setting is off (a DaemonSet that is not there is fine).
pub async fn apply_machine_config(client: &Client, setting: &MachineSetting) -> kube::Result<()> {
    let api = Api::<DaemonSet>::namespaced(client.clone(), &setting.namespace);
    let desired = perf_event::render(setting.machine_config.as_ref(), &setting.namespace);
    match desired.objects.first() {
        Some(Object::DaemonSet(set)) => {
            api.patch(
                perf_event::DAEMON_SET_NAME,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&**set),
            )
            .await?;
            tracing::info!(
                namespace = %setting.namespace,
                name = perf_event::DAEMON_SET_NAME,
                "applied the perf_event_paranoid DaemonSet"
            );
        }
        _ => match api
            .delete(perf_event::DAEMON_SET_NAME, &DeleteParams::background())
            .await
        {
            Ok(_) => tracing::info!(
                namespace = %setting.namespace,
                "machineConfig is null: deleted the perf_event_paranoid DaemonSet"
            ),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(e),
        },
    }
    Ok(())
}

/// [`apply_machine_config`] until it succeeds, backing off from 1 s to 30 s.
async fn keep_machine_config(client: Client, setting: MachineSetting) {
    let mut wait = std::time::Duration::from_secs(1);
    while let Err(e) = apply_machine_config(&client, &setting).await {
        tracing::warn!(error = %e, retry_in = ?wait, "cannot apply the machineConfig setting");
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(std::time::Duration::from_secs(30));
    }
}

/// What the HTTP endpoints read.
#[derive(Debug, Clone, Default)]
pub struct Health {
    pub metrics: Arc<Metrics>,
    pub ready: Arc<AtomicBool>,
}

/// `/healthz`, `/readyz`, `/metrics`.
pub fn router(health: Health) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State(h): State<Health>| async move {
                if h.ready.load(Ordering::Relaxed) {
                    (StatusCode::OK, "ok")
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "not connected to the API server yet",
                    )
                }
            }),
        )
        .route(
            "/metrics",
            get(|State(h): State<Health>| async move {
                (
                    [("content-type", "text/plain; version=0.0.4")],
                    h.metrics.render(),
                )
                    .into_response()
            }),
        )
        .with_state(health)
}

/// Serves the endpoints until the task is dropped.
pub async fn serve_health(listener: TcpListener, health: Health) -> std::io::Result<()> {
    axum::serve(listener, router(health)).await
}

/// Binds the health address; a separate step so a busy port fails before anything starts.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Runs the controllers: directly, or while `elector` holds the Lease. Returns only when
/// leadership is lost (the caller exits, and its restart competes again) or the controllers end.
pub async fn run(
    client: Client,
    config: Config,
    health: Health,
    elector: Option<Elector>,
) -> Result<(), LeadError> {
    run_with_xds(client, config, health, elector, None).await
}

/// [`run`], plus (with `xds`) the controller that publishes every NsightGateway's
/// configuration on that ADS server (`crate::xds`), under the same leadership.
pub async fn run_with_xds(
    client: Client,
    config: Config,
    health: Health,
    elector: Option<Elector>,
    xds: Option<(Arc<XdsHandle>, XdsSettings)>,
) -> Result<(), LeadError> {
    run_with_machine(client, config, health, elector, xds, None).await
}

/// [`run_with_xds`], plus (with `machine`) the cluster-wide node setting applied (or its
/// DaemonSet deleted) once leading, before and alongside the controllers.
pub async fn run_with_machine(
    client: Client,
    config: Config,
    health: Health,
    elector: Option<Elector>,
    xds: Option<(Arc<XdsHandle>, XdsSettings)>,
    machine: Option<MachineSetting>,
) -> Result<(), LeadError> {
    match client.apiserver_version().await {
        Ok(v) => tracing::info!(version = %v.git_version, "connected to the API server"),
        Err(e) => tracing::warn!(error = %e, "the API server does not answer yet"),
    }
    health.ready.store(true, Ordering::Relaxed);
    let gateways = xds.map(|(handle, settings)| {
        let ctx = Arc::new(XdsContext::new(client.clone(), handle, settings));
        let namespace = config.namespace.clone();
        async move {
            futures::join!(
                xds::controller::run(ctx.clone(), namespace.clone()),
                xds::otlp_proxies::run(ctx, namespace)
            );
        }
    });
    let machine = machine.map(|setting| keep_machine_config(client.clone(), setting));
    let ctx = Arc::new(Context::new(
        client,
        config.settings.clone(),
        health.metrics.clone(),
    ));
    let work = async move {
        let machine = futures::future::OptionFuture::from(machine);
        match gateways {
            Some(gateways) => {
                futures::join!(
                    controller::run_all(ctx, config.namespace.clone()),
                    gateways,
                    machine
                );
            }
            None => {
                futures::join!(controller::run_all(ctx, config.namespace.clone()), machine);
            }
        }
    };
    match elector {
        None => {
            health.metrics.set_leader(true);
            work.await;
            Ok(())
        }
        Some(elector) => {
            let metrics = health.metrics.clone();
            elector
                .lead(work, |leading| metrics.set_leader(leading))
                .await
        }
    }
}
