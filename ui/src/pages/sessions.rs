//! The sessions page: every session the coordinator knows (tag, title, state, when it began,
//! how many collections), with loading, error and empty states. Data comes from
//! `GET /coordinator/v1/sessions` through the gateway; "Refresh" asks again.

use leptos::prelude::*;
use nsight_contracts::coordinator::SessionSummary;

use crate::api;

/// A unix-milliseconds time as `YYYY-MM-DD HH:MM:SS UTC`.
fn utc(ms: u64) -> String {
    let iso: String = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(ms as f64))
        .to_iso_string()
        .into();
    // 2024-05-01T12:00:00.000Z -> 2024-05-01 12:00:00 UTC
    match (iso.get(..10), iso.get(11..19)) {
        (Some(day), Some(time)) => format!("{day} {time} UTC"),
        _ => iso,
    }
}

fn row(s: SessionSummary) -> impl IntoView {
    let state = s.state.as_str();
    view! {
        <tr data-testid="session-row" data-session=s.id.to_string()>
            <td><code>{s.id.to_string()}</code></td>
            <td>{s.tag.to_string()}</td>
            <td>{s.title.map(|t| t.to_string()).unwrap_or_default()}</td>
            <td data-testid="session-state">{state}</td>
            <td>{utc(s.created_at.0)}</td>
            <td>{s.collections}</td>
        </tr>
    }
}

#[component]
pub fn SessionsPage() -> impl IntoView {
    let sessions = LocalResource::new(api::sessions);
    view! {
        <section aria-labelledby="sessions-heading">
            <h2 id="sessions-heading">"Sessions"</h2>
            <button data-testid="refresh" on:click=move |_| sessions.refetch()>
                "Refresh"
            </button>
            {move || match sessions.get() {
                None => view! { <p data-testid="sessions-loading">"Loading sessions…"</p> }.into_any(),
                Some(Err(e)) => view! {
                    <p data-testid="sessions-error" role="alert">{format!("Cannot list sessions: {e}")}</p>
                }.into_any(),
                Some(Ok(list)) if list.sessions.is_empty() => view! {
                    <p data-testid="sessions-empty">"No sessions yet: begin one with nsight-cloud session-begin or profiler-start."</p>
                }.into_any(),
                Some(Ok(list)) => view! {
                    <table data-testid="sessions">
                        <thead>
                            <tr>
                                <th scope="col">"Session"</th>
                                <th scope="col">"Tag"</th>
                                <th scope="col">"Title"</th>
                                <th scope="col">"State"</th>
                                <th scope="col">"Created"</th>
                                <th scope="col">"Collections"</th>
                            </tr>
                        </thead>
                        <tbody>{list.sessions.into_iter().map(row).collect_view()}</tbody>
                    </table>
                }.into_any(),
            }}
        </section>
    }
}
