//! The Nsight Cloud UI, a Leptos client-side-rendered app.
//!
//! `start` only mounts; the shell is `app`, the pages `pages/`, the REST calls `api` (typed by
//! `nsight_contracts`, the same types the servers and the CLI use). The page grows with the
//! REST APIs it calls (sessions, reports, analysis) as they land.

mod api;
mod app;
mod pages;

pub use app::App;

/// Entry point called by the wasm-bindgen glue once the module is instantiated.
#[wasm_bindgen::prelude::wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(App);
}
