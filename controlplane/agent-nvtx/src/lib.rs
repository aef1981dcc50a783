//! The injection library (`libnsight_nvtx.so`) behind the agent's built-in backends, and the
//! dump format it shares with the agent: NVTX v3 ranges (`nvtx`) and, through CUPTI, GPU
//! kernels, copies, sets and CUDA API calls (`cupti`, see [`cupti`]).
//!
//! ```text
//!  app --nvtxRangePush..--> NVTX (in the app) --callback tables--> ffi --> recorder (per-thread logs)
//!  agent <--unix socket (control)--> control thread: HELLO / START / STOP <path> --> dump::Dump (JSON)
//! ```
//! NVTX loads the library named by `NVTX_INJECTION64_PATH` on the first NVTX call and calls
//! `InitializeInjectionNvtx2`; [`ffi`] fills the callback tables. The CUDA driver loads the same
//! library by `CUDA_INJECTION64_PATH` and calls `InitializeInjection` ([`cupti`]). Nothing here opens SQLite or
//! talks to the coordinator: the agent turns dumps into reports.
//!
//! Environment (set by the agent):
//! - `NSIGHT_NVTX_CONTROL`: the agent's Unix socket; without it the process records from its
//!   first NVTX call and dumps at exit.
//! - `NSIGHT_NVTX_RECORD_AT_START=1`: record from the first NVTX call even with a socket
//!   (launch mode).
//! - `NSIGHT_NVTX_DUMP_DIR`: where a process still recording at exit writes `<pid>.exit.json`.

pub mod control;
pub mod cuda;
pub mod cupti;
pub mod dump;
mod ffi;
pub mod recorder;

/// Environment variable naming the agent's control socket.
pub const ENV_CONTROL: &str = "NSIGHT_NVTX_CONTROL";
/// Environment variable: `1` to record from the first NVTX call.
pub const ENV_RECORD_AT_START: &str = "NSIGHT_NVTX_RECORD_AT_START";
/// Environment variable naming the directory for dumps written at exit.
pub const ENV_DUMP_DIR: &str = "NSIGHT_NVTX_DUMP_DIR";
/// The file name of a dump written at exit by process `pid`.
pub fn exit_dump_name(pid: u32) -> String {
    format!("{pid}.exit.json")
}
