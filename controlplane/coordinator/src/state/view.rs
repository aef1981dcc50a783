//! Read-only views of the [`Coordinator`] for `status`, session listing and persistence. The
//! view types ([`TagStatus`], [`AgentStatus`], [`SessionSummary`], [`CollectionSummary`]) are
//! the REST contract's (`nsight_contracts::coordinator::view`); [`SessionFilter`] and the
//! queries that fill them are the coordinator's.

pub use nsight_contracts::coordinator::view::{
    AgentCounts, AgentStatus, CollectionSummary, MirroringStatus, SessionSummary, TagStatus,
};
pub use nsight_contracts::coordinator::TagSummary;

use crate::state::error::CoordError;
use crate::state::machine::{AgentEntry, Coordinator};
use crate::state::model::{
    AgentInfo, AgentKey, CollectionId, CollectionState, Millis, Session, SessionId, SessionState,
    Tag,
};

/// Which sessions [`Coordinator::sessions`] lists; `None` matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFilter {
    pub tag: Option<Tag>,
    pub state: Option<SessionState>,
}

fn agent_status(key: &AgentKey, entry: &AgentEntry) -> AgentStatus {
    AgentStatus {
        key: key.clone(),
        info: entry.info.clone(),
        connected: entry.connected,
        last_seen: entry.last_seen,
        mirroring: entry.mirroring.clone(),
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

    /// The collections that ended at `since` or later, with how they ended (the OTLP converters
    /// of a restarted coordinator are told again: it may have died before telling them).
    pub fn ended_since(&self, since: Millis) -> Vec<(SessionId, CollectionId, CollectionState)> {
        self.sessions
            .values()
            .flat_map(|s| s.collections.iter().map(move |c| (s.id, c)))
            .filter(|(_, c)| !c.state.is_open() && c.completed_at.is_some_and(|t| t >= since))
            .map(|(session, c)| (session, c.id, c.state))
            .collect()
    }

    /// Every tag that has sessions, in name order, with how many and whether one is open.
    pub fn tags(&self) -> Vec<TagSummary> {
        let mut tags: std::collections::BTreeMap<&Tag, TagSummary> = Default::default();
        for s in self.sessions.values() {
            let t = tags.entry(&s.tag).or_insert_with(|| TagSummary {
                tag: s.tag.clone(),
                sessions: 0,
                open: false,
            });
            t.sessions += 1;
            t.open |= s.state == SessionState::Open;
        }
        tags.into_values().collect()
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
