//! The application shell: the shared signals (view state, reload counter, sign-in prompt),
//! the header with the tag selector and the tabs, and the page the view names.
//!
//! ```text
//!  URL ──View──> Shared::view ──tab──> SessionsPage (list + actions | SessionDetail)
//!                                 ├──> AnalysisPage (recipes + form | jobs | JobDetail)
//!                                 ├──> TimelinePage (one report: canvas, details, selection)
//!                                 └──> StreamersPage (the user's streamers, the cap)
//!  Shared::reload: bumped after an action, a sign-in or a live-update tick; every fetch reads it
//! ```

use leptos::prelude::*;

use crate::{
    auth::{self, KeyPrompt},
    pages::{
        analysis::AnalysisPage, sessions::SessionsPage, streamers::StreamersPage,
        timeline::TimelinePage,
    },
    route::{follow_history, Link, Tab, View},
};

/// The product name shown in the header and the document title.
pub const PRODUCT: &str = "Nsight Cloud";

/// Signals every page shares; `Copy`, so passed by value.
#[derive(Debug, Clone, Copy)]
pub struct Shared {
    /// What is shown; mirrors the URL.
    pub view: RwSignal<View>,
    /// Bumped to fetch everything shown again.
    pub reload: RwSignal<u32>,
    /// The gateway answered 401: the key prompt is shown.
    pub auth_needed: RwSignal<bool>,
}

impl Shared {
    /// Fetch what is shown again.
    pub fn refresh(self) {
        self.reload.update(|n| *n = n.wrapping_add(1));
    }
}

#[component]
pub fn App() -> impl IntoView {
    let shared = Shared {
        view: RwSignal::new(View::current()),
        reload: RwSignal::new(0),
        auth_needed: RwSignal::new(false),
    };
    auth::install(shared);
    follow_history(shared);
    // A memo: the page is built again only when the tab changes, not on every view change.
    let tab = Memo::new(move |_| shared.view.with(|v| v.tab));
    let tab_link = move |to: Tab, label: &'static str, testid: &'static str| {
        let view = shared.view.get();
        let target = View {
            tab: to,
            tag: view.tag.clone(),
            ..View::default()
        };
        view! { <Link shared to=target testid=testid current={view.tab == to}>{label}</Link> }
    };
    view! {
        <header class="top">
            <h1 data-testid="product">{PRODUCT}</h1>
            <nav aria-label="Pages" class="tabs">
                {move || tab_link(Tab::Sessions, "Sessions", "tab-sessions")}
                {move || tab_link(Tab::Analysis, "Analysis", "tab-analysis")}
                {move || tab_link(Tab::Timeline, "Timeline", "tab-timeline")}
                {move || tab_link(Tab::Streamers, "Streamers", "tab-streamers")}
            </nav>
            <span class="version" data-testid="runtime">{format!("UI {} running in WebAssembly", env!("CARGO_PKG_VERSION"))}</span>
        </header>
        <KeyPrompt shared/>
        <main>
            {move || match tab.get() {
                Tab::Sessions => view! { <SessionsPage shared/> }.into_any(),
                Tab::Analysis => view! { <AnalysisPage shared/> }.into_any(),
                Tab::Timeline => view! { <TimelinePage shared/> }.into_any(),
                Tab::Streamers => view! { <StreamersPage shared/> }.into_any(),
            }}
        </main>
    }
}
