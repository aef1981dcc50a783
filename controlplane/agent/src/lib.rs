//! The profiling agent. Runs inside the profiled container: launches the target under a
//! backend, registers with the coordinator, follows START/STOP, and uploads one report per
//! profiled process per collection.
//!
//! ```text
//!  coordinator ──Start/Stop──> channel::run ──> Backend::start / Backend::stop ──> keys
//!              <──Ack/Uploaded/Failed/Heartbeat──
//!  target processes <──unix socket──> nvtx::ControlServer ──dumps──> report ──> publish (storage)
//! ```
//! [`channel`] is the coordinator client (reconnects with backoff, resumes what it was doing);
//! backends plug in through [`channel::Backend`]. [`run`] is `nsight-agent run`; [`capture`]
//! chooses what the injection library records (NVTX, CUPTI GPU activity); [`nvtx`] talks to the
//! injected processes; [`report`] writes the SQLite export (pure over a connection, the `nsight-report` crate);
//! [`publish`] names and uploads reports (and offers each dump to the OTLP [`mirror`], sent by
//! [`mirror_export`]); [`nsys`] is the nsys backend's command lines and state
//! machine, [`nsys_run`] runs them, [`started`] tells whether nsys ever started the program;
//! [`preflight`] the diagnostics sent at registration; [`leftovers`] cleans up after agents that
//! were killed.

pub mod capture;
pub mod channel;
pub mod init;
pub mod leftovers;
pub mod mirror;
pub mod mirror_export;
pub mod nsys;
pub mod nsys_install;
pub mod nsys_run;
pub mod nvtx;
pub mod preflight;
pub mod proto;
pub mod publish;
pub mod run;
pub mod signals;
pub mod started;
pub mod unprofiled;

/// The SQLite report writer, shared with the OTLP converter (crate `nsight-report`).
pub use nsight_report as report;
