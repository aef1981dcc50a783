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
    pub agents: BTreeMap<AgentKey, AgentOutcome>,
}

/// Everything `status` shows for one tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagStatus {
    pub tag: Tag,
    /// Known agents of the tag, connected or not, by key.
    pub agents: Vec<AgentStatus>,
    /// The tag's open session.
    pub active_session: Option<SessionSummary>,
    /// The tag's Collecting collection, else its most recently started Stopping one (which may
    /// belong to an ended session).
    pub active_collection: Option<CollectionSummary>,
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
        CollectionSummary {
            session,
            id: collection.id,
            state: collection.state,
            started_at: collection.started_at,
            stop_requested_at: collection.stop_requested_at,
            completed_at: collection.completed_at,
            agents: collection.agents.clone(),
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
    /// What `status` shows for `tag`.
    pub fn status(&self, tag: &Tag) -> TagStatus {
        let agents = self
            .agents
            .iter()
            .filter(|(_, a)| &a.info.tag == tag)
            .map(|(key, a)| agent_status(key, a))
            .collect();
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
            .map(|(id, c)| CollectionSummary::of(id, c));
        TagStatus {
            tag: tag.clone(),
            agents,
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

    /// What to save when [`crate::state::Effect::PersistAgents`] is emitted, and to pass back to
    /// [`Coordinator::restore`].
    pub fn agent_infos(&self) -> Vec<AgentInfo> {
        self.agents.values().map(|a| a.info.clone()).collect()
    }
}
