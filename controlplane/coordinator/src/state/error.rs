//! Errors of the state machine. Every message tells the user (or the agent's operator) what to do
//! next; [`CoordError::kind`] tells the REST layer which status code to answer with.

use crate::state::model::{AgentKey, CollectionId, SessionId, Tag, ValidationError};

/// The class of an error, mapped by the REST layer to an HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The request itself is malformed (400).
    BadInput,
    /// The request names something that does not exist (404).
    NotFound,
    /// The request conflicts with the current state (409).
    Conflict,
}

impl ErrorKind {
    /// The HTTP status code for this kind.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::BadInput => 400,
            ErrorKind::NotFound => 404,
            ErrorKind::Conflict => 409,
        }
    }
}

/// A refused request. The state is unchanged whenever one of these is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoordError {
    #[error(transparent)]
    Invalid(#[from] ValidationError),

    #[error("an agent for {agent} is already connected; each process is profiled by one agent at a time (check for a duplicate injection, or wait for the old connection to time out)")]
    DuplicateAgent { agent: AgentKey },

    #[error("agent {agent} is not registered; it must register before sending anything else")]
    UnknownAgent { agent: AgentKey },

    #[error("agent {agent} is marked disconnected (no heartbeat in time); it must register again to resume")]
    AgentNotConnected { agent: AgentKey },

    #[error("tag `{tag}` already has open session {id}; use it (`profiler-start --session {id}`) or end it first with `session-end`")]
    SessionAlreadyOpen { tag: Tag, id: SessionId },

    #[error(
        "no session {id}; list sessions with `status` or start without --session to open a new one"
    )]
    UnknownSession { id: SessionId },

    #[error("no open session on tag `{tag}`; open one with `begin-session` or `profiler-start`")]
    NoOpenSession { tag: Tag },

    #[error("session {id} is ended; start a new one with `profiler-start` (no --session) or `begin-session`")]
    SessionEnded { id: SessionId },

    #[error("session {id} belongs to tag `{session_tag}`, not `{tag}`; pass --tag {session_tag} or choose a session of tag `{tag}`")]
    SessionOfOtherTag {
        id: SessionId,
        session_tag: Tag,
        tag: Tag,
    },

    #[error("session {session} is already collecting (collection {collection}); stop it with `profiler-stop` before starting another")]
    AlreadyCollecting {
        session: SessionId,
        collection: CollectionId,
    },

    #[error("{}", not_collecting_message(tag, session))]
    NotCollecting {
        tag: Tag,
        session: Option<SessionId>,
    },

    #[error(
        "session {session} has reached the maximum number of collections; start a new session"
    )]
    TooManyCollections { session: SessionId },

    #[error("ignored report from agent {agent} about session {session} collection {collection}: {reason}")]
    StaleReport {
        agent: AgentKey,
        session: SessionId,
        collection: CollectionId,
        reason: StaleReason,
    },
}

fn not_collecting_message(tag: &Tag, session: &Option<SessionId>) -> String {
    match session {
        Some(id) => format!(
            "session {id} is not collecting; start a collection with `profiler-start --session {id}`"
        ),
        None => format!(
            "nothing is collecting on tag `{tag}`; start a collection with `profiler-start`"
        ),
    }
}

/// Why an agent's report was ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum StaleReason {
    #[error("no such session")]
    UnknownSession,
    #[error("no such collection in that session")]
    UnknownCollection,
    #[error("the agent is not part of that collection")]
    NotAMember,
    #[error("the collection is already finished")]
    CollectionFinished,
    #[error("the agent already reported its result for that collection")]
    AlreadySettled,
}

impl CoordError {
    /// Which HTTP-ish class this error belongs to.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CoordError::Invalid(_) => ErrorKind::BadInput,
            CoordError::UnknownAgent { .. }
            | CoordError::UnknownSession { .. }
            | CoordError::NoOpenSession { .. } => ErrorKind::NotFound,
            CoordError::DuplicateAgent { .. }
            | CoordError::AgentNotConnected { .. }
            | CoordError::SessionAlreadyOpen { .. }
            | CoordError::SessionEnded { .. }
            | CoordError::SessionOfOtherTag { .. }
            | CoordError::AlreadyCollecting { .. }
            | CoordError::NotCollecting { .. }
            | CoordError::TooManyCollections { .. }
            | CoordError::StaleReport { .. } => ErrorKind::Conflict,
        }
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    #[test]
    fn kinds_map_to_statuses() {
        let id = SessionId(Uuid::nil());
        assert_eq!(CoordError::UnknownSession { id }.kind().http_status(), 404);
        assert_eq!(CoordError::SessionEnded { id }.kind().http_status(), 409);
        assert_eq!(
            CoordError::from(ValidationError::TagEmpty)
                .kind()
                .http_status(),
            400
        );
    }

    #[test]
    fn messages_say_what_to_do() {
        let id = SessionId(Uuid::nil());
        let ended = CoordError::SessionEnded { id }.to_string();
        assert!(ended.contains(&id.to_string()) && ended.contains("profiler-start"));
        let other = CoordError::SessionOfOtherTag {
            id,
            session_tag: Tag::parse("a").unwrap(),
            tag: Tag::parse("b").unwrap(),
        }
        .to_string();
        assert!(other.contains("--tag a"), "{other}");
        let idle = CoordError::NotCollecting {
            tag: Tag::default(),
            session: None,
        }
        .to_string();
        assert!(idle.contains("`default`") && idle.contains("profiler-start"));
    }
}
