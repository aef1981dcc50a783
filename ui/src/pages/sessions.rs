//! The sessions page of one tag: the tag selector, the tag's agents (`pages::agents`) and active
//! collection, the controls (begin with a title, start, stop, end after a confirmation), and the
//! tag's sessions with their state, times and collection count; a selected session opens its
//! detail below (`pages::session`). The list has a text filter and a sortable column order
//! (both in the URL; newest first by default, `coordinator::session_order`) and draws a page of
//! rows at a time (`components::list_filter`). Data: `GET /status?tag`, `GET /tags` (for the
//! selector) and `GET /sessions?tag`; actions `POST /sessions`, `/start`, `/stop`, `/end`. While
//! a collection is collecting or stopping the data is fetched again (components::live).

use leptos::{prelude::*, task::spawn_local};
use nsight_contracts::{
    coordinator::{
        session_order::{SessionColumn, SessionOrder},
        SessionState, SessionSummary, Tag, TagStatus,
    },
    listing,
};

use crate::{
    api::{self, ApiError},
    app::Shared,
    components::{
        list_filter::{self, ListFilter, Paging},
        live::refresh_while,
        notice::{Notice, NoticeLine},
    },
    format::{utc, utc_or_dash},
    pages::{agents::agents_table, session::SessionDetail},
    route::{go, replace, Link, View},
};

/// The tag selector: every tag that has sessions, plus the one shown; another can be typed.
#[component]
fn TagSelector(shared: Shared) -> impl IntoView {
    let all = LocalResource::new(move || {
        shared.reload.track();
        api::tags()
    });
    let typed = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    let tags = move || {
        let current = shared.view.with(|v| v.tag.clone());
        let mut tags: Vec<String> = all
            .get()
            .and_then(Result::ok)
            .map(|l| l.tags.into_iter().map(|t| t.tag.to_string()).collect())
            .unwrap_or_default();
        tags.push(current);
        tags.push(Tag::DEFAULT.to_owned());
        tags.sort();
        tags.dedup();
        tags
    };
    let pick = move |tag: String| {
        go(
            shared,
            View {
                tag,
                ..View::default()
            },
        )
    };
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let raw = typed.get_untracked();
        match Tag::parse(raw.trim()) {
            Ok(tag) => {
                error.set(None);
                typed.set(String::new());
                pick(tag.to_string());
            }
            Err(e) => error.set(Some(e.to_string())),
        }
    };
    view! {
        <form class="tag-selector" on:submit=submit>
            <label for="tag-select">"Tag"</label>
            <select id="tag-select" data-testid="tag-select"
                on:change=move |ev| pick(event_target_value(&ev))
                prop:value=move || shared.view.with(|v| v.tag.clone())>
                {move || tags().into_iter().map(|t| {
                    let selected = shared.view.with(|v| v.tag == t);
                    view! { <option value=t.clone() selected=selected>{t.clone()}</option> }
                }).collect_view()}
            </select>
            <label for="tag-other">"Other tag"</label>
            <input id="tag-other" data-testid="tag-other" placeholder="e.g. training-run"
                prop:value=move || typed.get() on:input=move |ev| typed.set(event_target_value(&ev))
                aria-describedby="tag-error"/>
            <button type="submit">"Show"</button>
            <span id="tag-error" role="alert" class="field-error">{move || error.get()}</span>
        </form>
    }
}

/// What a control does, for the confirmation and the notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    Begin,
    Start,
    Stop,
    End,
}

