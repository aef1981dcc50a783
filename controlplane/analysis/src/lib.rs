//! The analysis service (binary `nsight-analysis`): jobs that run recipes over the reports in
//! storage, with CSV, notebook and HTML outputs written back to storage, behind a REST API
//! ([`service`]). The recipe host itself (sandboxed Wasm components over a report's SQLite, the
//! outputs, the local runner) is the `nsight-recipe-host` library, re-exported here.
//!
//! ```text
//!  REST (axum) ──> Service ──> runner ──> nsight_recipe_host::RecipeHost ──> recipe components
//!      │              │ records (redb)         │ reports read from storage (S3 or local)
//!      v              v                        v
//!   nsight_contracts::analysis types      outputs written back to storage
//! ```

pub mod service;
pub mod timeline;

// The host library, re-exported so `nsight_analysis::RecipeHost` and friends keep their paths.
pub use nsight_recipe_host::{
    compile_cache, csv, local, output_check, recipe_host, render, report, sandbox, table_to_csv,
    Argument, CancelHandle, Column, ColumnBatch, ColumnBuf, ColumnKind, Cursor, Figure, Level,
    Limits, LoadSource, LogLine, QueryError, QueryLimits, RecipeHost, RecipeHostError, RecipeInfo,
    RecipeKind, RecipeOutput, ReportDb, ReportError, StopFlag, Table, Value,
};
