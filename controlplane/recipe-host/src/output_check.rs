//! What a recipe's output must be before the host uses it (pure): the contract of
//! `wit/recipe.wit` that its types cannot say. A recipe is untrusted code; an output that breaks
//! the contract fails the run with a message naming the table, row or figure, instead of
//! writing a broken CSV, overwriting another table's file or putting foreign markup on a page.
//!
//! | rule | why |
//! |---|---|
//! | at most [`MAX_TABLES`] tables and [`MAX_FIGURES`] figures | each becomes a stored file |
//! | names: 1 to [`MAX_NAME_LEN`] of `A-Z a-z 0-9 . _ -`, unique among tables (and figures) | a name is a file name |
//! | every row has one value per column | a CSV row per table row |
//! | an `int` column holds integers, a `real` column numbers, each or null | the column's declared kind |
//! | a figure is one `<svg>` document of at most [`MAX_FIGURE_BYTES`] | it is embedded in the page |

use std::collections::HashSet;

use crate::recipe_host::{ColumnKind, Output, Value};

pub const MAX_TABLES: usize = 256;
pub const MAX_FIGURES: usize = 64;
pub const MAX_NAME_LEN: usize = 128;
pub const MAX_FIGURE_BYTES: usize = 2 << 20;

/// Checks `output` against the rules above; the error says what broke which rule.
pub fn check_output(output: &Output) -> Result<(), String> {
    if output.tables.len() > MAX_TABLES {
        return Err(format!(
            "{} tables (at most {MAX_TABLES})",
            output.tables.len()
        ));
    }
    if output.figures.len() > MAX_FIGURES {
        return Err(format!(
            "{} figures (at most {MAX_FIGURES})",
            output.figures.len()
        ));
    }
    let mut names = HashSet::new();
    for t in &output.tables {
        check_name("table", &t.name)?;
        if !names.insert(t.name.as_str()) {
            return Err(format!("two tables are named `{}`", t.name));
        }
        for (i, row) in t.rows.iter().enumerate() {
            if row.len() != t.columns.len() {
                return Err(format!(
                    "table {}: row {i} has {} values for {} columns",
                    t.name,
                    row.len(),
                    t.columns.len()
                ));
            }
            for (value, column) in row.iter().zip(&t.columns) {
                if !fits(column.kind, value) {
                    return Err(format!(
                        "table {}: row {i}, column `{}` is declared {} but holds {}",
                        t.name,
                        column.name,
                        kind_name(column.kind),
                        value_name(value)
                    ));
                }
            }
        }
    }
    let mut figures = HashSet::new();
    for f in &output.figures {
        check_name("figure", &f.name)?;
        if !figures.insert(f.name.as_str()) {
            return Err(format!("two figures are named `{}`", f.name));
        }
        check_svg(&f.name, &f.svg)?;
    }
    Ok(())
}

fn check_name(what: &str, name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        let shown: String = name.chars().take(MAX_NAME_LEN).collect();
        Err(format!(
            "{what} name {shown:?} is not 1 to {MAX_NAME_LEN} characters of A-Z a-z 0-9 . _ - \
             (it names a file)"
        ))
    }
}

fn fits(kind: ColumnKind, value: &Value) -> bool {
    matches!(
        (kind, value),
        (_, Value::Null)
            | (ColumnKind::Text, _)
            | (ColumnKind::Int, Value::Int(_))
            | (ColumnKind::Real, Value::Int(_) | Value::Real(_))
    )
}

fn kind_name(kind: ColumnKind) -> &'static str {
    match kind {
        ColumnKind::Int => "int",
        ColumnKind::Real => "real",
        ColumnKind::Text => "text",
    }
}

fn value_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Int(_) => "an integer",
        Value::Real(_) => "a real",
        Value::Text(_) => "text",
        Value::Blob(_) => "a blob",
    }
}

