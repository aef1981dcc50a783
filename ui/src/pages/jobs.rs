//! Analysis jobs: the list (filtered by status and by words, both in the URL; a page of rows
//! drawn at a time, `components::list_filter`) and one job in detail:
//! its status, times, input, reason and notes, its log, cancel and delete, and its outputs:
//! each CSV table in a sortable grid with a download, SVG figures inline, and the notebook page.
//! Data: `GET /jobs?status`, `GET /jobs/{id}`, `/logs`, `/files/<name>`, `/notebook.html`;
//! `POST /jobs/{id}/cancel`, `DELETE /jobs/{id}`. A job still queued or running is fetched again
//! until it ends.

use leptos::{prelude::*, task::spawn_local};
use nsight_contracts::analysis::{Job, JobStatus, OutputFile};

use crate::{
    api,
    app::Shared,
    components::{
        grid::{download_text, CsvGrid},
        list_filter::{self, ListFilter, Paging},
        live::refresh_while,
        notice::{Notice, NoticeLine},
    },
    format::{bytes, utc, utc_or_dash},
    route::{go, Link},
};

fn job_row(shared: Shared, job: Job, selected: bool) -> impl IntoView {
    let id = job.id.to_string();
    let mut to = shared.view.get_untracked();
    to.job = Some(id.clone());
    let input = match &job.collection {
        Some(c) => format!("{} / {c}", job.session),
        None => job.session.clone(),
    };
    let label = id.clone();
    view! {
        <tr data-testid="job-row" data-job=id class:selected=selected>
            <td><Link shared to testid="job-link" current=selected><code>{label}</code></Link></td>
            <td>{job.recipe.clone()}</td>
            <td data-testid="job-row-status">{job.status.as_str()}</td>
            <td><code>{input}</code></td>
            <td>{utc(job.created_at)}</td>
        </tr>
    }
}

/// The newest jobs, filtered by status and words (the service filters and sends a page).
#[component]
pub fn JobsList(shared: Shared) -> impl IntoView {
    let status = Memo::new(move |_| shared.view.with(|v| v.status.clone()));
    let words = Memo::new(move |_| list_filter::query(shared));
    let paging = Paging::new();
    let jobs = LocalResource::new(move || {
        shared.reload.track();
        let words = words.get();
        let limit = paging.limit(&words);
        api::jobs(status.get(), Some(words), limit)
    });
    let filter = move |ev: leptos::ev::Event| {
        let value = event_target_value(&ev);
        let mut to = shared.view.get_untracked();
        to.status = (!value.is_empty()).then_some(value);
        go(shared, to);
    };
    let options = JobStatus::ALL.map(|s| {
        let name = s.as_str();
        view! { <option value=name selected=move || status.get().as_deref() == Some(name)>{name}</option> }
    });
    let list = move || {
        match jobs.get() {
        None => view! { <p>"Loading jobs…"</p> }.into_any(),
        Some(Err(e)) => view! { <p role="alert" data-testid="jobs-error">{format!("Cannot list jobs: {e}")}</p> }.into_any(),
        Some(Ok(list)) if list.jobs.is_empty() && words.get().trim().is_empty() => view! { <p data-testid="jobs-empty">"No jobs here yet: run a recipe above."</p> }.into_any(),
        Some(Ok(list)) => {
            let selected = shared.view.with(|v| v.job.clone());
            let q = words.get();
            // An older service ignores `q` and `limit`: filter and cut here too.
            let matching: Vec<Job> = list.jobs.into_iter().rev().filter(|j| j.matches(&q)).collect();
            if matching.is_empty() {
                return view! {
                    <p data-testid="jobs-empty">{format!("No job matches “{}”.", q.trim())}</p>
                }
                .into_any();
            }
            let window = paging.window(&q, list.matched.unwrap_or(matching.len()));
            let rows = matching.into_iter().take(window.shown).map(|j| {
                let is = selected.as_deref() == Some(j.id.to_string().as_str());
                job_row(shared, j, is)
            });
            view! {
                {Paging::count(window, "job", "jobs")}
                <table data-testid="jobs">
                    <thead><tr>
                        <th scope="col">"Job"</th><th scope="col">"Recipe"</th><th scope="col">"Status"</th>
                        <th scope="col">"Input"</th><th scope="col">"Created"</th>
                    </tr></thead>
                    <tbody>{rows.collect_view()}</tbody>
                </table>
                {paging.more(q, window)}
            }
            .into_any()
        }
    }
    };
    view! {
        <section aria-labelledby="jobs-heading">
            <h2 id="jobs-heading">"Jobs"</h2>
            <label for="job-status-filter">"Status"</label>
            <select id="job-status-filter" data-testid="job-status-filter" on:change=filter>
                <option value="" selected=move || status.get().is_none()>"any"</option>
                {options}
            </select>
            <ListFilter shared testid="job-filter" label="Find" placeholder="ID, recipe, status or session"/>
            {list}
        </section>
    }
}

