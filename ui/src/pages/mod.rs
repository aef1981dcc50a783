//! The UI's pages, one module each; they fetch through `crate::api` and render the contract's
//! types: `sessions` (a tag's sessions and controls), `agents` (a tag's agents), `session` (one session's collections and
//! reports), `analysis` (recipes and the argument form), `jobs` (the jobs list and one job), `timeline` (one report's timeline), `streamers` (the user's
//! Nsight Streamers and the cap).

pub mod agents;
pub mod analysis;
pub mod jobs;
pub mod session;
pub mod sessions;
pub mod streamers;
pub mod timeline;
