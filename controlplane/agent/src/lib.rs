//! The profiling agent. Runs inside the profiled container: registers with the coordinator,
//! follows START/STOP, and reports what it uploaded.
//!
//! ```text
//!  coordinator ──Start/Stop──> channel::run ──> Backend::start / Backend::stop ──> keys
//!              <──Ack/Uploaded/Failed/Heartbeat──
//! ```
//! [`channel`] is the coordinator client (reconnects with backoff, resumes what it was doing);
//! backends plug in through [`channel::Backend`].

pub mod channel;
pub mod proto;
