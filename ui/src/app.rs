//! The application shell: header and the landing view (the sessions page).

use leptos::prelude::*;

use crate::pages::sessions::SessionsPage;

/// The product name shown in the header and the document title.
pub const PRODUCT: &str = "Nsight Cloud";

#[component]
pub fn App() -> impl IntoView {
    view! {
        <header>
            <h1 data-testid="product">{PRODUCT}</h1>
        </header>
        <main>
            <p data-testid="runtime">{format!("UI {} running in WebAssembly", env!("CARGO_PKG_VERSION"))}</p>
            <SessionsPage/>
        </main>
    }
}
