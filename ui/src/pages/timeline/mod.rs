//! The timeline page (docs/timeline.md): one report's tracks as Nsight Systems lays them out,
//! drawn on a canvas from tiles the analysis service cuts, with the selected event's details
//! (and the API call that launched it, or the kernels it launched) and a selected range's
//! aggregates below. The view (report, range, event, selection) is in the URL.
//!
//! ```text
//!  ?tab=timeline&report=K&range=a_b&event=t.e&sel=a_b
//!     GET /timeline ──> viewer::mount (canvas) ──tiles──> draw
//!     click ──> event signal ──> GET /timeline/event ──> DetailPanel ──link──> select + reveal
//!     drag  ──> sel signal   ──> GET /timeline/range ──> RangePanel
//! ```

mod draw;
mod layout;
mod viewer;

use std::{cell::RefCell, rc::Rc};

use leptos::{html, prelude::*, task::spawn_local};
use nsight_contracts::timeline::{EventDetail, RangeSummary, Timeline};

use crate::{
    api::{self, ApiError},
    app::Shared,
    route::{replace, Link, Tab, View},
};
use layout::{duration, parse_event, parse_pair};
use viewer::{Callbacks, Handle};

/// The page: a report chosen, or how to choose one.
#[component]
pub fn TimelinePage(shared: Shared) -> impl IntoView {
    let report = Memo::new(move |_| shared.view.with(|v| v.report.clone()));
    move || {
        match report.get() {
        None => view! {
            <p data-testid="timeline-none">"No report chosen: open a session and choose "<b>"Timeline"</b>" beside one of its .sqlite reports."</p>
        }
        .into_any(),
        Some(report) => view! { <ReportTimeline shared report/> }.into_any(),
    }
    }
}

fn failed(what: &str, e: ApiError) -> AnyView {
    view! { <p role="alert" data-testid="timeline-error">{format!("Cannot load {what}: {e}")}</p> }
        .into_any()
}

