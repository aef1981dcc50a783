//! One session in detail: its collections, each agent's outcome in each (with the reason of a
//! failure and the object keys of an upload), its reports with size, digest and a download link
//! (the URL the coordinator signed), "Run analysis" on the whole session or one collection
//! (opens the analysis tab with that input chosen), and "Compare with the previous collection"
//! (a `diff` job over the two, opened at once), and "View trace" for the session or one report
//! (an Nsight Streamer through the tenant API, `components::view_trace`). Data:
//! `GET /sessions/{id}` and `GET /sessions/{id}/reports`; fetched again while a collection is
//! still open.

use leptos::{prelude::*, task::spawn_local};
use nsight_contracts::{
    analysis::{JobInput, JobRequest},
    coordinator::{
        AgentKey, AgentOutcome, Collection, ReportEntry, ReportKind, ReportListing, Session,
    },
    tenant::LaunchStreamer,
};

use crate::{
    api::{self, ApiError},
    app::Shared,
    components::{
        live::refresh_while,
        notice::{Notice, NoticeLine},
        view_trace::ViewTrace,
    },
    format::{bytes, duration, utc, utc_or_dash},
    route::{go, Link, Tab, View},
};

/// The recipe that compares two collections' kernel statistics.
const DIFF: &str = "diff";

/// The analysis tab with this session (and collection) as the job's input.
fn analyse(shared: Shared, session: &str, collection: Option<String>) -> View {
    View {
        tab: Tab::Analysis,
        tag: shared.view.with_untracked(|v| v.tag.clone()),
        session: Some(session.to_owned()),
        collection,
        recipe: Some("nvtx_sum".to_owned()),
        ..View::default()
    }
}

fn outcome_row(key: AgentKey, outcome: AgentOutcome) -> impl IntoView {
    let detail = match &outcome {
        AgentOutcome::Failed { reason } => reason.clone(),
        AgentOutcome::Uploaded { keys } => format!("{} file(s): {}", keys.len(), keys.join(", ")),
        AgentOutcome::TimedOut => "no upload within the upload timeout after stop".to_owned(),
        AgentOutcome::Lost => "the agent went silent before uploading".to_owned(),
        _ => String::new(),
    };
    let failed = matches!(
        outcome,
        AgentOutcome::Failed { .. } | AgentOutcome::TimedOut | AgentOutcome::Lost
    );
    view! {
        <tr data-testid="agent-outcome">
            <td><code>{key.to_string()}</code></td>
            <td data-testid="agent-state" class:bad=failed>{outcome.state_name()}</td>
            <td data-testid="agent-reason">{detail}</td>
        </tr>
    }
}

/// "Compare with the previous collection": a `diff` job over (previous, this), opened at once.
fn compare_button(
    shared: Shared,
    session: String,
    previous: String,
    this: String,
) -> impl IntoView {
    let notice = RwSignal::new(None::<Notice>);
    let label = format!("Compare with collection {previous} (diff)");
    let click = move |_| {
        let (session, previous, this) = (session.clone(), previous.clone(), this.clone());
        let tag = shared.view.with_untracked(|v| v.tag.clone());
        spawn_local(async move {
            let input = |collection: String| JobInput {
                session: session.clone(),
                collection: Some(collection),
            };
            let request = JobRequest {
                recipe: DIFF.to_owned(),
                inputs: Some(vec![input(previous), input(this)]),
                tag: Some(tag.clone()),
                ..JobRequest::default()
            };
            match api::run_job(request).await {
                Ok(job) => go(
                    shared,
                    View {
                        tab: Tab::Analysis,
                        tag,
                        session: Some(session.clone()),
                        job: Some(job.id.to_string()),
                        ..View::default()
                    },
                ),
                Err(e) => notice.set(Some(Notice::Failed(format!(
                    "The diff job was refused: {e}"
                )))),
            }
        });
    };
    view! {
        <button data-testid="compare-collection" on:click=click>{label}</button>
        <NoticeLine notice testid="compare-notice"/>
    }
}

fn collection_view(shared: Shared, session: &str, c: Collection) -> impl IntoView {
    let id = c.id.to_string();
    let took = c
        .completed_at
        .map(|done| duration(done.since(c.started_at)))
        .unwrap_or_else(|| "–".to_owned());
    let agents = c.agents.len();
    let rows = c
        .agents
        .into_iter()
        .map(|(k, o)| outcome_row(k, o))
        .collect_view();
    let to = analyse(shared, session, Some(id.clone()));
    let compare =
        c.id.0
            .checked_sub(1)
            .filter(|previous| *previous >= 1)
            .map(|previous| {
                compare_button(shared, session.to_owned(), previous.to_string(), id.clone())
            });
    view! {
        <article class="collection" data-testid="collection" data-collection=id.clone()>
            <h4>
                {format!("Collection {id}: ")}
                <span data-testid="collection-state">{c.state.as_str()}</span>
            </h4>
            <p>
                {format!(
                    "Started {}; stop asked {}; settled {} ({took}); {agents} agent(s).",
                    utc(c.started_at.0),
                    utc_or_dash(c.stop_requested_at.map(|m| m.0)),
                    utc_or_dash(c.completed_at.map(|m| m.0)),
                )}
                " "
                <Link shared to testid="analyse-collection">{format!("Run analysis on collection {id}")}</Link>
                " "
                {compare}
            </p>
            {(agents > 0).then(|| view! {
                <table class="outcomes">
                    <thead><tr><th scope="col">"Agent"</th><th scope="col">"Outcome"</th><th scope="col">"Reason / files"</th></tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            })}
        </article>
    }
}

