//! The coordinator's state machine and its data.
//!
//! ```text
//!  users ─ begin_session / start / stop / end_session ─┐
//!  agents ─ register / heartbeat / ack / upload / fail ─┼─> Coordinator ──> Outcome { value, effects }
//!  timer ─ tick(now) ───────────────────────────────────┘        │             Persist / PersistAgent
//!                                                       status / sessions      Disconnect / Send(START|STOP)
//! ```
//!
//! - `model`: plain serde data (tags, titles, IDs, sessions, collections, agent outcomes).
//! - `machine`: the `Coordinator`, its `Config`, `restore` and `tick`.
//! - `sessions`, `agents`: the user- and agent-facing operations.
//! - `view`: read-only status and listings.
//! - `effect`, `error`: what calls return.

mod agents;
pub mod effect;
pub mod error;
pub mod machine;
pub mod model;
mod sessions;
pub mod view;

#[cfg(test)]
mod tests;

pub use effect::{Command, Effect, Ended, Outcome, Registered, Restored, Started, Stopped};
pub use error::{CoordError, ErrorKind, StaleReason};
pub use machine::{Config, Coordinator};
pub use model::{
    AgentIdentity, AgentInfo, AgentKey, AgentOutcome, Backend, Collection, CollectionId,
    CollectionState, Millis, Session, SessionId, SessionState, Tag, Title, ValidationError,
};
pub use view::{
    AgentCounts, AgentStatus, CollectionSummary, MirroringStatus, SessionFilter, SessionSummary,
    TagStatus,
};
