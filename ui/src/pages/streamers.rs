//! The user's Nsight Streamers (the tenant API's `GET /tenant/v1/streamers`): how many run in
//! the namespace against the cap, and each of the user's own with its session or report, its
//! phase, when it is reaped unless opened again, a link to open it once Ready, and a delete
//! button (which frees a slot). Where no tenant API is behind the gateway, it says so.
//!
//! ```text
//!  GET /tenant/v1/streamers ──> "N of M streamers running" + rows ──open──> /streamers/<name>/
//!                                                               └─delete──> DELETE .../{name}
//!  404/405/not JSON ──> "no tenant API here"
//! ```

use leptos::{prelude::*, task::spawn_local};
use nsight_contracts::tenant::{Streamer, StreamerPhase};

use crate::{
    api::{self, ApiError},
    app::Shared,
    components::view_trace::{grant_access, no_tenant_api, streamer_path},
    format::utc,
};

fn streamer_row(shared: Shared, s: Streamer, problem: RwSignal<Option<String>>) -> impl IntoView {
    let name = s.name.clone();
    let opens = match &s.report {
        Some(report) => format!("report {report}"),
        None => format!("session {}", s.session_id),
    };
    let open = (s.phase == StreamerPhase::Ready).then(|| {
        spawn_local(grant_access(name.clone()));
        view! { <a href=streamer_path(&name) target="_blank" rel="noopener" data-testid="streamer-open">"open"</a> }
    });
    let delete = {
        let name = name.clone();
        move |_| {
            let name = name.clone();
            spawn_local(async move {
                match api::delete_streamer(name.clone()).await {
                    Ok(()) => problem.set(None),
                    Err(e) => problem.set(Some(format!("Cannot delete streamer {name}: {e}"))),
                }
                shared.refresh();
            });
        }
    };
    view! {
        <tr data-testid="streamer-row" data-streamer=name.clone()>
            <td><code>{name.clone()}</code></td>
            <td>{opens}</td>
            <td data-testid="streamer-phase">{s.phase.to_string()}</td>
            <td>{utc(s.expires_at.0)}</td>
            <td>{open}" "<button data-testid="streamer-delete" on:click=delete>"Delete"</button></td>
        </tr>
    }
}

/// The streamers page.
#[component]
pub fn StreamersPage(shared: Shared) -> impl IntoView {
    let list = LocalResource::new(move || {
        shared.reload.track();
        api::streamers()
    });
    let problem = RwSignal::new(None::<String>);
    let body = move || {
        match list.get() {
        None => view! { <p>"Loading streamers…"</p> }.into_any(),
        Some(Err(ApiError::Refused { status: 404 | 405 | 501, .. } | ApiError::Decode(_))) => {
            view! { <p class="notice" data-testid="streamers-unavailable">{no_tenant_api()}</p> }.into_any()
        }
        Some(Err(e)) => view! { <p role="alert" data-testid="streamers-error">{format!("Cannot list streamers: {e}")}</p> }.into_any(),
        Some(Ok(list)) => {
            let cap = format!("{} of {} streamers running in this namespace", list.active, list.max_active);
            let rows = if list.streamers.is_empty() {
                view! { <p data-testid="streamers-empty">"You have no streamer: use \"View trace\" on a session or a report."</p> }.into_any()
            } else {
                let rows = list.streamers.into_iter().map(|s| streamer_row(shared, s, problem));
                view! {
                    <table data-testid="streamers">
                        <thead><tr>
                            <th scope="col">"Streamer"</th><th scope="col">"Opens"</th><th scope="col">"Phase"</th>
                            <th scope="col">"Reaped unless opened by"</th><th scope="col"></th>
                        </tr></thead>
                        <tbody>{rows.collect_view()}</tbody>
                    </table>
                }
                .into_any()
            };
            view! {
                <p data-testid="streamers-cap">{cap}</p>
                {rows}
            }
            .into_any()
        }
    }
    };
    view! {
        <section aria-labelledby="streamers-heading">
            <h2 id="streamers-heading">"Your streamers"</h2>
            {move || problem.get().map(|p| view! { <p role="alert" class="notice error" data-testid="streamers-problem">{p}</p> })}
            {body}
            <button data-testid="streamers-refresh" on:click=move |_| shared.refresh()>"Refresh"</button>
        </section>
    }
}
