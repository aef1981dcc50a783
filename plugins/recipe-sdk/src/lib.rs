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
//! checks for missing tables and columns, the `--filter-time`/`--filter-nvtx` window, NVTX
//! naming and the naming of GPU memory operations. It does not own the WIT bindings: each recipe
//! generates them and converts at the edge with [`wit_glue!`].

mod args;
mod columns;
pub mod copies;
pub mod enclosing;
mod filter;
mod glue;
pub mod gpu;
mod histogram;
mod kernel_name;
pub mod memops;
mod names;
pub mod nccl;
mod numbers;
pub mod nvtx;
pub mod pace;
mod report;
mod stats;
mod summary;
pub mod svg;
pub mod thread_ranges;
mod value;

pub use args::{Args, TimeUnit};
pub use columns::{for_each_row, ColumnValues, FastHasher, FastMap};
pub use filter::{
    parse_filter_nvtx, parse_filter_time, time_window, NvtxFilter, Window, FILTER_ARGS,
    STATS_ARGUMENTS,
};
pub use histogram::{histogram, Bin};
pub use kernel_name::{missing_note as kernel_name_missing_note, KernelName, KERNEL_NAME_ARGUMENT};
pub use names::{string_values, strip_api_version};
pub use numbers::{count_arg, number_arg, time_value};
pub use report::{Report, Schema};
pub use stats::{percent, round_half_away, Stats};
pub use summary::{
    size_summary_columns, size_summary_table, summary_columns, summary_table, Group, GroupsById,
    SizeSummarySpec, SummarySpec, Ties, BYTES_PER_MB,
};
pub use value::{Column, ColumnKind, Figure, Output, Table, Value};

/// Rows asked for per batch when reading a query's result: the host's most (it also cuts a
/// batch at 16 MiB of text), so that a large scan makes few calls across the boundary.
pub const BATCH_ROWS: u32 = 16_384;