/// Runs a control against the coordinator; the notice says what happened.
fn act(
    shared: Shared,
    control: Control,
    title: String,
    busy: RwSignal<bool>,
    notice: RwSignal<Option<Notice>>,
) {
    let tag = shared.view.with_untracked(|v| v.tag.clone());
    busy.set(true);
    spawn_local(async move {
        let outcome: Result<String, ApiError> = match control {
            Control::Begin => {
                let title = (!title.trim().is_empty()).then(|| title.trim().to_owned());
                api::begin(tag.clone(), title).await.map(|s| {
                    go(
                        shared,
                        View {
                            tag: tag.clone(),
                            session: Some(s.id.to_string()),
                            ..View::default()
                        },
                    );
                    format!("Began session {}", s.id)
                })
            }
            Control::Start => api::start(tag, None).await.map(|s| {
                let opened = if s.session_created {
                    " (a new session was opened)"
                } else {
                    ""
                };
                format!(
                    "Started collection {} of session {}{opened}: {} agent(s) told to start",
                    s.collection, s.session, s.agents
                )
            }),
            Control::Stop => api::stop(tag, None).await.map(|s| {
                format!(
                    "Stopping collection {} of session {}: {} agent(s) told to stop; now {}",
                    s.collection,
                    s.session,
                    s.agents,
                    s.state.as_str()
                )
            }),
            Control::End => api::end(tag, None).await.map(|e| match e.stopped {
                Some(s) => format!(
                    "Ended session {}; collection {} was stopped",
                    e.session, s.collection
                ),
                None => format!("Ended session {}", e.session),
            }),
        };
        notice.set(Some(match outcome {
            Ok(text) => Notice::Done(text),
            Err(e) => Notice::Failed(e.to_string()),
        }));
        busy.set(false);
        shared.refresh();
    });
}

/// The tag's agents, open session and active collection, with the controls.
#[component]
fn TagPanel(shared: Shared, status: LocalResource<Result<TagStatus, ApiError>>) -> impl IntoView {
    let title = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let confirming = RwSignal::new(false);
    // The confirmation takes the focus when it opens (Cancel, the safe choice); Escape closes it.
    let cancel_button = NodeRef::<leptos::html::Button>::new();
    Effect::new(move |_| {
        if let Some(button) = cancel_button.get() {
            let _ = button.focus();
        }
    });
    let notice = RwSignal::new(None::<Notice>);
    let run = move |control: Control| {
        confirming.set(false);
        act(shared, control, title.get_untracked(), busy, notice);
        if control == Control::Begin {
            title.set(String::new());
        }
    };
    let summary = move || {
        match status.get() {
        None => view! { <p data-testid="status-loading">"Loading the tag's status…"</p> }.into_any(),
        Some(Err(e)) => view! { <p role="alert" data-testid="status-error">{format!("Cannot read the tag's status: {e}")}</p> }.into_any(),
        Some(Ok(s)) => {
            let agents = format!("{} of {} agent(s) connected", s.agent_counts.connected, s.agent_counts.known);
            let open = match &s.active_session {
                Some(o) => format!("Open session: {} {}", o.id, o.title.as_ref().map(|t| format!("“{t}”")).unwrap_or_default()),
                None => "No open session".to_owned(),
            };
            let collection = match &s.active_collection {
                Some(c) => format!("Collection {} is {} since {}", c.id, c.state.as_str(), utc(c.started_at.0)),
                None => "Nothing is collecting".to_owned(),
            };
            view! {
                <ul class="tag-status" data-testid="tag-status">
                    <li data-testid="agents-connected">{agents}</li>
                    <li data-testid="open-session">{open}</li>
                    <li data-testid="active-collection">{collection}</li>
                </ul>
                {agents_table(s.agents, s.agent_counts.known)}
            }
            .into_any()
        }
    }
    };
    view! {
        <section class="controls" aria-labelledby="controls-heading">
            <h2 id="controls-heading">{move || format!("Tag {}", shared.view.with(|v| v.tag.clone()))}</h2>
            {summary}
            <div class="buttons">
                <label for="session-title">"Title"</label>
                <input id="session-title" data-testid="session-title" placeholder="optional title of a new session"
                    prop:value=move || title.get() on:input=move |ev| title.set(event_target_value(&ev))/>
                <button data-testid="begin" disabled=move || busy.get() on:click=move |_| run(Control::Begin)>"Begin session"</button>
                <button data-testid="start" disabled=move || busy.get() on:click=move |_| run(Control::Start)>"Start collection"</button>
                <button data-testid="stop" disabled=move || busy.get() on:click=move |_| run(Control::Stop)>"Stop collection"</button>
                <button data-testid="end" disabled=move || busy.get() on:click=move |_| confirming.set(true)>"End session…"</button>
            </div>
            <Show when=move || confirming.get()>
                <div class="confirm" role="alertdialog" aria-labelledby="confirm-text" data-testid="end-confirm"
                    on:keydown=move |ev| if ev.key() == "Escape" { confirming.set(false) }>
                    <p id="confirm-text">{move || format!(
                        "End the open session of tag {}? A collection still collecting is stopped, and no new collection can start in it.",
                        shared.view.with(|v| v.tag.clone()))}</p>
                    <button data-testid="end-confirm-yes" on:click=move |_| run(Control::End)>"End session"</button>
                    <button data-testid="end-confirm-no" node_ref=cancel_button on:click=move |_| confirming.set(false)>"Cancel"</button>
                </div>
            </Show>
            <NoticeLine notice testid="action-notice"/>
        </section>
    }
}