#[component]
fn ReportTimeline(shared: Shared, report: String) -> impl IntoView {
    let data = LocalResource::new({
        let report = report.clone();
        move || api::timeline(report.clone())
    });
    let initial = shared.view.get_untracked();
    let selected = RwSignal::new(initial.event.as_deref().and_then(parse_event));
    let selection = RwSignal::new(initial.sel.as_deref().and_then(parse_pair));
    let range = initial.range.as_deref().and_then(parse_pair);
    let handle: StoredValue<Option<Handle>, LocalStorage> = StoredValue::new_local(None);
    let container = NodeRef::<html::Div>::new();
    let viewer = move || handle.with_value(|h| h.as_ref().map(|h| h.viewer.clone()));

    // The URL follows the selections (replaceState: Back leaves the page).
    let write_url = move |update: &dyn Fn(&mut View)| {
        let mut v = shared.view.get_untracked();
        update(&mut v);
        replace(shared, v);
    };
    Effect::new(move |_| {
        let event = selected.get().map(|(t, e)| format!("{t}.{e}"));
        write_url(&|v| v.event = event.clone());
    });
    Effect::new(move |_| {
        let sel = selection.get().map(|(a, b)| format!("{:.0}_{:.0}", a, b));
        write_url(&|v| v.sel = sel.clone());
    });

    // The canvas, once the timeline and the container are there.
    Effect::new({
        let report = report.clone();
        move |_| {
            let (Some(Ok(tl)), Some(div)) = (data.get(), container.get()) else {
                return;
            };
            if handle.with_value(Option::is_some) {
                return;
            }
            let callbacks = Callbacks {
                select: Rc::new(move |p| selected.set(p)),
                range: Rc::new(move |r| selection.set(r)),
                view: Rc::new(move |from, to| {
                    write_url(&|v| v.range = Some(format!("{from:.0}_{to:.0}")));
                }),
            };
            let mounted = viewer::mount(
                &div,
                report.clone(),
                tl,
                range,
                selected.get_untracked(),
                selection.get_untracked(),
                callbacks,
            );
            handle.set_value(mounted);
        }
    });

    let back = View {
        tab: Tab::Sessions,
        tag: initial.tag.clone(),
        session: report.split('/').nth(1).map(str::to_owned),
        ..View::default()
    };
    let search_text = RwSignal::new(String::new());
    let search = move |ev: leptos::ev::Event| {
        let text = event_target_value(&ev);
        if let Some(v) = viewer() {
            viewer::search(&v, &text);
        }
        search_text.set(text);
    };
    // Next / previous match: the service finds it over the whole report (not only the tiles
    // drawn), from the selected event; the match is selected, its track shown and scrolled to,
    // and the view moved to it when it is out of sight.
    let search_status = RwSignal::new(None::<String>);
    let jump = {
        let report = report.clone();
        move |backwards: bool| {
            let text = search_text.get_untracked().trim().to_owned();
            if text.is_empty() {
                search_status.set(Some("Type part of a name to find first.".to_owned()));
                return;
            }
            let report = report.clone();
            let from = selected.get_untracked();
            spawn_local(async move {
                match api::timeline_search(report, text.clone(), from, backwards).await {
                    Ok(answer) => match answer.hit {
                        Some(hit) => {
                            let origin = data
                                .get_untracked()
                                .and_then(Result::ok)
                                .map_or(hit.start_ns, |tl| tl.start_ns);
                            search_status.set(Some(format!(
                                "{} at {} from the start",
                                hit.name,
                                duration((hit.start_ns - origin) as f64)
                            )));
                            selected.set(Some((hit.track, hit.event)));
                            if let Some(v) = viewer() {
                                viewer::select(&v, Some((hit.track, hit.event)));
                                viewer::reveal(&v, hit.track);
                                viewer::bring_into_view(&v, hit.start_ns as f64, hit.end_ns as f64);
                            }
                        }
                        None => search_status.set(Some(if backwards {
                            format!("No earlier event named like “{text}”.")
                        } else {
                            format!("No later event named like “{text}”.")
                        })),
                    },
                    Err(e) => search_status.set(Some(format!("Cannot search: {e}"))),
                }
            });
        }
    };
    let on_search_key = {
        let jump = jump.clone();
        move |ev: leptos::ev::KeyboardEvent| {
            if ev.key() == "Enter" {
                ev.prevent_default();
                jump(ev.shift_key());
            }
        }
    };
    let next = {
        let jump = jump.clone();
        move |_| jump(false)
    };
    let previous = move |_| jump(true);
    let reset = move |_| {
        if let (Some(v), Some(Ok(tl))) = (viewer(), data.get_untracked()) {
            viewer::show(&v, tl.start_ns as f64, tl.end_ns as f64);
        }
    };
    let saving = RwSignal::new(None::<String>);
    let perfetto = {
        let report = report.clone();
        move |_| {
            let report = report.clone();
            let stem = report
                .rsplit('/')
                .next()
                .unwrap_or("report")
                .trim_end_matches(".sqlite");
            let file = format!("{stem}.perfetto-trace");
            saving.set(Some("Preparing the Perfetto trace…".to_owned()));
            spawn_local(async move {
                let outcome = match api::save_perfetto_trace(report, file.clone()).await {
                    Ok(()) => {
                        format!("Saved {file}: open it at ui.perfetto.dev (Open trace file).")
                    }
                    Err(e) => format!("Cannot export the trace: {e}"),
                };
                saving.set(Some(outcome));
            });
        }
    };
    let header = move |tl: &Timeline| {
        let events: u64 = tl.tracks.iter().map(|t| t.events).sum();
        let notes = tl.notes.clone();
        view! {
            <p class="muted" data-testid="timeline-summary">
                {format!("{} tracks, {events} events over {}. ", tl.tracks.len(), duration((tl.end_ns - tl.start_ns) as f64))}
                "W/S or Ctrl+wheel zoom, A/D or Shift+wheel pan, drag to select a range, click an event, click a label to fold it."
            </p>
            <ul class="notes">{notes.into_iter().map(|n| view! { <li>{n}</li> }).collect_view()}</ul>
        }
    };
    view! {
        <section class="timeline" data-testid="timeline">
            <h2>"Timeline " <code data-testid="timeline-report">{report.clone()}</code></h2>
            <div class="buttons">
                <Link shared to=back>"Back to the session"</Link>
                <label for="timeline-search">"Highlight"</label>
                <input id="timeline-search" type="search" placeholder="name contains…" data-testid="timeline-search"
                    title="Enter: next match, Shift+Enter: previous" on:input=search on:keydown=on_search_key/>
                <button on:click=previous data-testid="timeline-search-prev" title="The previous event whose name matches (Shift+Enter)">"◀ Previous"</button>
                <button on:click=next data-testid="timeline-search-next" title="The next event whose name matches (Enter)">"Next ▶"</button>
                <button on:click=reset data-testid="timeline-reset">"Show all"</button>
                <button on:click=perfetto data-testid="timeline-perfetto" title="A Perfetto trace of the whole report (protobuf), for ui.perfetto.dev or its trace processor">"Download for Perfetto"</button>
            </div>
            <p class="muted" role="status" data-testid="timeline-search-status">{move || search_status.get()}</p>
            <p class="muted" role="status" data-testid="timeline-perfetto-status">{move || saving.get()}</p>
            {move || match data.get() {
                None => view! { <p>"Indexing the report…"</p> }.into_any(),
                Some(Err(e)) => failed("the timeline", e),
                Some(Ok(tl)) => header(&tl).into_any(),
            }}
            <div class="timeline-canvas" node_ref=container></div>
            <div class="timeline-panels">
                <DetailPanel report=report.clone() selected viewer=Rc::new(viewer)/>
                <RangePanel report=report.clone() selection/>
            </div>
        </section>
    }
}

