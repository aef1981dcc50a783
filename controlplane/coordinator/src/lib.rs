//! The coordinator: brokers profiling sessions and collections between users (CLI/REST) and the
//! agents wrapping profiled processes.
//!
//! This crate is the pure core, "sans-IO": [`state::Coordinator`] is a state machine that is fed
//! events together with the current time and answers with the effects to carry out (send a
//! command to an agent, persist a session, close a stream). It reads no clock and does no I/O;
//! the servers around it do.

pub mod state;
