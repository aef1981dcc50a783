//! Telling the OTLP converters that a collection ended, so that what the agents mirrored for it
//! becomes a report without anyone calling the converter (`--otlp-converter`).
//!
//! ```text
//! machine: collection settles ─> Effect::Settled ─> hub ─channel─> run(): per collection, after
//!   the delay (spans still travel agent -> sidecar -> collector -> converter), for each converter
//!   POST <url>/v1/collections/<session>/<collection>/stop, retried 0.5, 1, 2, 4, 8 s on a
//!   connection failure, 429 or 5xx; 404 (no span of it: its agents do not mirror) is quiet;
//!   any other answer is final (logged)
//! ```
//! Best effort: the collection's state does not wait for it. A coordinator that dies between the
//! settle and the call tells the converters again when it starts, for every collection that
//! ended in the last [`RETELL_WINDOW`] (a repeated stop converts nothing twice). Spans that
//! arrive after the stop are converted on their own by the converter (its linger), as a second
//! report.

use std::time::Duration;

use tokio::sync::mpsc;

use crate::state::{CollectionId, CollectionState, SessionId};

/// A collection that just ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    pub session: SessionId,
    pub collection: CollectionId,
    pub state: CollectionState,
}

/// Where and when to call.
#[derive(Debug, Clone)]
pub struct Converters {
    /// Base URLs (`http://otel-converter.team-a.svc:4318`).
    pub urls: Vec<String>,
    /// Wait this long after the collection ends before the first call.
    pub delay: Duration,
}

/// At start, the collections that ended this recently are announced again.
pub const RETELL_WINDOW: Duration = Duration::from_secs(600);

/// Pauses between attempts (then give up).
pub const BACKOFF: [Duration; 5] = [
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
];

/// The converter's stop endpoint for a collection (pure).
pub fn stop_url(base: &str, session: SessionId, collection: CollectionId) -> String {
    format!(
        "{}/v1/collections/{}/{}/stop",
        base.trim_end_matches('/'),
        session.0,
        collection.0
    )
}

/// What an answer means (pure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Done,
    /// The converter holds no span of the collection (its agents do not mirror): nothing to do.
    Empty,
    /// Worth another attempt (the converter is busy or restarting).
    Retry,
    /// It will not work by asking again (logged).
    GiveUp,
}

pub fn verdict(status: u16) -> Verdict {
    match status {
        200..=299 => Verdict::Done,
        404 => Verdict::Empty,
        429 | 500..=599 => Verdict::Retry,
        _ => Verdict::GiveUp,
    }
}

/// Calls every converter for each ended collection, until the channel closes.
pub async fn run(config: Converters, mut settled: mpsc::UnboundedReceiver<Settled>) {
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the HTTP client for the OTLP converters");
            return;
        }
    };
    while let Some(done) = settled.recv().await {
        for base in &config.urls {
            let (client, url, delay) = (
                client.clone(),
                stop_url(base, done.session, done.collection),
                config.delay,
            );
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                stop(&client, &url, done).await;
            });
        }
    }
}

async fn stop(client: &reqwest::Client, url: &str, done: Settled) {
    let session = done.session.0.to_string();
    for (attempt, pause) in std::iter::once(Duration::ZERO).chain(BACKOFF).enumerate() {
        tokio::time::sleep(pause).await;
        let (verdict, what) = match client.post(url).send().await {
            Ok(answer) => {
                let status = answer.status().as_u16();
                let body = answer.text().await.unwrap_or_default();
                (verdict(status), format!("{status} {}", first_line(&body)))
            }
            Err(e) => (Verdict::Retry, e.to_string()),
        };
        match verdict {
            Verdict::Done => {
                tracing::info!(%url, %session, collection = done.collection.0, answer = %what, "OTLP converter stopped the collection");
                return;
            }
            Verdict::Empty => {
                tracing::debug!(%url, %session, collection = done.collection.0, "the OTLP converter holds no span of the collection");
                return;
            }
            Verdict::GiveUp => {
                tracing::warn!(%url, %session, collection = done.collection.0, answer = %what, "the OTLP converter refused to stop the collection");
                return;
            }
            Verdict::Retry => {
                tracing::debug!(%url, attempt, answer = %what, "OTLP converter stop to retry");
            }
        }
    }
    tracing::warn!(%url, %session, collection = done.collection.0, "the OTLP converter did not answer: its spans of this collection are not converted until someone stops it");
}

fn first_line(body: &str) -> &str {
    let line = body.lines().next().unwrap_or_default();
    line.get(..200).unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    #[test]
    fn the_stop_url_names_the_session_and_collection() {
        let session = SessionId(Uuid::from_u128(0x1234));
        assert_eq!(
            stop_url("http://conv:4318/", session, CollectionId(3)),
            "http://conv:4318/v1/collections/00000000-0000-0000-0000-000000001234/3/stop"
        );
    }

    #[test]
    fn busy_or_failing_converters_are_asked_again_and_refusals_are_final() {
        assert_eq!(verdict(200), Verdict::Done);
        assert_eq!(verdict(503), Verdict::Retry);
        assert_eq!(verdict(429), Verdict::Retry);
        assert_eq!(verdict(404), Verdict::Empty);
        assert_eq!(verdict(400), Verdict::GiveUp);
    }
}
