//! `wit_glue!`: the edge between a recipe's WIT bindings and this crate, written once.
//!
//! ```text
//!  report import (query → cursor → next-columns) ──> WitReport: Report ──> recipe fn
//!                                                    (rows, or whole columns: query_columns)
//!  recipe fn ──> Output ──to_wit_output──> run export
//! ```

/// Generates, in a recipe crate, the glue between this crate and the WIT bindings in module
/// `$m` (made there with `wit_bindgen::generate!` for the `recipe` world, so that
/// `$m::nsight::recipe::{report, types}` exist):
///
/// - `WitReport`, a [`Report`](crate::Report) over the `report` import that reads results in
///   columnar batches of [`BATCH_ROWS`](crate::BATCH_ROWS) (`next-columns`), handed on as rows
///   (`query`) or as columns (`query_columns`);
/// - `wit_run(args, recipe)`, which runs `recipe` on `WitReport` and converts its output for
///   the `run` export.
///
/// ```ignore
/// mod component { wit_bindgen::generate!({ world: "recipe", path: "../../../wit" }); ... }
/// nsight_recipe_sdk::wit_glue!(component);
/// fn run(args: Vec<(String, String)>) -> Result<Output, String> { wit_run(args, my_recipe) }
/// ```
#[macro_export]
macro_rules! wit_glue {
    ($m:ident) => {
        /// The `report` import, as a [`Report`]($crate::Report).
        #[derive(Debug)]
        struct WitReport;

        impl $crate::Report for WitReport {
            fn tables(&self) -> ::std::vec::Vec<::std::string::String> {
                $m::nsight::recipe::report::tables()
            }

            fn columns(&self, table: &str) -> ::std::vec::Vec<::std::string::String> {
                $m::nsight::recipe::report::columns(table)
            }

            fn query(
                &self,
                sql: &str,
                params: &[$crate::Value],
                row: &mut dyn FnMut(&[$crate::Value]) -> ::std::result::Result<(), ::std::string::String>,
            ) -> ::std::result::Result<::std::vec::Vec<::std::string::String>, ::std::string::String>
            {
                let params: ::std::vec::Vec<$m::nsight::recipe::types::Value> =
                    params.iter().cloned().map(wit_value).collect();
                let cursor = $m::nsight::recipe::report::query(sql, &params)
                    .map_err(|e| query_error(sql, e))?;
                let columns = cursor.columns();
                while let Some(batch) = cursor
                    .next_columns($crate::BATCH_ROWS)
                    .map_err(|e| query_error(sql, e))?
                {
                    $crate::for_each_row(batch.into_iter().map(sdk_column).collect(), row)?;
                }
                Ok(columns)
            }

            fn query_columns(
                &self,
                sql: &str,
                params: &[$crate::Value],
                batch: &mut dyn FnMut(::std::vec::Vec<$crate::ColumnValues>) -> ::std::result::Result<(), ::std::string::String>,
            ) -> ::std::result::Result<::std::vec::Vec<::std::string::String>, ::std::string::String>
            {
                let params: ::std::vec::Vec<$m::nsight::recipe::types::Value> =
                    params.iter().cloned().map(wit_value).collect();
                let cursor = $m::nsight::recipe::report::query(sql, &params)
                    .map_err(|e| query_error(sql, e))?;
                let columns = cursor.columns();
                while let Some(b) = cursor
                    .next_columns($crate::BATCH_ROWS)
                    .map_err(|e| query_error(sql, e))?
                {
                    batch(b.into_iter().map(sdk_column).collect())?;
                }
                Ok(columns)
            }
        }

        fn sdk_column(c: $m::nsight::recipe::report::ColumnValues) -> $crate::ColumnValues {
            use $m::nsight::recipe::report::ColumnValues as W;
            match c {
                W::Ints(c) => $crate::ColumnValues::Ints {
                    values: c.values,
                    nulls: c.nulls,
                },
                W::Reals(c) => $crate::ColumnValues::Reals {
                    values: c.values,
                    nulls: c.nulls,
                },
                W::Values(v) => $crate::ColumnValues::Values(v.into_iter().map(sdk_value).collect()),
            }
        }

        fn query_error(
            sql: &str,
            e: $m::nsight::recipe::report::QueryError,
        ) -> ::std::string::String {
            use $m::nsight::recipe::report::QueryError as E;
            let (what, message) = match e {
                E::NotReadOnly(m) => ("refused (not read-only)", m),
                E::Invalid(m) => ("invalid", m),
                E::Interrupted(m) => ("interrupted", m),
                E::TooManyCursors(m) => ("refused (too many cursors)", m),
                E::Failed(m) => ("failed", m),
            };
            format!("query {what}: {message} [{sql}]")
        }

        fn wit_value(v: $crate::Value) -> $m::nsight::recipe::types::Value {
            use $m::nsight::recipe::types::Value as W;
            match v {
                $crate::Value::Null => W::Null,
                $crate::Value::Int(i) => W::Int(i),
                $crate::Value::Real(r) => W::Real(r),
                $crate::Value::Text(s) => W::Text(s),
                $crate::Value::Blob(b) => W::Blob(b),
            }
        }

        fn sdk_value(v: $m::nsight::recipe::types::Value) -> $crate::Value {
            use $m::nsight::recipe::types::Value as W;
            match v {
                W::Null => $crate::Value::Null,
                W::Int(i) => $crate::Value::Int(i),
                W::Real(r) => $crate::Value::Real(r),
                W::Text(s) => $crate::Value::Text(s),
                W::Blob(b) => $crate::Value::Blob(b),
            }
        }

        fn to_wit_output(o: $crate::Output) -> $m::nsight::recipe::types::Output {
            use $m::nsight::recipe::types as w;
            let column = |c: $crate::Column| w::Column {
                name: c.name,
                kind: match c.kind {
                    $crate::ColumnKind::Int => w::ColumnKind::Int,
                    $crate::ColumnKind::Real => w::ColumnKind::Real,
                    $crate::ColumnKind::Text => w::ColumnKind::Text,
                },
                unit: c.unit,
            };
            w::Output {
                tables: o
                    .tables
                    .into_iter()
                    .map(|t| w::Table {
                        name: t.name,
                        columns: t.columns.into_iter().map(column).collect(),
                        rows: t
                            .rows
                            .into_iter()
                            .map(|r| r.into_iter().map(wit_value).collect())
                            .collect(),
                    })
                    .collect(),
                notes: o.notes,
                figures: o
                    .figures
                    .into_iter()
                    .map(|f| w::Figure {
                        name: f.name,
                        svg: f.svg,
                    })
                    .collect(),
            }
        }

        /// The arguments `describe` lists, from the SDK's `(name, description, default)`
        /// triples: `wit_arguments(&STATS_ARGUMENTS)`, or a recipe's own chained with them.
        #[allow(dead_code, reason = "a recipe may list its arguments by hand")]
        pub(crate) fn wit_arguments<'a>(
            specs: impl ::std::iter::IntoIterator<
                Item = &'a (&'a str, &'a str, ::std::option::Option<&'a str>),
            >,
        ) -> ::std::vec::Vec<$m::nsight::recipe::types::Argument> {
            specs
                .into_iter()
                .map(|(name, description, default)| $m::nsight::recipe::types::Argument {
                    name: (*name).into(),
                    description: (*description).into(),
                    default_value: default.map(::std::convert::Into::into),
                })
                .collect()
        }

        /// Sends a panic's message (`panicked at <file>:<line>:<col>:\n<message>`) to the job's
        /// log at error level before the component aborts, so that the host can say why the
        /// call trapped. Idempotent; `wit_run` calls it.
        #[allow(dead_code, reason = "a multi-recipe's reduce calls it by hand")]
        pub(crate) fn log_panics() {
            ::std::panic::set_hook(::std::boxed::Box::new(|info| {
                $m::nsight::recipe::host::log(
                    $m::nsight::recipe::host::Level::Error,
                    &::std::format!("{info}"),
                );
            }));
        }

        /// Runs `recipe` on this component's report and converts its output for `run`.
        fn wit_run(
            args: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
            recipe: fn(
                &dyn $crate::Report,
                &[(::std::string::String, ::std::string::String)],
            ) -> ::std::result::Result<$crate::Output, ::std::string::String>,
        ) -> ::std::result::Result<$m::nsight::recipe::types::Output, ::std::string::String> {
            log_panics();
            recipe(&WitReport, &args).map(to_wit_output)
        }
    };
}

/// Everything a recipe crate needs from the WIT world, written once: the canonical-ABI bindings
/// of wit/recipe.wit in a module `component` (wit-bindgen's glue is `unsafe`, allowed there
/// only), the export of `$recipe` (which implements `component::Guest`), and [`wit_glue!`].
/// The `wit/` path is relative to the recipe crate, so recipes live in `plugins/recipes/<name>`.
///
/// ```ignore
/// nsight_recipe_sdk::recipe_component!(MyRecipe);
/// use component::{log, Argument, Guest, Level, Output as WitOutput, RecipeInfo};
/// ```
#[macro_export]
macro_rules! recipe_component {
    ($recipe:ident) => {
        /// The canonical-ABI glue generated from wit/recipe.wit, and the exports of this recipe.
        #[allow(
            unsafe_code,
            reason = "wit-bindgen generates the canonical ABI glue as unsafe fns"
        )]
        mod component {
            wit_bindgen::generate!({
                world: "recipe",
                path: "../../../wit",
            });

            use super::$recipe;
            export!($recipe);

            pub use nsight::recipe::{
                host::{log, Level},
                types::Argument,
            };
        }

        $crate::wit_glue!(component);
    };
}
