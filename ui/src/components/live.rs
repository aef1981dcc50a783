//! Live updates without a poll of everything: while `active` says something is in progress (a
//! collection collecting or stopping, a job queued or running), the page's data is fetched again
//! every [`PERIOD`]; when nothing is in progress nothing is fetched. Several components may ask
//! at once (the sessions list and a session's detail): their ticks share one clock, so the data
//! is fetched once per period, not once per component. (The coordinator's `GET /changes` long
//! poll is not followed yet: see docs/ui.md, "Not done yet".)

use std::{cell::Cell, time::Duration};

use leptos::prelude::*;

use crate::app::Shared;

/// Resolves after `period` (the browser's timer).
pub async fn sleep(period: Duration) {
    let ms = i32::try_from(period.as_millis()).unwrap_or(i32::MAX);
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(window) = web_sys::window() {
            let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// How often data in progress is fetched again.
pub const PERIOD: Duration = Duration::from_millis(1500);

thread_local! {
    /// When a tick last refreshed (ms since the epoch, the browser's clock).
    static LAST_TICK: Cell<f64> = const { Cell::new(0.0) };
}

/// Refreshes unless another component's tick did within most of a period.
fn tick(shared: Shared) {
    let now = js_sys::Date::now();
    let due = LAST_TICK.with(|last| {
        let due = now - last.get() >= PERIOD.as_millis() as f64 * 0.8;
        if due {
            last.set(now);
        }
        due
    });
    if due {
        shared.refresh();
    }
}

/// Refreshes `shared` every [`PERIOD`] while `active` is true; stops with the calling component.
pub fn refresh_while(shared: Shared, active: Signal<bool>) {
    let handle = set_interval_with_handle(
        move || {
            if active.get_untracked() {
                tick(shared);
            }
        },
        PERIOD,
    );
    if let Ok(handle) = handle {
        on_cleanup(move || handle.clear());
    }
}