/// One output file: CSV as a grid, SVG inline, anything else as a download.
fn output_view(job: String, file: OutputFile) -> AnyView {
    let name = file.name.clone();
    let size = bytes(file.size);
    if name.ends_with(".csv") {
        return view! { <CsvGrid job name size/> }.into_any();
    }
    if name.ends_with(".svg") {
        let svg = LocalResource::new({
            let (job, name) = (job.clone(), name.clone());
            move || api::job_file(job.clone(), name.clone())
        });
        let alt = format!("figure {name}");
        return view! {
            <figure data-testid="figure">
                {move || svg.get().and_then(Result::ok).map(|text| {
                    let src = format!("data:image/svg+xml;charset=utf-8,{}", api::encode(&text));
                    view! { <img src=src alt=alt.clone()/> }
                })}
                <figcaption>{format!("{name} ({size})")}</figcaption>
            </figure>
        }
        .into_any();
    }
    let download = move |_| {
        let (job, name) = (job.clone(), name.clone());
        spawn_local(async move {
            if let Ok(text) = api::job_file(job, name.clone()).await {
                download_text(&name, "application/octet-stream", &text);
            }
        });
    };
    view! {
        <p>
            <button data-testid="file-download" on:click=download>{format!("Download {} ({size})", file.name)}</button>
        </p>
    }
    .into_any()
}

fn facts(job: &Job) -> impl IntoView {
    let input = job
        .inputs
        .iter()
        .map(|i| match &i.collection {
            Some(c) => format!("{} / collection {c}", i.session),
            None => i.session.clone(),
        })
        .collect::<Vec<_>>()
        .join("; ");
    let input = if input.is_empty() {
        job.session.clone()
    } else {
        input
    };
    let args = if job.args.is_empty() {
        "(defaults)".to_owned()
    } else {
        job.args.join(" ")
    };
    view! {
        <dl class="facts">
            <dt>"Recipe"</dt><dd>{job.recipe.clone()}</dd>
            <dt>"Status"</dt><dd data-testid="job-status">{job.status.as_str()}</dd>
            <dt>"Arguments"</dt><dd><code data-testid="job-args">{args}</code></dd>
            <dt>"Input"</dt><dd><code>{input}</code></dd>
            <dt>"Created"</dt><dd>{utc(job.created_at)}</dd>
            <dt>"Started"</dt><dd>{utc_or_dash(job.started_at)}</dd>
            <dt>"Finished"</dt><dd>{utc_or_dash(job.finished_at)}</dd>
            <dt>"Reports read"</dt><dd>{job.reports.len()}</dd>
        </dl>
        {job.reason.clone().map(|r| view! { <p role="alert" data-testid="job-reason">{format!("Reason: {r}")}</p> })}
        {(!job.notes.is_empty()).then(|| view! {
            <ul class="notes" aria-label="Notes">{job.notes.iter().map(|n| view! { <li>{n.clone()}</li> }).collect_view()}</ul>
        })}
    }
}

