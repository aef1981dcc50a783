//! Read-only views of the [`Coordinator`] for `status`, session listing and persistence:
//! [`TagStatus`], [`AgentStatus`], [`SessionSummary`], [`CollectionSummary`], [`SessionFilter`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::state::error::CoordError;
use crate::state::machine::{AgentEntry, Coordinator};
use crate::state::model::{
    AgentInfo, AgentKey, AgentOutcome, Collection, CollectionId, CollectionState, Millis, Session,
    SessionId, SessionState, Tag, Title,
};

/// An agent as shown by `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    pub key: AgentKey,
    pub info: AgentInfo,
    pub connected: bool,
    pub last_seen: Millis,
}

/// A session without its collections' details.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
#[serde(rename_all = "camelCase")]
pub struct AgentCounts {
    pub known: usize,
    pub connected: usize,
}

/// Which sessions [`Coordinator::sessions`] lists; `None` matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFilter {
    pub tag: Option<Tag>,
    pub state: Option<SessionState>,
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

fn agent_status(key: &AgentKey, entry: &AgentEntry) -> AgentStatus {
    AgentStatus {
        key: key.clone(),
        info: entry.info.clone(),
        connected: entry.connected,
        last_seen: entry.last_seen,
    }
}

impl Coordinator {
    /// What `status` shows for `tag`, with every agent.
    pub fn status(&self, tag: &Tag) -> TagStatus {
        self.status_limited(tag, usize::MAX)
    }

    /// What `status` shows for `tag`, listing at most `limit` agents (in the tag's agent list
    /// and in the active collection); the counts always cover all of them. Keeps the answer
    /// small and fast with thousands of agents.
    pub fn status_limited(&self, tag: &Tag, limit: usize) -> TagStatus {
        let mut agent_counts = AgentCounts::default();
        let mut agents = Vec::new();
        for (key, a) in self.agents.iter().filter(|(_, a)| &a.info.tag == tag) {
            agent_counts.known += 1;
            agent_counts.connected += usize::from(a.connected);
            if agents.len() < limit {
                agents.push(agent_status(key, a));
            }
        }
        let active_session = self
            .open_session_id(tag)
            .and_then(|id| self.sessions.get(&id))
            .map(SessionSummary::of);
        let of_tag = || {
            self.sessions
                .values()
                .filter(|s| &s.tag == tag)
                .flat_map(|s| s.collections.iter().map(move |c| (s.id, c)))
        };
        let active_collection = of_tag()
            .find(|(_, c)| c.state == CollectionState::Collecting)
            .or_else(|| {
                of_tag()
                    .filter(|(_, c)| c.state == CollectionState::Stopping)
                    .max_by_key(|(_, c)| c.started_at)
            })
            .map(|(id, c)| CollectionSummary::limited(id, c, limit));
        TagStatus {
            tag: tag.clone(),
            agents,
            agent_counts,
            active_session,
            active_collection,
        }
    }

    /// One session with all its collections. 404-style `UnknownSession` if there is none.
    pub fn session(&self, id: SessionId) -> Result<&Session, CoordError> {
        self.sessions
            .get(&id)
            .ok_or(CoordError::UnknownSession { id })
    }

    /// Sessions matching `filter`, oldest first.
    pub fn sessions(&self, filter: &SessionFilter) -> Vec<SessionSummary> {
        let mut found: Vec<SessionSummary> = self
            .sessions
            .values()
            .filter(|s| filter.tag.as_ref().is_none_or(|t| &s.tag == t))
            .filter(|s| filter.state.is_none_or(|state| s.state == state))
            .map(SessionSummary::of)
            .collect();
        found.sort_by_key(|s| (s.created_at, s.id));
        found
    }

    /// All known agents (connected or not), by key.
    pub fn agents(&self) -> Vec<AgentStatus> {
        self.agents
            .iter()
            .map(|(key, a)| agent_status(key, a))
            .collect()
    }

    /// One known agent's registration: what to save for [`crate::state::Effect::PersistAgent`].
    pub fn agent_info(&self, key: &AgentKey) -> Option<&AgentInfo> {
        self.agents.get(key).map(|a| &a.info)
    }

    /// Every known agent's registration, to pass back to
    /// [`Coordinator::restore`].
    pub fn agent_infos(&self) -> Vec<AgentInfo> {
        self.agents.values().map(|a| a.info.clone()).collect()
    }
}