/// One standalone SVG document: an optional XML declaration, then `<svg ...>` ... `</svg>`.
fn check_svg(name: &str, svg: &str) -> Result<(), String> {
    if svg.len() > MAX_FIGURE_BYTES {
        return Err(format!(
            "figure {name}: {} bytes of SVG (at most {MAX_FIGURE_BYTES})",
            svg.len()
        ));
    }
    let body = svg.trim();
    let body = match body.strip_prefix("<?xml") {
        Some(rest) => rest
            .split_once("?>")
            .map_or("", |(_, after)| after)
            .trim_start(),
        None => body,
    };
    let opens = body.starts_with("<svg")
        && body[4..].starts_with(|c: char| c.is_ascii_whitespace() || c == '>');
    if opens && body.ends_with("</svg>") {
        Ok(())
    } else {
        Err(format!(
            "figure {name} is not an SVG document (it must start with <svg and end with </svg>)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe_host::{Column, Figure, Table};

    fn table(name: &str, kind: ColumnKind, rows: Vec<Vec<Value>>) -> Table {
        Table {
            name: name.into(),
            columns: vec![Column {
                name: "c".into(),
                kind,
                unit: None,
            }],
            rows,
        }
    }

    fn output(tables: Vec<Table>, figures: Vec<Figure>) -> Output {
        Output {
            tables,
            notes: Vec::new(),
            figures,
        }
    }

    fn figure(name: &str, svg: &str) -> Figure {
        Figure {
            name: name.into(),
            svg: svg.into(),
        }
    }

    const SVG: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\"><rect/></svg>";

    #[test]
    fn a_well_formed_output_passes() {
        let o = output(
            vec![
                table(
                    "a",
                    ColumnKind::Int,
                    vec![vec![Value::Int(1)], vec![Value::Null]],
                ),
                table(
                    "b.c-d_e",
                    ColumnKind::Real,
                    vec![vec![Value::Int(1)], vec![Value::Real(0.5)]],
                ),
                table(
                    "t",
                    ColumnKind::Text,
                    vec![vec![Value::Blob(vec![1])], vec![Value::Int(2)]],
                ),
            ],
            vec![
                figure("f", SVG),
                figure("g", &format!("<?xml version=\"1.0\"?>\n{SVG}\n")),
            ],
        );
        assert_eq!(check_output(&o), Ok(()));
    }

    #[test]
    fn each_broken_rule_is_named() {
        let cases = [
            (
                output(vec![table("t", ColumnKind::Int, vec![vec![]])], vec![]),
                "table t: row 0 has 0 values for 1 columns",
            ),
            (
                output(vec![table("t", ColumnKind::Int, vec![vec![Value::Real(1.5)]])], vec![]),
                "table t: row 0, column `c` is declared int but holds a real",
            ),
            (
                output(vec![table("t", ColumnKind::Real, vec![vec![Value::Text("x".into())]])], vec![]),
                "table t: row 0, column `c` is declared real but holds text",
            ),
            (
                output(vec![table("../t", ColumnKind::Int, vec![])], vec![]),
                "table name \"../t\" is not 1 to 128 characters of A-Z a-z 0-9 . _ - (it names a file)",
            ),
            (
                output(vec![table("", ColumnKind::Int, vec![])], vec![]),
                "table name \"\" is not 1 to 128 characters of A-Z a-z 0-9 . _ - (it names a file)",
            ),
            (
                output(
                    vec![table("t", ColumnKind::Int, vec![]), table("t", ColumnKind::Int, vec![])],
                    vec![],
                ),
                "two tables are named `t`",
            ),
            (
                output(vec![], vec![figure("f", "<script>alert(1)</script>")]),
                "figure f is not an SVG document (it must start with <svg and end with </svg>)",
            ),
            (
                output(vec![], vec![figure("f", "<svgx></svg>")]),
                "figure f is not an SVG document (it must start with <svg and end with </svg>)",
            ),
            (
                output(vec![], vec![figure("f", SVG), figure("f", SVG)]),
                "two figures are named `f`",
            ),
        ];
        for (o, want) in cases {
            assert_eq!(check_output(&o), Err(want.to_string()));
        }
    }

    #[test]
    fn sizes_and_counts_are_bounded() {
        let big = format!("<svg>{}</svg>", " ".repeat(MAX_FIGURE_BYTES));
        let err = check_output(&output(vec![], vec![figure("f", &big)])).unwrap_err();
        assert!(err.starts_with("figure f: "), "{err}");
        let many = (0..=MAX_TABLES)
            .map(|i| table(&format!("t{i}"), ColumnKind::Int, vec![]))
            .collect();
        assert_eq!(
            check_output(&output(many, vec![])),
            Err("257 tables (at most 256)".into())
        );
        let long = "x".repeat(MAX_NAME_LEN + 1);
        assert!(
            check_output(&output(vec![table(&long, ColumnKind::Int, vec![])], vec![])).is_err()
        );
    }
}