/// The notebook page, shown in a sandboxed frame (no scripts; figures are data: images).
#[component]
fn Notebook(job: String) -> impl IntoView {
    let html = LocalResource::new(move || api::job_notebook(job.clone()));
    move || {
        match html.get() {
        None => view! { <p>"Loading the notebook…"</p> }.into_any(),
        Some(Err(e)) => view! { <p role="alert">{format!("No notebook: {e}")}</p> }.into_any(),
        Some(Ok(page)) => view! {
            <iframe class="notebook" title="The job's notebook" sandbox="" srcdoc=page data-testid="notebook"></iframe>
        }
        .into_any(),
    }
    }
}

#[component]
pub fn JobDetail(shared: Shared, id: String) -> impl IntoView {
    let job = LocalResource::new({
        let id = id.clone();
        move || {
            shared.reload.track();
            api::job(id.clone())
        }
    });
    let logs = LocalResource::new({
        let id = id.clone();
        move || {
            shared.reload.track();
            api::job_logs(id.clone())
        }
    });
    let live = Signal::derive(move || {
        job.get()
            .and_then(Result::ok)
            .is_some_and(|j| !j.status.is_terminal())
    });
    refresh_while(shared, live);
    let notice = RwSignal::new(None::<Notice>);
    let cancel = {
        let id = id.clone();
        move |_| {
            let id = id.clone();
            spawn_local(async move {
                notice.set(Some(match api::cancel_job(id).await {
                    Ok(j) => {
                        Notice::Done(format!("Cancel asked; the job is {}", j.status.as_str()))
                    }
                    Err(e) => Notice::Failed(format!("Cannot cancel: {e}")),
                }));
                shared.refresh();
            });
        }
    };
    let delete = {
        let id = id.clone();
        move |_| {
            let id = id.clone();
            spawn_local(async move {
                match api::delete_job(id).await {
                    Ok(()) => {
                        let mut to = shared.view.get_untracked();
                        to.job = None;
                        go(shared, to);
                        shared.refresh();
                    }
                    Err(e) => notice.set(Some(Notice::Failed(format!("Cannot delete: {e}")))),
                }
            });
        }
    };
    let outputs = {
        let id = id.clone();
        move || {
            let j = job.get().and_then(Result::ok)?;
            if j.status != JobStatus::Succeeded {
                return None;
            }
            let files = j
                .files
                .into_iter()
                .filter(|f| !f.name.ends_with(".html"))
                .map(|f| output_view(id.clone(), f))
                .collect_view();
            Some(view! {
                <h3>"Outputs"</h3>
                {files}
                <h3>"Notebook"</h3>
                <Notebook job=id.clone()/>
            })
        }
    };
    view! {
        <section class="detail" aria-labelledby="job-heading" data-testid="job-detail">
            <h2 id="job-heading">"Job " <code>{id.clone()}</code></h2>
            {move || match job.get() {
                None => view! { <p>"Loading the job…"</p> }.into_any(),
                Some(Err(e)) => view! { <p role="alert" data-testid="job-error">{format!("Cannot read the job: {e}")}</p> }.into_any(),
                Some(Ok(j)) => {
                    let terminal = j.status.is_terminal();
                    view! {
                        {facts(&j)}
                        <div class="buttons">
                            <button data-testid="job-cancel" disabled=terminal on:click=cancel.clone()>"Cancel job"</button>
                            <button data-testid="job-delete" disabled=!terminal on:click=delete.clone()>"Delete job"</button>
                        </div>
                    }
                    .into_any()
                }
            }}
            <NoticeLine notice testid="job-notice"/>
            <details>
                <summary>"Log"</summary>
                {move || logs.get().and_then(Result::ok).map(|l| view! {
                    <pre data-testid="job-log">{l.lines.into_iter().map(|e| format!("{} {:5} {}\n", utc(e.time), e.level, e.message)).collect::<String>()}</pre>
                })}
            </details>
            {outputs}
        </section>
    }
}
