//! What every recipe component shares, in plain Rust so that it is unit-tested on the host:
//!
//! ```text
//!  report (WIT import) ──wit_glue!──> dyn Report ──Schema──> notes for what is missing
//!                                         │ rows
//!                                         v
//!                   Group { labels, durations } ──summary_table──> Table ──> Output
//!                                (stats: sum, mean, median, min, max, stddev, Time (%))
//! ```
//!
//! It owns the statistics and their rounding rules (docs/recipes.md), argument parsing and the
//! checks for missing tables and columns. It does not own the WIT bindings: each recipe
//! generates them and converts at the edge with [`wit_glue!`].

mod args;
mod glue;
mod names;
mod report;
mod stats;
mod summary;
mod value;

pub use args::{Args, TimeUnit};
pub use names::strip_api_version;
pub use report::{Report, Schema};
pub use stats::{percent, round_half_away, Stats};
pub use summary::{summary_columns, summary_table, Group, SummarySpec};
pub use value::{Column, ColumnKind, Figure, Output, Table, Value};

/// Rows asked for per batch when reading a query's result.
pub const BATCH_ROWS: u32 = 4096;