fn row(shared: Shared, s: SessionSummary, selected: bool) -> impl IntoView {
    let id = s.id.to_string();
    let to = View {
        tag: s.tag.to_string(),
        session: Some(id.clone()),
        state: shared.view.with_untracked(|v| v.state.clone()),
        q: shared.view.with_untracked(|v| v.q.clone()),
        sort: shared.view.with_untracked(|v| v.sort.clone()),
        ..View::default()
    };
    let label = id.clone();
    view! {
        <tr data-testid="session-row" data-session=id class:selected=selected>
            <td><Link shared to testid="session-link" current=selected><code>{label}</code></Link></td>
            <td>{s.tag.to_string()}</td>
            <td>{s.title.map(|t| t.to_string()).unwrap_or_default()}</td>
            <td data-testid="session-state">{s.state.as_str()}</td>
            <td>{utc(s.created_at.0)}</td>
            <td>{utc_or_dash(s.ended_at.map(|m| m.0))}</td>
            <td data-testid="session-collections">{s.collections}</td>
        </tr>
    }
}

/// What a column header says.
fn column_title(column: SessionColumn) -> &'static str {
    match column {
        SessionColumn::Session => "Session",
        SessionColumn::Title => "Title",
        SessionColumn::State => "State",
        SessionColumn::Began => "Began",
        SessionColumn::Ended => "Ended",
        SessionColumn::Collections => "Collections",
    }
}

/// The table's caption: what it shows and in which order.
fn caption(order: SessionOrder) -> String {
    if order == SessionOrder::default() {
        return "Sessions of this tag, newest first".to_owned();
    }
    let direction = if order.descending {
        "descending"
    } else {
        "ascending"
    };
    format!(
        "Sessions of this tag, by {} ({direction})",
        column_title(order.column).to_lowercase()
    )
}

/// A sortable column header: a button that sorts by it (again: the other way), `aria-sort`
/// saying the order. The order goes into the URL without a new history entry.
fn header(shared: Shared, order: SessionOrder, column: SessionColumn) -> impl IntoView {
    let current = (order.column == column).then_some(order.descending);
    let aria = match current {
        Some(true) => "descending",
        Some(false) => "ascending",
        None => "none",
    };
    let arrow = match current {
        Some(true) => " ▼",
        Some(false) => " ▲",
        None => "",
    };
    let click = move |_| {
        let mut to = shared.view.get_untracked();
        let next = order.clicked(column);
        to.sort = (next != SessionOrder::default()).then(|| next.as_param());
        replace(shared, to);
    };
    view! {
        <th scope="col" aria-sort=aria>
            <button class="sort" data-testid=format!("sessions-sort-{}", column.as_str()) on:click=click>
                {column_title(column)}{arrow}
            </button>
        </th>
    }
}

