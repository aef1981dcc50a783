//! Why a Pod was not injected, as a Kubernetes Event (`events.k8s.io/v1`, reporting controller
//! `nsight-injector`), besides the log and the review's warning.
//!
//! ```text
//! admission (pure) ── skip_event(pod, why) ──> EventSink::emit (try_send, never waits)
//!                                                 │ bounded queue (full: dropped, counted)
//!                                                 v
//!                                   one task: Recorder::publish (series-aggregated)
//! ```
//!
//! Which skips get an Event ([`skip_event`], pure): an opt-out label, a rule naming a missing
//! tool config, a CEL rule that cannot be evaluated, and "not selected" in a namespace that has
//! profile configs of its own (the namespace admin asked for profiling there). Pods already
//! injected, and Pods of namespaces nobody configured, get none: that would be an Event for
//! every Pod of the cluster.
//!
//! At admission a Pod has no uid and, when created from `generateName` (every Deployment's
//! Pods), no name: the Event then regards the Pod's controller (its ReplicaSet, Job, ...),
//! and the note names the Pod's `generateName`.

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc,
};

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::{
    runtime::events::{Event, EventType, Recorder, Reporter},
    Client,
};
use tokio::sync::mpsc;

use crate::decide::SkipReason;

/// The Events' reporting controller.
pub const REPORTER: &str = "nsight-injector";
/// Events queued for publishing at most; more are dropped (and counted).
pub const QUEUE: usize = 256;
/// The API's limit on an Event's note.
const NOTE_LIMIT: usize = 1024;

/// One Event to publish.
#[derive(Clone, Debug, PartialEq)]
pub struct SkipEvent {
    pub warning: bool,
    /// PascalCase, e.g. `NotSelected`.
    pub reason: &'static str,
    pub note: String,
    pub regarding: ObjectReference,
}

/// The Event for a skipped Pod, if that skip deserves one (see the module docs).
/// `configured`: the namespace has profile configs of its own (cluster-wide ones do not count:
/// they would make every Pod of the cluster "configured").
pub fn skip_event(
    pod: &Pod,
    namespace: &str,
    why: &SkipReason,
    configured: bool,
) -> Option<SkipEvent> {
    let (warning, reason) = match why {
        SkipReason::AlreadyInjected => return None,
        SkipReason::NotSelected if !configured => return None,
        SkipReason::NotSelected => (false, "NotSelected"),
        SkipReason::OptedOut => (false, "OptedOut"),
        SkipReason::UnknownToolConfig { .. } => (true, "UnknownToolConfig"),
        SkipReason::CelFailed { .. } => (true, "CelFailed"),
    };
    let meta = &pod.metadata;
    let pod_name = match (&meta.name, &meta.generate_name) {
        (Some(name), _) => name.clone(),
        (None, Some(prefix)) => format!("{prefix}*"),
        (None, None) => "(unnamed)".into(),
    };
    let owner = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    let regarding = match (&meta.name, owner) {
        (None, Some(owner)) => ObjectReference {
            api_version: Some(owner.api_version.clone()),
            kind: Some(owner.kind.clone()),
            name: Some(owner.name.clone()),
            uid: Some(owner.uid.clone()),
            namespace: Some(namespace.into()),
            ..ObjectReference::default()
        },
        _ => ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod_name.trim_end_matches('*').into()),
            namespace: Some(namespace.into()),
            ..ObjectReference::default()
        },
    };
    let mut note = format!("nsight injector did not inject Pod {pod_name}: {why}");
    if note.len() > NOTE_LIMIT {
        let mut end = NOTE_LIMIT - 3;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push_str("...");
    }
    Some(SkipEvent {
        warning,
        reason,
        note,
        regarding,
    })
}

/// The request path's handle: queues Events for the publishing task, never waits.
#[derive(Clone, Debug)]
pub struct EventSink {
    tx: mpsc::Sender<SkipEvent>,
    dropped: Arc<AtomicU64>,
}

impl EventSink {
    /// The sink and the task that publishes what it queues (run it on the runtime; it ends
    /// when every sink is dropped).
    pub fn start(client: Client) -> (Self, impl std::future::Future<Output = ()> + Send) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let recorder = Recorder::new(
            client,
            Reporter {
                controller: REPORTER.into(),
                instance: std::env::var("POD_NAME").ok(),
            },
        );
        (
            Self {
                tx,
                dropped: Arc::default(),
            },
            publish(recorder, rx),
        )
    }

    /// Queues `event`; when the queue is full it is dropped and counted.
    pub fn emit(&self, event: SkipEvent) {
        if self.tx.try_send(event).is_err() {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_power_of_two() {
                tracing::warn!(dropped = n, "event queue full; skip Events dropped");
            }
        }
    }

    /// Events dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

async fn publish(recorder: Recorder, mut rx: mpsc::Receiver<SkipEvent>) {
    while let Some(e) = rx.recv().await {
        let event = Event {
            type_: if e.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: e.reason.into(),
            note: Some(e.note),
            action: "Admit".into(),
            secondary: None,
        };
        if let Err(err) = recorder.publish(&event, &e.regarding).await {
            tracing::warn!(error = %err, reason = e.reason, "cannot publish a skip Event");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use serde_json::json;

    use super::*;

    fn pod(meta: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": meta, "spec": {"containers": []}})).unwrap()
    }

    #[test]
    fn only_informative_skips_get_an_event() {
        let p = pod(json!({"name": "web"}));
        assert!(skip_event(&p, "ns", &SkipReason::AlreadyInjected, true).is_none());
        assert!(skip_event(&p, "ns", &SkipReason::NotSelected, false).is_none());
        let e = skip_event(&p, "ns", &SkipReason::NotSelected, true).unwrap();
        assert_eq!((e.warning, e.reason), (false, "NotSelected"));
        assert_eq!(e.regarding.kind.as_deref(), Some("Pod"));
        assert_eq!(e.regarding.name.as_deref(), Some("web"));
        assert!(e.note.contains("Pod web: not selected"), "{}", e.note);
        let cel = SkipReason::CelFailed {
            rule: "r".into(),
            error: "x".repeat(5000),
        };
        let e = skip_event(&p, "ns", &cel, false).unwrap();
        assert!(e.warning && e.note.len() <= NOTE_LIMIT);
    }

    #[test]
    fn a_pod_without_a_name_is_reported_on_its_controller() {
        let p = pod(json!({"generateName": "trainer-7d9f-", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "trainer-7d9f",
             "uid": "u-1", "controller": true}]}));
        let e = skip_event(&p, "ns", &SkipReason::OptedOut, false).unwrap();
        assert_eq!(e.regarding.kind.as_deref(), Some("ReplicaSet"));
        assert_eq!(e.regarding.uid.as_deref(), Some("u-1"));
        assert!(e.note.contains("trainer-7d9f-*"), "{}", e.note);
    }
}
