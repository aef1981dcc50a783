//! The report as a recipe sees it: a trait over the host's `report` import (so recipes and
//! this crate's tests do not depend on the WIT bindings) and [`Schema`], which turns missing
//! tables and columns into notes instead of failures.

use std::collections::BTreeSet;

use crate::{ColumnValues, Output, Value, BATCH_ROWS};

/// One report, read-only. Implemented over the WIT import by `wit_glue!`.
pub trait Report {
    /// Tables and views, sorted by name.
    fn tables(&self) -> Vec<String>;
    /// Columns of `table` in declaration order; empty when there is no such table.
    fn columns(&self, table: &str) -> Vec<String>;
    /// Runs one read-only statement with `?` parameters, calling `row` for each result row
    /// (one value per column); returns the column names. An error from `row` stops the query
    /// and is returned.
    fn query(
        &self,
        sql: &str,
        params: &[Value],
        row: &mut dyn FnMut(&[Value]) -> Result<(), String>,
    ) -> Result<Vec<String>, String>;

    /// [`Report::query`] in columnar form: `batch` gets the rows a batch at a time, one
    /// [`ColumnValues`] per result column (all of the same length, never empty). The fast path
    /// for large scans; the default builds `Values` columns from [`Report::query`].
    fn query_columns(
        &self,
        sql: &str,
        params: &[Value],
        batch: &mut dyn FnMut(Vec<ColumnValues>) -> Result<(), String>,
    ) -> Result<Vec<String>, String> {
        let mut pending: Vec<Vec<Value>> = Vec::new();
        let mut flush = |pending: &mut Vec<Vec<Value>>| {
            if pending.first().is_some_and(|c| !c.is_empty()) {
                batch(
                    pending
                        .iter_mut()
                        .map(|c| ColumnValues::from_values(std::mem::take(c)))
                        .collect(),
                )
            } else {
                Ok(())
            }
        };
        let names = self.query(sql, params, &mut |row| {
            if pending.len() != row.len() {
                pending = vec![Vec::new(); row.len()];
            }
            for (column, v) in pending.iter_mut().zip(row) {
                column.push(v.clone());
            }
            if pending[0].len() >= BATCH_ROWS as usize {
                flush(&mut pending)?;
            }
            Ok(())
        })?;
        flush(&mut pending)?;
        Ok(names)
    }
}

/// The tables of a report, read once, and checks that note what is missing.
pub struct Schema<'r> {
    report: &'r dyn Report,
    tables: BTreeSet<String>,
}

impl std::fmt::Debug for Schema<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schema")
            .field("tables", &self.tables)
            .finish_non_exhaustive()
    }
}

impl<'r> Schema<'r> {
    pub fn read(report: &'r dyn Report) -> Self {
        Self {
            report,
            tables: report.tables().into_iter().collect(),
        }
    }

    pub fn report(&self) -> &'r dyn Report {
        self.report
    }

    pub fn has_table(&self, table: &str) -> bool {
        self.tables.contains(table)
    }

    /// The columns of `table` (empty when it is missing).
    pub fn columns(&self, table: &str) -> Vec<String> {
        if self.has_table(table) {
            self.report.columns(table)
        } else {
            Vec::new()
        }
    }

    /// Every Nsight Systems export has `StringIds`; a file without it is something else. Notes
    /// that and returns false.
    pub fn check_nsys_export(&self, out: &mut Output) -> bool {
        let ok = self.has_table("StringIds");
        if !ok {
            out.note(
                "table StringIds not in this report: the file does not look like an Nsight \
                 Systems SQLite export (nsys export --type sqlite)",
            );
        }
        ok
    }

    /// The columns of `table` when it exists and has every column in `required`; otherwise
    /// notes what is missing (`table X not in this report`, `column X.c not in this report`)
    /// and returns `None`. `why` ends the note, e.g. "the profile has no NVTX ranges".
    pub fn require(
        &self,
        out: &mut Output,
        table: &str,
        required: &[&str],
        why: &str,
    ) -> Option<Vec<String>> {
        if !self.has_table(table) {
            out.note(format!("table {table} not in this report ({why})"));
            return None;
        }
        let columns = self.report.columns(table);
        let missing: Vec<&str> = required
            .iter()
            .copied()
            .filter(|c| !columns.iter().any(|have| have == c))
            .collect();
        if missing.is_empty() {
            Some(columns)
        } else {
            for c in missing {
                out.note(format!(
                    "column {table}.{c} not in this report; nothing to summarise"
                ));
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake;

    impl Report for Fake {
        fn tables(&self) -> Vec<String> {
            vec!["StringIds".into(), "T".into()]
        }
        fn columns(&self, table: &str) -> Vec<String> {
            match table {
                "T" => vec!["start".into(), "end".into()],
                _ => vec!["id".into(), "value".into()],
            }
        }
        fn query(
            &self,
            _: &str,
            _: &[Value],
            _: &mut dyn FnMut(&[Value]) -> Result<(), String>,
        ) -> Result<Vec<String>, String> {
            Ok(Vec::new())
        }
    }

    #[test]
    fn missing_tables_and_columns_become_notes() {
        let schema = Schema::read(&Fake);
        let mut out = Output::default();
        assert!(schema.check_nsys_export(&mut out));
        assert_eq!(
            schema.require(&mut out, "T", &["start", "end"], "x"),
            Some(vec!["start".to_string(), "end".to_string()])
        );
        assert!(out.notes.is_empty());
        assert_eq!(schema.require(&mut out, "U", &["a"], "no U data"), None);
        assert_eq!(
            schema.require(&mut out, "T", &["start", "nameId"], "x"),
            None
        );
        assert_eq!(
            out.notes,
            [
                "table U not in this report (no U data)",
                "column T.nameId not in this report; nothing to summarise"
            ]
        );
        assert!(schema.columns("U").is_empty());
    }
}
