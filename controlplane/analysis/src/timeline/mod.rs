//! A report's timeline, served to the browser in tiles (docs/timeline.md). Pure: the index and
//! its pyramid; I/O: reading the SQLite export and one event's details. The cache and the REST
//! routes are the service's (`service::timelines`, `service::rest_timeline`).
//!
//! ```text
//!  report.sqlite ──load──> [TrackSource] ──Index::build──> Index ──tile / range──> contracts
//!                                                            ├──detail (SQL on the report)
//!                                                            ├──saved (on disk, for a restart)
//!                                                            └──perfetto (a Perfetto trace)
//! ```

pub mod detail;
pub mod flows;
pub mod index;
pub mod load;
pub mod perfetto;
pub mod project;
pub mod pyramid;
pub mod saved;
pub mod search;

pub use index::Index;