#[component]
pub fn SessionsPage(shared: Shared) -> impl IntoView {
    let tag = Memo::new(move |_| shared.view.with(|v| v.tag.clone()));
    let status = LocalResource::new(move || {
        shared.reload.track();
        api::status(tag.get())
    });
    let state = Memo::new(move |_| shared.view.with(|v| v.state.clone()));
    let sessions = LocalResource::new(move || {
        shared.reload.track();
        api::sessions(Some(tag.get()), state.get())
    });
    let filter = move |ev: leptos::ev::Event| {
        let value = event_target_value(&ev);
        let mut to = shared.view.get_untracked();
        to.state = (!value.is_empty()).then_some(value);
        go(shared, to);
    };
    let state_options = [SessionState::Open, SessionState::Ended].map(|s| {
        let name = s.as_str();
        view! { <option value=name selected=move || state.get().as_deref() == Some(name)>{name}</option> }
    });
    let live = Signal::derive(move || {
        status
            .get()
            .and_then(Result::ok)
            .is_some_and(|s| s.active_collection.is_some_and(|c| c.state.is_open()))
    });
    refresh_while(shared, live);
    let paging = Paging::new();
    // A bad `sort` in a URL falls back to newest first.
    let order = Memo::new(move |_| {
        shared.view.with(|v| {
            v.sort
                .as_deref()
                .and_then(SessionOrder::parse)
                .unwrap_or_default()
        })
    });
    let list = move || {
        match sessions.get() {
        None => view! { <p data-testid="sessions-loading">"Loading sessions…"</p> }.into_any(),
        Some(Err(e)) => view! {
            <p data-testid="sessions-error" role="alert">{format!("Cannot list sessions: {e}")}</p>
        }
        .into_any(),
        Some(Ok(list)) if list.sessions.is_empty() && state.get().is_some() => view! {
            <p data-testid="sessions-empty">"No session of this tag is in that state."</p>
        }
        .into_any(),
        Some(Ok(list)) if list.sessions.is_empty() => view! {
            <p data-testid="sessions-empty">"No sessions on this tag yet: begin one above, or with nsight-cloud session-begin."</p>
        }
        .into_any(),
        Some(Ok(list)) => {
            let selected = shared.view.with(|v| v.session.clone());
            let q = list_filter::query(shared);
            let order = order.get();
            let mut matching: Vec<SessionSummary> = list
                .sessions
                .into_iter()
                .filter(|s| {
                    let id = s.id.to_string();
                    let title = s.title.as_ref().map(|t| t.to_string()).unwrap_or_default();
                    listing::matches(&q, &[&id, &title, s.state.as_str()])
                })
                .collect();
            order.sort(&mut matching);
            let window = paging.window(&q, matching.len());
            if matching.is_empty() {
                return view! {
                    <p data-testid="sessions-empty">{format!("No session of this tag matches “{}”.", q.trim())}</p>
                }
                .into_any();
            }
            let rows = matching.into_iter().take(window.shown).map(|s| {
                let is = selected.as_deref() == Some(s.id.to_string().as_str());
                row(shared, s, is)
            });
            view! {
                {Paging::count(window, "session", "sessions")}
                <table data-testid="sessions">
                    <caption>{caption(order)}</caption>
                    <thead>
                        <tr>
                            {header(shared, order, SessionColumn::Session)}
                            <th scope="col">"Tag"</th>
                            {header(shared, order, SessionColumn::Title)}
                            {header(shared, order, SessionColumn::State)}
                            {header(shared, order, SessionColumn::Began)}
                            {header(shared, order, SessionColumn::Ended)}
                            {header(shared, order, SessionColumn::Collections)}
                        </tr>
                    </thead>
                    <tbody>{rows.collect_view()}</tbody>
                </table>
                {paging.more(q, window)}
            }
            .into_any()
        }
    }
    };
    // A memo: the detail is built again only when another session is selected.
    let selected = Memo::new(move |_| shared.view.with(|v| v.session.clone()));
    let detail = move || {
        selected
            .get()
            .map(|id| view! { <SessionDetail shared id/> })
    };
    view! {
        <TagSelector shared/>
        <TagPanel shared status/>
        <section aria-labelledby="sessions-heading">
            <h2 id="sessions-heading">"Sessions"</h2>
            <div class="buttons">
                <label for="session-state-filter">"State"</label>
                <select id="session-state-filter" data-testid="session-state-filter" on:change=filter>
                    <option value="" selected=move || state.get().is_none()>"any"</option>
                    {state_options}
                </select>
                <ListFilter shared testid="session-filter" label="Find" placeholder="ID, title or state"/>
                <button data-testid="refresh" on:click=move |_| shared.refresh()>"Refresh"</button>
            </div>
            {list}
        </section>
        {detail}
    }
}
