//! The line under a row of buttons saying what the last action did (`role=status`) or why it
//! failed (`role=alert`), so screen readers announce it too.

use leptos::prelude::*;

/// The outcome of the last action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    Done(String),
    Failed(String),
}

/// Renders a notice signal; nothing while it is `None`.
#[component]
pub fn NoticeLine(notice: RwSignal<Option<Notice>>, testid: &'static str) -> impl IntoView {
    move || {
        notice.get().map(|n| match n {
            Notice::Done(text) => {
                view! { <p class="notice ok" role="status" data-testid=testid>{text}</p> }
                    .into_any()
            }
            Notice::Failed(text) => {
                view! { <p class="notice error" role="alert" data-testid=testid>{text}</p> }
                    .into_any()
            }
        })
    }
}
