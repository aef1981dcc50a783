//! The recipe host: recipes as sandboxed Wasm components of the `recipe` world (wit/), each run
//! reading one report (an nsys SQLite export) read-only, and what their outputs become (CSV, a
//! notebook, an HTML page). A library without a server or storage: the analysis service
//! (`nsight-analysis`) runs it for jobs, the CLI (`nsight-cloud analysis run --input`) runs it
//! on local files through [`local`].
//!
//! ```text
//!  recipes dir ──load──> RecipeHost (compile once, cache by sha256)
//!                            │ new Store per call: fuel + memory limits
//!                            v
//!                        component ──describe()──> RecipeInfo
//!                        component ──run(args)───> RecipeOutput ──table_to_csv──> CSV
//!                            │ report import                    ──render──> notebook, HTML
//!                            v
//!                        ReportDb (read-only SQLite, cursors on worker threads)
//! ```
//!
//! [`compile_cache`] keeps compiled components on disk across processes; [`args`] reads
//! command-line style recipe arguments the same way for jobs and local runs.

pub mod args;
mod columns;
pub mod compile_cache;
pub mod csv;
mod cursor;
pub mod local;
pub mod nsys_export;
pub mod output_check;
pub mod recipe_host;
pub mod render;
pub mod report;
pub mod sandbox;

pub use args::{error_chain, parse_args};
pub use csv::table_to_csv;
pub use recipe_host::{
    Argument, CancelHandle, Column, ColumnKind, Figure, Level, Limits, LoadSource, LogLine,
    RecipeHost, RecipeHostError, RecipeInfo, RecipeKind, RecipeOutput, Table, Value,
};
pub use report::{
    limit_sqlite_heap, sqlite_heap_limit, ColumnBatch, ColumnBuf, Cursor, QueryError, QueryLimits,
    ReportDb, ReportError, StopFlag,
};
