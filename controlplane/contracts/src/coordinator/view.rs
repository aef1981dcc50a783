//! Read-only views the coordinator answers with: [`TagStatus`] for `status`, [`SessionSummary`]
//! for listings, [`CollectionSummary`] for a tag's active collection, built from the model by
//! pure constructors.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::model::{
    AgentInfo, AgentKey, AgentOutcome, Collection, CollectionId, CollectionState, Millis, Session,
    SessionId, SessionState, Tag, Title,
};

/// An agent as shown by `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    pub key: AgentKey,
    pub info: AgentInfo,
    pub connected: bool,
    pub last_seen: Millis,
    /// The agent's NVTX mirroring as of its last heartbeat; absent when it does not mirror.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirroring: Option<MirroringStatus>,
}

/// What an agent's NVTX mirroring (OTLP spans to its Pod's sidecar, docs/otlp.md) did since the
/// agent started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MirroringStatus {
    /// Spans the endpoint acknowledged.
    pub sent: u64,
    /// Spans dropped: the queue was full, or the endpoint stayed unreachable or refused them.
    pub dropped: u64,
    /// NVTX records that are not spans (marks outside a range, ranges open at a stop).
    pub not_mirrored: u64,
    /// The last export error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// A session without its collections' details.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub id: SessionId,
    pub tag: Tag,
    pub title: Option<Title>,
    pub state: SessionState,
    pub created_at: Millis,
    pub ended_at: Option<Millis>,
    /// How many collections the session has had.
    pub collections: usize,
}

/// A collection with the session it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CollectionSummary {
    pub session: SessionId,
    pub id: CollectionId,
    pub state: CollectionState,
    pub started_at: Millis,
    pub stop_requested_at: Option<Millis>,
    pub completed_at: Option<Millis>,
    /// How many agents are in each outcome state (`pending`, `started`, `uploaded`, ...), over
    /// all agents of the collection.
    #[serde(default)]
    pub outcome_counts: BTreeMap<String, usize>,
    /// The agents' outcomes; at most the view's limit (see `agents_total`).
    pub agents: BTreeMap<AgentKey, AgentOutcome>,
    /// Number of agents in the collection (may exceed `agents.len()`).
    #[serde(default)]
    pub agents_total: usize,
}

/// Everything `status` shows for one tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TagStatus {
    pub tag: Tag,
    /// Known agents of the tag, connected or not, by key; at most the view's limit.
    pub agents: Vec<AgentStatus>,
    /// Counts over all known agents of the tag (the list above may be cut short).
    #[serde(default)]
    pub agent_counts: AgentCounts,
    /// The tag's open session.
    pub active_session: Option<SessionSummary>,
    /// The tag's Collecting collection, else its most recently started Stopping one (which may
    /// belong to an ended session).
    pub active_collection: Option<CollectionSummary>,
}

/// How many agents a tag has, whatever the view's limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AgentCounts {
    pub known: usize,
    pub connected: usize,
}

impl SessionSummary {
    pub fn of(session: &Session) -> SessionSummary {
        SessionSummary {
            id: session.id,
            tag: session.tag.clone(),
            title: session.title.clone(),
            state: session.state,
            created_at: session.created_at,
            ended_at: session.ended_at,
            collections: session.collections.len(),
        }
    }
}

impl CollectionSummary {
    pub fn of(session: SessionId, collection: &Collection) -> CollectionSummary {
        Self::limited(session, collection, usize::MAX)
    }

    /// The summary with at most `limit` per-agent outcomes (the counts cover all of them).
    pub fn limited(session: SessionId, collection: &Collection, limit: usize) -> CollectionSummary {
        // Counted by the static state name: no allocation per agent.
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        for outcome in collection.agents.values() {
            *counts.entry(outcome.state_name()).or_insert(0) += 1;
        }
        let outcome_counts = counts
            .into_iter()
            .map(|(state, n)| (state.to_string(), n))
            .collect();
        CollectionSummary {
            session,
            id: collection.id,
            state: collection.state,
            started_at: collection.started_at,
            stop_requested_at: collection.stop_requested_at,
            completed_at: collection.completed_at,
            outcome_counts,
            agents: collection
                .agents
                .iter()
                .take(limit)
                .map(|(k, o)| (k.clone(), o.clone()))
                .collect(),
            agents_total: collection.agents.len(),
        }
    }
}
