//! The text filter and the paging of a long list (a tag's sessions, the jobs): the words are in
//! the URL (`q`, replaced as one types, so a key press adds no history entry), and a page of the
//! matching rows is drawn, with "Show N more" below (`nsight_contracts::listing`). A tag with
//! thousands of sessions draws a hundred rows, not thousands; the jobs list asks the analysis
//! service for only those rows (`GET /jobs?q=&limit=`).

use leptos::prelude::*;
use nsight_contracts::listing::Window;

use crate::{app::Shared, route::replace};

/// The filter's words as the URL has them ("" when none).
pub fn query(shared: Shared) -> String {
    shared.view.with(|v| v.q.clone().unwrap_or_default())
}

/// The filter box: `testid` is also the input's id.
#[component]
pub fn ListFilter(
    shared: Shared,
    testid: &'static str,
    label: &'static str,
    placeholder: &'static str,
) -> impl IntoView {
    let input = move |ev: leptos::ev::Event| {
        let text = event_target_value(&ev);
        let mut to = shared.view.get_untracked();
        to.q = (!text.trim().is_empty()).then_some(text);
        replace(shared, to);
    };
    view! {
        <label for=testid>{label}</label>
        <input id=testid data-testid=testid type="search" placeholder=placeholder
            prop:value=move || query(shared) on:input=input/>
    }
}

/// How many rows a list draws: a page, more after each "Show more", a page again when the
/// filter changes.
#[derive(Debug, Clone, Copy)]
pub struct Paging {
    /// The filter the limit was raised for, and the limit.
    limit: RwSignal<(String, usize)>,
}

impl Paging {
    pub fn new() -> Self {
        Self {
            limit: RwSignal::new((String::new(), 0)),
        }
    }

    /// The window over `total` matching rows for the filter `query`.
    pub fn window(self, query: &str, total: usize) -> Window {
        Window::new(total, Some(self.limit(query)))
    }

    /// How many rows to draw (or to ask a server for) with the filter `query`.
    pub fn limit(self, query: &str) -> usize {
        self.limit
            .with(|(q, n)| (q == query && *n > 0).then_some(*n))
            .unwrap_or(nsight_contracts::listing::PAGE_ROWS)
    }

    /// The count line above the rows: `1 session`, `Showing 100 of 1,000 sessions`.
    pub fn count(window: Window, one: &'static str, many: &'static str) -> impl IntoView {
        view! { <p class="list-count" data-testid="list-count" role="status">{window.caption(one, many)}</p> }
    }

    /// "Show N more" below the rows, when some are not drawn.
    pub fn more(self, query: String, window: Window) -> Option<impl IntoView> {
        let more = window.more();
        (more > 0).then(|| {
            let next = window.next_limit();
            view! {
                <button data-testid="show-more" on:click=move |_| self.limit.set((query.clone(), next))>
                    {format!("Show {more} more")}
                </button>
            }
        })
    }
}
