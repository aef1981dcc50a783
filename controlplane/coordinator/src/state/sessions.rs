//! The user-facing operations of the [`Coordinator`]: begin a session, start and stop
//! collections, end a session. Each validates everything before changing anything, so an error
//! leaves the state untouched.

use std::collections::BTreeMap;

use crate::state::effect::{Command, Effects, Ended, Outcome, Started, Stopped};
use crate::state::error::CoordError;
use crate::state::machine::{stop_collection, Coordinator};
use crate::state::model::{
    AgentOutcome, Collection, CollectionId, CollectionState, Millis, Session, SessionId,
    SessionState, Tag, Title,
};

impl Coordinator {
    /// Opens a session on `tag`. Conflict if the tag already has an open session.
    pub fn begin_session(
        &mut self,
        tag: &Tag,
        title: Option<Title>,
        now: Millis,
    ) -> Result<Outcome<SessionId>, CoordError> {
        if let Some(id) = self.open_session_id(tag) {
            return Err(CoordError::SessionAlreadyOpen {
                tag: tag.clone(),
                id,
            });
        }
        let id = self.create_session(tag, title, now);
        let mut fx = Effects::default();
        fx.persist(id);
        Ok(fx.finish(id))
    }

    /// Starts the next collection of `session` (or of the tag's open session, opening one if
    /// there is none) with every connected agent of the tag, and sends them START.
    ///
    /// Errors: unknown session (404); session ended, of another tag, or already collecting
    /// (409).
    pub fn start(
        &mut self,
        tag: &Tag,
        session: Option<SessionId>,
        now: Millis,
    ) -> Result<Outcome<Started>, CoordError> {
        let existing = match session {
            Some(id) => Some(self.check_open_session(tag, id)?),
            None => self
                .open_session_id(tag)
                .and_then(|id| self.sessions.get(&id)),
        };
        let collection_id = match existing {
            Some(s) => {
                if let Some(c) = s.collecting() {
                    return Err(CoordError::AlreadyCollecting {
                        session: s.id,
                        collection: c.id,
                    });
                }
                s.next_collection_id()
                    .ok_or(CoordError::TooManyCollections { session: s.id })?
            }
            None => CollectionId::FIRST,
        };
        let existing_id = existing.map(|s| s.id);

        let members: BTreeMap<_, _> = self
            .agents
            .iter()
            .filter(|(_, a)| a.connected && &a.info.tag == tag)
            .map(|(key, _)| (key.clone(), AgentOutcome::Pending))
            .collect();
        let sid = match existing_id {
            Some(id) => id,
            None => self.create_session(tag, None, now),
        };
        let Some(s) = self.sessions.get_mut(&sid) else {
            return Err(CoordError::UnknownSession { id: sid });
        };
        let mut fx = Effects::default();
        for key in members.keys() {
            fx.send(
                key.clone(),
                Command::Start {
                    session: sid,
                    collection: collection_id,
                },
            );
        }
        let agents = members.len();
        s.collections.push(Collection {
            id: collection_id,
            started_at: now,
            stop_requested_at: None,
            completed_at: None,
            state: CollectionState::Collecting,
            agents: members,
        });
        fx.persist(sid);
        Ok(fx.finish(Started {
            session: sid,
            collection: collection_id,
            session_created: existing_id.is_none(),
            agents,
        }))
    }

    /// Stops the collecting collection of `session` (or of the tag's open session): agents get
    /// STOP and then upload. Conflict (`NotCollecting`) when nothing is collecting.
    pub fn stop(
        &mut self,
        tag: &Tag,
        session: Option<SessionId>,
        now: Millis,
    ) -> Result<Outcome<Stopped>, CoordError> {
        let not_collecting = CoordError::NotCollecting {
            tag: tag.clone(),
            session,
        };
        let sid = match session {
            Some(id) => self.check_open_session(tag, id)?.id,
            None => self.open_session_id(tag).ok_or(not_collecting.clone())?,
        };
        let Some(s) = self.sessions.get_mut(&sid) else {
            return Err(CoordError::UnknownSession { id: sid });
        };
        let Some(c) = s
            .collections
            .iter_mut()
            .rev()
            .find(|c| c.state == CollectionState::Collecting)
        else {
            return Err(not_collecting);
        };
        let mut fx = Effects::default();
        let stopped = stop_collection(sid, c, &self.agents, now, &mut fx);
        fx.persist(sid);
        Ok(fx.finish(stopped))
    }

    /// Ends `session` (or the tag's open session), stopping its collection first if it is still
    /// collecting. That last collection keeps recording uploads after the session ended.
    ///
    /// Errors: unknown session or no open session (404); ended or of another tag (409).
    pub fn end_session(
        &mut self,
        tag: &Tag,
        session: Option<SessionId>,
        now: Millis,
    ) -> Result<Outcome<Ended>, CoordError> {
        let sid = match session {
            Some(id) => self.check_open_session(tag, id)?.id,
            None => self
                .open_session_id(tag)
                .ok_or(CoordError::NoOpenSession { tag: tag.clone() })?,
        };
        let Some(s) = self.sessions.get_mut(&sid) else {
            return Err(CoordError::UnknownSession { id: sid });
        };
        let mut fx = Effects::default();
        let stopped = s
            .collections
            .iter_mut()
            .rev()
            .find(|c| c.state == CollectionState::Collecting)
            .map(|c| stop_collection(sid, c, &self.agents, now, &mut fx));
        s.state = SessionState::Ended;
        s.ended_at = Some(now);
        fx.persist(sid);
        Ok(fx.finish(Ended {
            session: sid,
            stopped,
        }))
    }

    fn create_session(&mut self, tag: &Tag, title: Option<Title>, now: Millis) -> SessionId {
        let mut id = SessionId::random();
        while self.sessions.contains_key(&id) {
            id = SessionId::random();
        }
        self.sessions.insert(
            id,
            Session {
                id,
                tag: tag.clone(),
                title,
                state: SessionState::Open,
                created_at: now,
                ended_at: None,
                collections: Vec::new(),
            },
        );
        id
    }
}
