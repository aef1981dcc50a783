//! Deletes idle streamers: every `core::reap_interval`, list, ask `core::idle` at the wall
//! clock, delete each idle one unless it changed since it was read (a read that recorded
//! activity in between wins).

use std::time::Duration;

use nsight_contracts::coordinator::Millis;

use crate::{
    core,
    store::{StoreError, Streamers},
};

/// One pass at `now`: the names deleted.
pub async fn reap_once(
    store: &Streamers,
    idle: Duration,
    now: Millis,
) -> Result<Vec<String>, StoreError> {
    let records = store.list().await?;
    let mut reaped = Vec::new();
    for record in core::idle(&records, now, idle) {
        if store.delete(record, true).await? {
            tracing::info!(name = %record.name, owner = %record.owner, idle_ms = now.since(record.last_active), "idle streamer reaped");
            reaped.push(record.name.clone());
        }
    }
    Ok(reaped)
}

/// Reaps forever (a failed pass is logged and the next one runs on time).
pub async fn run(store: Streamers, idle: Duration) {
    let mut tick = tokio::time::interval(core::reap_interval(idle));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = reap_once(&store, idle, crate::api::now()).await {
            tracing::warn!(error = %e, "reaping idle streamers failed");
        }
    }
}
