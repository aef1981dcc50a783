//! "View trace": an Nsight Streamer for a session or one report, launched through the tenant API
//! (`POST /tenant/v1/streamers`), watched until it is Ready (`GET .../{name}` every
//! [`POLL`], at most [`PATIENCE`]), then opened where the gateway serves it
//! (`/streamers/<name>/`, behind the same sign-in). Each refusal says what to do: no tenant API
//! behind this gateway, the cap reached (the tenant API's message names the user's own
//! streamers), a streamer that never became Ready. The built-in timeline stays one click away.
//!
//! ```text
//!  click ──POST /tenant/v1/streamers──> 201 pending ──GET every 2 s──> ready ──> link /streamers/<name>/
//!          404/405/not JSON ──> "no tenant API here"      429 ──> the cap's message
//! ```

use std::time::Duration;

use leptos::{prelude::*, task::spawn_local};
use nsight_contracts::{
    routes,
    tenant::{LaunchStreamer, Streamer, StreamerPhase},
};

use crate::{
    api::{self, ApiError},
    components::live::sleep,
};

/// How often a pending streamer is looked at.
pub const POLL: Duration = Duration::from_secs(2);
/// How long a launch may take to become Ready before the page gives up waiting.
pub const PATIENCE: Duration = Duration::from_secs(180);

/// Where a launch stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stage {
    Idle,
    Launching,
    Waiting(String),
    Ready { name: String },
    Failed(String),
}

/// What the user reads for a refused launch.
fn explain(e: &ApiError) -> String {
    match e {
        ApiError::Refused {
            status: 404 | 405 | 501,
            ..
        }
        | ApiError::Decode(_) => no_tenant_api().to_owned(),
        ApiError::Refused {
            status: 429,
            message,
        } => {
            format!("The streamer limit is reached: {message}")
        }
        other => format!("The streamer could not be launched: {other}"),
    }
}

/// What a page says where no tenant API answers behind the gateway.
pub fn no_tenant_api() -> &'static str {
    "No tenant API is deployed behind this gateway, so no streamer can be launched here. A \
     cluster admin enables it with the Helm value nsight-tenant-operator.enabled=true. \
     Meanwhile, open the report in the built-in Timeline, or download it."
}

/// The gateway's path of a streamer.
pub fn streamer_path(name: &str) -> String {
    format!("{}{name}/", routes::STREAMERS)
}

/// Asks the gateway for the cookie that opens streamer `name` in a new tab (API-key mode; see
/// [`api::grant_streamer`]). A refusal only means the new tab asks for credentials, as before:
/// logged to the console, not shown.
pub async fn grant_access(name: String) {
    if let Err(e) = api::grant_streamer(name.clone()).await {
        leptos::logging::warn!("no grant for streamer {name}: {e}");
    }
}

/// Polls `name` until it is Ready, fails, or [`PATIENCE`] runs out.
async fn wait_ready(name: String) -> Stage {
    let tries = (PATIENCE.as_millis() / POLL.as_millis()).max(1);
    for _ in 0..tries {
        match api::streamer(name.clone()).await {
            Ok(Streamer {
                phase: StreamerPhase::Ready,
                ..
            }) => {
                grant_access(name.clone()).await;
                return Stage::Ready { name };
            }
            Ok(_) => sleep(POLL).await,
            Err(e) => return Stage::Failed(format!("Streamer {name} can no longer be read: {e}")),
        }
    }
    Stage::Failed(format!(
        "Streamer {name} is not Ready after {} s; its Pod may be waiting for a node or failing to \
         sync the reports (kubectl describe nsightstreamer {name}).",
        PATIENCE.as_secs()
    ))
}

thread_local! {
    /// What followed each launch, by the launch's body: the page draws a session's detail again
    /// whenever the coordinator's state changes (components::live), and a button drawn again
    /// must still show the streamer it launched, and the wait must reach it.
    static STAGES: std::cell::RefCell<std::collections::HashMap<String, ArcRwSignal<Stage>>> =
        Default::default();
}

/// The stage of the launch `request`, kept across redraws of its button.
fn stage_of(request: &LaunchStreamer) -> ArcRwSignal<Stage> {
    let key = serde_json::to_string(request).unwrap_or_default();
    STAGES.with(|stages| {
        stages
            .borrow_mut()
            .entry(key)
            .or_insert_with(|| ArcRwSignal::new(Stage::Idle))
            .clone()
    })
}

/// The "View trace" button for `request` (a session or one report) and what followed.
#[component]
pub fn ViewTrace(request: LaunchStreamer, testid: &'static str) -> impl IntoView {
    let stage = stage_of(&request);
    let shown = stage.clone();
    let click = move |_| {
        if matches!(stage.get_untracked(), Stage::Launching | Stage::Waiting(_)) {
            return;
        }
        let request = request.clone();
        let stage = stage.clone();
        stage.set(Stage::Launching);
        spawn_local(async move {
            match api::launch_streamer(request).await {
                Ok(s) if s.phase == StreamerPhase::Ready => {
                    grant_access(s.name.clone()).await;
                    stage.set(Stage::Ready { name: s.name })
                }
                Ok(s) => {
                    stage.set(Stage::Waiting(s.name.clone()));
                    stage.set(wait_ready(s.name).await);
                }
                Err(e) => stage.set(Stage::Failed(explain(&e))),
            }
        });
    };
    let status = move || {
        match shown.get() {
        Stage::Idle => None,
        Stage::Launching => Some(
            view! { <span role="status" data-testid=testid>" Launching a streamer…"</span> }
                .into_any(),
        ),
        Stage::Waiting(name) => Some(
            view! { <span role="status" data-testid=testid>{format!(" Streamer {name} is starting (its reports are being copied in)…")}</span> }
                .into_any(),
        ),
        Stage::Ready { name } => Some(
            view! {
                <span role="status" data-testid=testid>
                    " Ready: "
                    <a href=streamer_path(&name) target="_blank" rel="noopener" data-testid="view-trace-open">
                        {format!("open streamer {name}")}
                    </a>
                </span>
            }
            .into_any(),
        ),
        Stage::Failed(text) => Some(
            view! { <span class="notice error" role="alert" data-testid=testid>{format!(" {text}")}</span> }
                .into_any(),
        ),
    }
    };
    view! {
        <button data-testid="view-trace" title="Open in the Nsight Systems GUI (Nsight Streamer) in the cluster" on:click=click>
            "View trace"
        </button>
        {status}
    }
}
