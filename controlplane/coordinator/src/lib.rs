//! The coordinator: brokers profiling sessions and collections between users (CLI/REST) and the
//! agents wrapping profiled processes.
//!
//! ```text
//!  CLI/UI ──REST (server::rest)──┐                      ┌── server::store (redb on a volume)
//!                                 v                      │
//!                     server::hub: Coordinator (state) ──┤ effects: persist, send, disconnect
//!                                 ^                      │
//!  agents ──gRPC stream (server::grpc)──────────────────┘
//! ```
//! [`state`] is the pure core, "sans-IO": a state machine fed events with the current time that
//! answers with the effects to carry out. [`server`] is the thin I/O shell around it.

pub mod codec;
pub mod proto;
pub mod server;
pub mod state;
