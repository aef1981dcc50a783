//! Plain data of the coordinator: validated names (tags, titles), identifiers, agents, sessions
//! and collections. They are the REST contract's types (`nsight_contracts::coordinator::model`),
//! re-exported here so the state machine and the wire share one definition; the rules that
//! change them live in `machine`, `sessions` and `agents`.

pub use nsight_contracts::coordinator::model::*;
