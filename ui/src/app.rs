//! The application shell: header and the landing view.

use leptos::prelude::*;

/// The product name shown in the header and the document title.
pub const PRODUCT: &str = "Nsight Cloud";

#[component]
pub fn App() -> impl IntoView {
    let (clicks, set_clicks) = signal(0u32);
    view! {
        <header>
            <h1 data-testid="product">{PRODUCT}</h1>
        </header>
        <main>
            <p data-testid="runtime">{format!("UI {} running in WebAssembly", env!("CARGO_PKG_VERSION"))}</p>
            <button data-testid="refresh" on:click=move |_| set_clicks.update(|n| *n += 1)>
                "Refresh"
            </button>
            <span data-testid="refresh-count">{move || clicks.get().to_string()}</span>
        </main>
    }
}
