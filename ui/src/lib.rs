//! The Nsight Cloud UI, a Leptos client-side-rendered app.
//!
//! `start` only mounts. The shell is `app` (shared signals, header, tabs); the view state lives
//! in the URL (`route`); the REST calls are `api` (typed by `nsight_contracts`, the same types
//! the servers and the CLI use); an API key the user types is `auth`'s; the pages are in
//! `pages/`, the pieces they share (the sortable table, status badges) in `components/`.

mod api;
mod app;
mod auth;
mod components;
mod format;
mod pages;
mod route;

pub use app::App;

/// Entry point called by the wasm-bindgen glue once the module is instantiated.
#[wasm_bindgen::prelude::wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
    // The page's own "Loading…" line, shown until the module runs.
    if let Some(boot) = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id("boot"))
    {
        boot.remove();
    }
    leptos::mount::mount_to_body(App);
}