fn report_row(shared: Shared, r: ReportEntry) -> impl IntoView {
    let file = r.flat_path.clone();
    let timeline = (r.kind == ReportKind::Sqlite).then(|| {
        let to = View {
            tab: Tab::Timeline,
            tag: shared.view.with_untracked(|v| v.tag.clone()),
            report: Some(r.key.clone()),
            ..View::default()
        };
        view! { " " <Link shared to=to testid="report-timeline">"Timeline"</Link> }
    });
    let link = match r.url.clone() {
        Some(url) => {
            view! { <a href=url download=file.clone() data-testid="report-download">"Download"</a> }
                .into_any()
        }
        None => view! { <span>"no link"</span> }.into_any(),
    };
    // The Nsight Systems GUI opens the report itself (its SQLite export comes along).
    let streamer = (r.kind == ReportKind::NsysRep).then(|| {
        let request = LaunchStreamer {
            session_id: None,
            report: Some(r.key.clone()),
        };
        view! { " " <ViewTrace request testid="view-trace-report-status"/> }
    });
    view! {
        <tr data-testid="report-row">
            <td data-testid="report-file">{file.clone()}</td>
            <td>{r.collection.clone()}</td>
            <td>{r.process.clone()}</td>
            <td>{r.kind.extension()}</td>
            <td data-testid="report-size" title=format!("{} bytes", r.size)>{bytes(r.size)}</td>
            <td><code class="digest">{r.sha256.clone().unwrap_or_else(|| "not recorded".to_owned())}</code></td>
            <td>{link}{timeline}{streamer}</td>
        </tr>
    }
}

fn reports_view(shared: Shared, listing: ReportListing) -> AnyView {
    if listing.reports.is_empty() {
        return view! { <p data-testid="reports-empty">"No reports yet: they appear once a collection is stopped and its agents upload."</p> }.into_any();
    }
    let note = listing
        .url_error
        .map(|e| view! { <p role="alert">{format!("Download links are missing: {e}")}</p> });
    view! {
        {note}
        <table data-testid="reports">
            <caption>{format!("Reports (download directory {})", listing.directory)}</caption>
            <thead><tr>
                <th scope="col">"File"</th><th scope="col">"Collection"</th><th scope="col">"Process"</th>
                <th scope="col">"Kind"</th><th scope="col">"Size"</th><th scope="col">"SHA-256"</th><th scope="col">"Link"</th>
            </tr></thead>
            <tbody>{listing.reports.into_iter().map(|r| report_row(shared, r)).collect_view()}</tbody>
        </table>
    }
    .into_any()
}

fn session_view(shared: Shared, s: Session) -> impl IntoView {
    let id = s.id.to_string();
    let to = analyse(shared, &id, None);
    let collections = if s.collections.is_empty() {
        view! { <p data-testid="collections-empty">"No collections yet: start one above."</p> }
            .into_any()
    } else {
        s.collections
            .into_iter()
            .rev()
            .map(|c| collection_view(shared, &id, c))
            .collect_view()
            .into_any()
    };
    view! {
        <dl class="facts">
            <dt>"Title"</dt><dd data-testid="detail-title">{s.title.map(|t| t.to_string()).unwrap_or_else(|| "–".to_owned())}</dd>
            <dt>"State"</dt><dd data-testid="detail-state">{s.state.as_str()}</dd>
            <dt>"Began"</dt><dd>{utc(s.created_at.0)}</dd>
            <dt>"Ended"</dt><dd>{utc_or_dash(s.ended_at.map(|m| m.0))}</dd>
        </dl>
        <p><Link shared to testid="analyse-session">"Run analysis on the whole session"</Link></p>
        <p>
            <ViewTrace request=LaunchStreamer { session_id: Some(id.clone()), report: None } testid="view-trace-status"/>
            " every report of the session in the Nsight Systems GUI, or open one in the built-in Timeline below."
        </p>
        <h3>"Collections"</h3>
        {collections}
    }
}

fn failed(what: &str, e: ApiError) -> AnyView {
    view! { <p role="alert" data-testid="detail-error">{format!("Cannot read {what}: {e}")}</p> }
        .into_any()
}

#[component]
pub fn SessionDetail(shared: Shared, id: String) -> impl IntoView {
    let session_id = id.clone();
    let session = LocalResource::new(move || {
        shared.reload.track();
        api::session(session_id.clone())
    });
    let reports_id = id.clone();
    let reports = LocalResource::new(move || {
        shared.reload.track();
        api::reports(reports_id.clone())
    });
    let live = Signal::derive(move || {
        session
            .get()
            .and_then(Result::ok)
            .is_some_and(|s| s.collections.iter().any(|c| c.state.is_open()))
    });
    refresh_while(shared, live);
    view! {
        <section class="detail" aria-labelledby="detail-heading" data-testid="session-detail">
            <h2 id="detail-heading">"Session " <code>{id}</code></h2>
            {move || match session.get() {
                None => view! { <p>"Loading the session…"</p> }.into_any(),
                Some(Err(e)) => failed("the session", e),
                Some(Ok(s)) => session_view(shared, s).into_any(),
            }}
            <h3>"Reports"</h3>
            {move || match reports.get() {
                None => view! { <p>"Loading reports…"</p> }.into_any(),
                Some(Err(e)) => failed("the reports", e),
                Some(Ok(l)) => reports_view(shared, l),
            }}
        </section>
    }
}
