//! The view state, all of it in the URL's query string, so that a link (or a reload) reopens
//! exactly what was shown: `/?tab=analysis&tag=default&session=<id>&job=<id>`. The shell holds it
//! in one signal; [`go`] changes it and pushes a history entry; the back button (popstate)
//! reads the URL again. Links are real `<a href>`s, so they open in a new tab too.
//!
//! ```text
//!  location.search ──View::parse──> Shared::view ──pages render──> <Link to=View{..}>
//!        ^                                                             │ click
//!        └──────────────── history.pushState(View::query) <──── go ────┘
//! ```

use leptos::prelude::*;
use nsight_contracts::coordinator::Tag;

use crate::{api::encode, app::Shared};

/// The top-level pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Tab {
    #[default]
    Sessions,
    Analysis,
    /// One report's timeline.
    Timeline,
    /// The user's Nsight Streamers.
    Streamers,
}

impl Tab {
    pub fn as_str(self) -> &'static str {
        match self {
            Tab::Sessions => "sessions",
            Tab::Analysis => "analysis",
            Tab::Timeline => "timeline",
            Tab::Streamers => "streamers",
        }
    }
}

/// Everything a page shows that a link must reopen. `tag` is always a valid tag (an invalid
/// one in a URL falls back to `default`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub tab: Tab,
    pub tag: String,
    /// The session shown in detail (sessions tab), or the input of a new job (analysis tab).
    pub session: Option<String>,
    /// The collection a new job reads (analysis tab).
    pub collection: Option<String>,
    /// The recipe whose form is open.
    pub recipe: Option<String>,
    /// The job shown in detail.
    pub job: Option<String>,
    /// The jobs list's status filter.
    pub status: Option<String>,
    /// The sessions list's state filter (`open`, `ended`).
    pub state: Option<String>,
    /// The words that filter the tab's list (sessions, or jobs on the analysis tab).
    pub q: Option<String>,
    /// The sessions list's order (`began`, `-collections`: `SessionOrder::parse`); none: newest
    /// first.
    pub sort: Option<String>,
    /// The report whose timeline is shown (its object key).
    pub report: Option<String>,
    /// The timeline's visible time range, `<from>_<to>` in ns.
    pub range: Option<String>,
    /// The timeline's selected event, `<track>.<event>`.
    pub event: Option<String>,
    /// The timeline's selected range, `<start>_<end>` in ns.
    pub sel: Option<String>,
}

impl Default for View {
    fn default() -> Self {
        View {
            tab: Tab::Sessions,
            tag: Tag::DEFAULT.to_owned(),
            session: None,
            collection: None,
            recipe: None,
            job: None,
            status: None,
            state: None,
            q: None,
            sort: None,
            report: None,
            range: None,
            event: None,
            sel: None,
        }
    }
}

fn decode(raw: &str) -> String {
    let spaced = raw.replace('+', " ");
    js_sys::decode_uri_component(&spaced)
        .map(String::from)
        .unwrap_or(spaced)
}

impl View {
    /// Reads a query string (`?a=b&c=d`, with or without the `?`). Unknown keys are ignored.
    pub fn parse(search: &str) -> View {
        let mut view = View::default();
        for pair in search.trim_start_matches('?').split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = decode(value);
            let some = (!value.is_empty()).then(|| value.clone());
            match key {
                "tab" if value == Tab::Analysis.as_str() => view.tab = Tab::Analysis,
                "tab" if value == Tab::Timeline.as_str() => view.tab = Tab::Timeline,
                "tab" if value == Tab::Streamers.as_str() => view.tab = Tab::Streamers,
                "tag" => {
                    if Tag::parse(&value).is_ok() {
                        view.tag = value;
                    }
                }
                "session" => view.session = some,
                "collection" => view.collection = some,
                "recipe" => view.recipe = some,
                "job" => view.job = some,
                "status" => view.status = some,
                "state" => view.state = some,
                "q" => view.q = some,
                "sort" => view.sort = some,
                "report" => view.report = some,
                "range" => view.range = some,
                "event" => view.event = some,
                "sel" => view.sel = some,
                _ => {}
            }
        }
        view
    }

    /// The query string that [`View::parse`] reads back into this view (defaults left out).
    pub fn query(&self) -> String {
        let mut parts = Vec::new();
        if self.tab != Tab::Sessions {
            parts.push(format!("tab={}", self.tab.as_str()));
        }
        if self.tag != Tag::DEFAULT {
            parts.push(format!("tag={}", encode(&self.tag)));
        }
        let optional = [
            ("session", &self.session),
            ("collection", &self.collection),
            ("recipe", &self.recipe),
            ("job", &self.job),
            ("status", &self.status),
            ("state", &self.state),
            ("q", &self.q),
            ("sort", &self.sort),
            ("report", &self.report),
            ("range", &self.range),
            ("event", &self.event),
            ("sel", &self.sel),
        ];
        for (key, value) in optional {
            if let Some(v) = value {
                parts.push(format!("{key}={}", encode(v)));
            }
        }
        format!("/?{}", parts.join("&"))
    }

    /// The view on the URL now.
    pub fn current() -> View {
        let search = web_sys::window()
            .and_then(|w| w.location().search().ok())
            .unwrap_or_default();
        View::parse(&search)
    }
}

/// Shows `to` and records it in the history (a new entry, so Back returns).
pub fn go(shared: Shared, to: View) {
    if let Some(history) = web_sys::window().and_then(|w| w.history().ok()) {
        let _ = history.push_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&to.query()));
    }
    shared.view.set(to);
}

/// Records `to` in the URL without a new history entry (a view that changes as the user zooms
/// or selects; Back leaves the page instead of replaying every step).
pub fn replace(shared: Shared, to: View) {
    if let Some(history) = web_sys::window().and_then(|w| w.history().ok()) {
        let _ = history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&to.query()));
    }
    shared.view.set(to);
}

/// Keeps the view in step with Back and Forward.
pub fn follow_history(shared: Shared) {
    let handle = window_event_listener(leptos::ev::popstate, move |_| {
        shared.view.set(View::current());
    });
    // The shell lives as long as the page.
    std::mem::forget(handle);
}

/// A link to another view: a real `href` (new tab, copy link), in-page on a plain click.
#[component]
pub fn Link(
    shared: Shared,
    to: View,
    children: Children,
    #[prop(optional, into)] testid: Option<String>,
    #[prop(optional, into)] current: bool,
) -> impl IntoView {
    let href = to.query();
    let click = move |ev: leptos::ev::MouseEvent| {
        if ev.ctrl_key() || ev.meta_key() || ev.shift_key() || ev.button() != 0 {
            return;
        }
        ev.prevent_default();
        go(shared, to.clone());
    };
    view! {
        <a href=href on:click=click data-testid=testid aria-current=current.then_some("page")>
            {children()}
        </a>
    }
}
