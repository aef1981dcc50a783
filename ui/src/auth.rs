//! Credentials the UI itself holds: an API key the user typed when the gateway answered 401,
//! kept in the tab's session storage (gone when the tab closes; never in the URL or a log).
//! With OAuth2 the gateway's session cookie does the work and no key is asked for; where the
//! gateway answers a redirect instead (no session yet), the prompt links to its sign-in entry
//! point, which comes back to the same view.
//!
//! ```text
//!  api::send ── 401 ──> auth::needed() ──> <KeyPrompt> ── save ──> sessionStorage["nsight-api-key"]
//!                                                          └──> Shared::reload (pages fetch again)
//! ```

use std::cell::Cell;

use leptos::prelude::*;

use crate::{app::Shared, route::View};

const STORAGE_KEY: &str = "nsight-api-key";

/// The OAuth2 gateway's sign-in entry point, coming back to `view` once signed in (the
/// session cookie then goes with every request). The UI's own route is public, so the page
/// cannot start the sign-in by asking for itself.
fn sign_in_path(view: &View) -> String {
    let back = String::from(js_sys::encode_uri_component(&view.query()));
    format!("{}?to={back}", nsight_contracts::routes::OAUTH2_SIGNIN)
}

thread_local! {
    /// The app's shared signals, for `needed()` called from `api` (outside any component).
    static SHARED: Cell<Option<Shared>> = const { Cell::new(None) };
}

/// Registers the app's signals (called once by the shell).
pub fn install(shared: Shared) {
    SHARED.with(|s| s.set(Some(shared)));
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.session_storage().ok().flatten()
}

/// The API key typed in this tab, if any.
pub fn api_key() -> Option<String> {
    storage()?
        .get_item(STORAGE_KEY)
        .ok()
        .flatten()
        .filter(|k| !k.is_empty())
}

fn set_api_key(key: Option<&str>) {
    if let Some(s) = storage() {
        let _ = match key {
            Some(k) => s.set_item(STORAGE_KEY, k),
            None => s.remove_item(STORAGE_KEY),
        };
    }
}

/// The gateway answered 401: show the key prompt.
pub fn needed() {
    SHARED.with(|s| {
        if let Some(shared) = s.get() {
            shared.auth_needed.set(true);
        }
    });
}

/// Asks for the gateway's API key; shown while `auth_needed` is set.
#[component]
pub fn KeyPrompt(shared: Shared) -> impl IntoView {
    let key = RwSignal::new(String::new());
    let save = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let typed = key.get_untracked();
        let typed = typed.trim();
        set_api_key((!typed.is_empty()).then_some(typed));
        key.set(String::new());
        shared.auth_needed.set(false);
        shared.reload.update(|n| *n += 1);
    };
    view! {
        <Show when=move || shared.auth_needed.get()>
            <form class="auth" data-testid="api-key-form" on:submit=save role="dialog" aria-labelledby="auth-heading">
                <h2 id="auth-heading">"Sign-in needed"</h2>
                <p>
                    {move || {
                        shared.auth_needed.track();
                        if api_key().is_some() { "The gateway refused the API key of this tab. " } else { "The gateway asks for credentials. " }
                    }}
                    "Type the gateway's API key (kept in this tab only), or sign in through the gateway's login page when it uses OAuth2."
                </p>
                <label for="api-key">"API key"</label>
                <input id="api-key" data-testid="api-key" type="password" autocomplete="off"
                    prop:value=move || key.get()
                    on:input=move |ev| key.set(event_target_value(&ev))/>
                <button type="submit" data-testid="api-key-save">"Use this key"</button>
                <a href=move || sign_in_path(&shared.view.get()) data-testid="sign-in">"Sign in through the gateway (OAuth2)"</a>
            </form>
        </Show>
    }
}