/// The selected event's details.
#[component]
fn DetailPanel(
    report: String,
    selected: RwSignal<Option<(u32, u32)>>,
    viewer: Rc<dyn Fn() -> Option<Rc<RefCell<viewer::Viewer>>>>,
) -> impl IntoView {
    let detail = LocalResource::new(move || {
        let report = report.clone();
        let picked = selected.get();
        async move {
            match picked {
                Some((t, e)) => api::timeline_event(report, t, e).await.map(Some),
                None => Ok(None),
            }
        }
    });
    let viewer = StoredValue::new_local(viewer);
    let go_to = move |track: u32, event: u32| {
        if let Some(v) = viewer.with_value(|f| f()) {
            viewer::reveal(&v, track);
            viewer::select(&v, Some((track, event)));
        }
        selected.set(Some((track, event)));
    };
    let zoom = move |d: &EventDetail| {
        let (a, b) = (d.start_ns as f64, d.end_ns as f64);
        let pad = ((b - a) * 0.5).max(100.0);
        move |_| {
            if let Some(v) = viewer.with_value(|f| f()) {
                viewer::show(&v, a - pad, b + pad);
            }
        }
    };
    view! {
        <article class="panel" data-testid="timeline-detail">
            <h3>"Event"</h3>
            {move || match detail.get() {
                None => view! { <p>"Loading…"</p> }.into_any(),
                Some(Err(e)) => failed("the event", e),
                Some(Ok(None)) => view! { <p class="muted">"Click an event to see its details."</p> }.into_any(),
                Some(Ok(Some(d))) => {
                    let related = d.related.clone();
                    view! {
                        <p><b data-testid="detail-name">{d.name.clone()}</b></p>
                        <dl class="facts">
                            <dt>"Start"</dt><dd data-testid="detail-start">{d.start_ns}</dd>
                            <dt>"Duration"</dt><dd data-testid="detail-duration" data-ns=d.end_ns - d.start_ns>{duration((d.end_ns - d.start_ns) as f64)}</dd>
                        </dl>
                        <button on:click=zoom(&d)>"Zoom to it"</button>
                        <ul class="related">
                            {related.into_iter().map(|l| {
                                let (t, e) = (l.track, l.event);
                                view! {
                                    <li>{format!("{} ", l.relation)}
                                        <a href="#" data-testid="detail-related" on:click=move |ev| { ev.prevent_default(); go_to(t, e); }>{l.name.clone()}</a>
                                        {format!(" ({})", duration((l.end_ns - l.start_ns) as f64))}
                                    </li>
                                }
                            }).collect_view()}
                        </ul>
                        <table class="grid" data-testid="detail-fields">
                            <tbody>{d.fields.iter().map(|f| view! { <tr><th scope="row">{f.name.clone()}</th><td>{f.value.clone()}</td></tr> }).collect_view()}</tbody>
                        </table>
                    }
                    .into_any()
                }
            }}
        </article>
    }
}

/// The selected range's aggregates.
#[component]
fn RangePanel(report: String, selection: RwSignal<Option<(f64, f64)>>) -> impl IntoView {
    let summary = LocalResource::new(move || {
        let report = report.clone();
        let sel = selection.get();
        async move {
            match sel {
                Some((a, b)) if b - a >= 1.0 => {
                    api::timeline_range(report, a.round() as i64, b.round() as i64, Vec::new())
                        .await
                        .map(Some)
                }
                _ => Ok(None),
            }
        }
    });
    let table = |s: RangeSummary| {
        view! {
            <p data-testid="range-span">{format!("{} selected", duration((s.end_ns - s.start_ns) as f64))}</p>
            <table class="grid" data-testid="range-table">
                <thead><tr><th>"Name"</th><th>"Count"</th><th>"Total"</th><th>"Busy"</th><th>"p50"</th><th>"p95"</th></tr></thead>
                <tbody>{s.names.into_iter().take(200).map(|n| view! {
                    <tr data-testid="range-row">
                        <td data-testid="range-name">{n.name.clone()}</td>
                        <td data-testid="range-count">{n.count}</td>
                        <td data-testid="range-total" data-ns=n.total_ns>{duration(n.total_ns as f64)}</td>
                        <td>{duration(n.busy_ns as f64)}</td>
                        <td>{duration(n.p50_ns as f64)}</td>
                        <td>{duration(n.p95_ns as f64)}</td>
                    </tr>
                }).collect_view()}</tbody>
            </table>
        }
    };
    view! {
        <article class="panel" data-testid="timeline-range">
            <h3>"Selection"</h3>
            {move || match summary.get() {
                None => view! { <p>"Loading…"</p> }.into_any(),
                Some(Err(e)) => failed("the selection", e),
                Some(Ok(None)) => view! { <p class="muted">"Drag across the timeline to select a range (Esc clears it)."</p> }.into_any(),
                Some(Ok(Some(s))) => table(s).into_any(),
            }}
        </article>
    }
}
