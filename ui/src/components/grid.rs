//! A job's CSV table as a sortable grid: the file is fetched (with the tab's credentials),
//! parsed by `nsight_contracts::table`, and shown with a sort button in each column header
//! (`aria-sort` says the order; numbers sort by value). Only the first [`MAX_ROWS`] rows of the
//! chosen order are drawn; the download has them all.

use leptos::{prelude::*, task::spawn_local};
use nsight_contracts::table::Table;
use wasm_bindgen::JsCast;

use crate::api;

/// Rows drawn at most (the grid is not virtualised yet).
pub const MAX_ROWS: usize = 1000;

/// Saves `text` as a file named `name` (a data: link clicked by the page).
pub fn download_text(name: &str, media_type: &str, text: &str) {
    let Some(document) = web_sys::window().and_then(|w| w.document()) else {
        return;
    };
    let Ok(anchor) = document
        .create_element("a")
        .map(|e| e.unchecked_into::<web_sys::HtmlAnchorElement>())
    else {
        return;
    };
    anchor.set_href(&format!(
        "data:{media_type};charset=utf-8,{}",
        api::encode(text)
    ));
    anchor.set_download(name);
    anchor.click();
}

/// The grid of one CSV file of a job.
#[component]
pub fn CsvGrid(job: String, name: String, size: String) -> impl IntoView {
    let text = LocalResource::new({
        let (job, name) = (job.clone(), name.clone());
        move || api::job_file(job.clone(), name.clone())
    });
    // (column, descending); None keeps the file's order.
    let sort = RwSignal::new(None::<(usize, bool)>);
    let table = Memo::new(move |_| text.get().and_then(Result::ok).map(|t| Table::parse(&t)));
    let header_cell = move |index: usize, title: String| {
        let state = move || sort.get().filter(|s| s.0 == index).map(|s| s.1);
        let aria = move || match state() {
            Some(true) => "descending",
            Some(false) => "ascending",
            None => "none",
        };
        let arrow = move || match state() {
            Some(true) => " ▼",
            Some(false) => " ▲",
            None => "",
        };
        let click = move |_| {
            // First click: numbers largest first (what a summary reader wants), text A-Z.
            sort.update(|s| {
                *s = match *s {
                    Some((c, d)) if c == index => Some((c, !d)),
                    _ => Some((index, true)),
                }
            })
        };
        view! {
            <th scope="col" aria-sort=aria>
                <button class="sort" data-testid="sort" on:click=click>{title}{arrow}</button>
            </th>
        }
    };
    let body = move || {
        let table = table.get()?;
        let order = match sort.get() {
            Some((column, descending)) => table.sorted(column, descending),
            None => (0..table.rows.len()).collect(),
        };
        let total = order.len();
        let rows = order
            .into_iter()
            .take(MAX_ROWS)
            .map(|i| {
                let cells = table.rows[i]
                    .iter()
                    .map(|c| view! { <td>{c.clone()}</td> })
                    .collect_view();
                view! { <tr data-testid="grid-row">{cells}</tr> }
            })
            .collect_view();
        let headers = table
            .header
            .iter()
            .enumerate()
            .map(|(i, h)| header_cell(i, h.clone()))
            .collect_view();
        let cut = (total > MAX_ROWS)
            .then(|| view! { <p>{format!("Showing the first {MAX_ROWS} of {total} rows; the download has them all.")}</p> });
        Some(view! {
            <table class="grid" data-testid="grid">
                <thead><tr>{headers}</tr></thead>
                <tbody>{rows}</tbody>
            </table>
            {cut}
        })
    };
    let download = {
        let name = name.clone();
        move |_| {
            let name = name.clone();
            spawn_local(async move {
                if let Some(Ok(t)) = text.get_untracked() {
                    download_text(&name, "text/csv", &t);
                }
            });
        }
    };
    let caption = format!("{name} ({size})");
    let file = name.clone();
    view! {
        <section class="table-output" data-testid="csv-output" data-file=file>
            <h4>{caption}</h4>
            <button data-testid="csv-download" on:click=download>"Download CSV"</button>
            {move || match text.get() {
                None => Some(view! { <p>"Loading the table…"</p> }.into_any()),
                Some(Err(e)) => Some(view! { <p role="alert">{format!("Cannot read {name}: {e}")}</p> }.into_any()),
                Some(Ok(_)) => None,
            }}
            {body}
        </section>
    }
}
