//! Live updates without a poll of everything: while `active` says something is in progress (a
//! collection collecting or stopping, a job queued or running), the page's data is fetched again
//! every [`PERIOD`]; when nothing is in progress nothing is fetched.

use std::time::Duration;

use leptos::prelude::*;

use crate::app::Shared;

/// How often data in progress is fetched again.
pub const PERIOD: Duration = Duration::from_millis(1500);

/// Refreshes `shared` every [`PERIOD`] while `active` is true; stops with the calling component.
pub fn refresh_while(shared: Shared, active: Signal<bool>) {
    let handle = set_interval_with_handle(
        move || {
            if active.get_untracked() {
                shared.refresh();
            }
        },
        PERIOD,
    );
    if let Ok(handle) = handle {
        on_cleanup(move || handle.clear());
    }
}
