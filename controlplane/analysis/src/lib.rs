//! The analysis service: recipes as sandboxed Wasm components of the `recipe` world (wit/),
//! each run reading one report (an nsys SQLite export) read-only.
//!
//! ```text
//!  recipes dir ──load──> RecipeHost (compile once, cache by sha256)
//!                            │ new Store per call: fuel + memory limits
//!                            v
//!                        component ──describe()──> RecipeInfo
//!                        component ──run(args)───> RecipeOutput ──table_to_csv──> CSV
//!                            │ report import
//!                            v
//!                        ReportDb (read-only SQLite, cursors on worker threads)
//! ```
//!
//! [`compile_cache`] keeps compiled components on disk across processes; [`local`] runs a
//! recipe on local files with no server (the CLI's `analysis run --input`).
//!
//! [`service`] is the REST service around the host (binary `nsight-analysis`): jobs over the
//! reports in storage, with CSV, notebook and HTML outputs written back to storage.

mod columns;
pub mod compile_cache;
pub mod csv;
mod cursor;
pub mod local;
pub mod output_check;
pub mod recipe_host;
pub mod report;
pub mod sandbox;
pub mod service;

pub use csv::table_to_csv;
pub use recipe_host::{
    Argument, CancelHandle, Column, ColumnKind, Figure, Level, Limits, LoadSource, LogLine,
    RecipeHost, RecipeHostError, RecipeInfo, RecipeKind, RecipeOutput, Table, Value,
};
pub use report::{
    ColumnBatch, ColumnBuf, Cursor, QueryError, QueryLimits, ReportDb, ReportError, StopFlag,
};
