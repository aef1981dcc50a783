//! Live updates without a poll of everything.
//!
//! - The coordinator's data (sessions, collections, agents' outcomes) follows its changes
//!   ([`follow_changes`]): one long poll (`GET /changes?since=<version>`) is outstanding at a
//!   time; when the version moves (a collection started from the CLI, an upload completed, an
//!   agent timed out) what the page shows is fetched again, at most once a second; when
//!   nothing changes nothing is fetched but the poll itself, every 25 s.
//! - The analysis service's jobs have no change feed: while `active` says a job is queued or
//!   running ([`refresh_while`]), the page's data is fetched again every [`PERIOD`]. Several
//!   components asking at once share one clock.

use std::{
    cell::Cell,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use leptos::{prelude::*, task::spawn_local};

use crate::{api, app::Shared};

/// After a change is shown, how long before the next poll (bursts of changes, such as
/// thousands of agents acknowledging a start, cost one fetch a second).
const CHANGE_COALESCE: Duration = Duration::from_secs(1);
/// After a failed poll (signed out, coordinator restarting), how long before the next.
const CHANGE_RETRY: Duration = Duration::from_secs(2);

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

/// Refreshes `shared` whenever the coordinator's state changes; stops with the calling
/// component.
pub fn follow_changes(shared: Shared) {
    let alive = Arc::new(AtomicBool::new(true));
    on_cleanup({
        let alive = alive.clone();
        move || alive.store(false, Ordering::Relaxed)
    });
    spawn_local(async move {
        let mut since = None;
        // A failed poll (not signed in yet, coordinator restarting) leaves a gap in which a
        // change may have been missed: the first answer after one refreshes whatever it says.
        let mut failed = false;
        while alive.load(Ordering::Relaxed) {
            let asked = js_sys::Date::now();
            match api::changes(since).await {
                Ok(now) => {
                    let moved = since.is_some_and(|v| v != now.version) || failed;
                    let first = since.is_none();
                    since = Some(now.version);
                    failed = false;
                    if moved && alive.load(Ordering::Relaxed) {
                        shared.refresh();
                        sleep(CHANGE_COALESCE).await;
                    } else if !first
                        && js_sys::Date::now() - asked < CHANGE_COALESCE.as_millis() as f64
                    {
                        // The same version at once: something between answers without
                        // waiting (an old coordinator, a cache); never poll in a tight loop.
                        sleep(CHANGE_COALESCE).await;
                    }
                }
                Err(_) => {
                    failed = true;
                    sleep(CHANGE_RETRY).await;
                }
            }
        }
    });
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
