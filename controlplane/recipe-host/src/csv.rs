//! CSV rendering of a recipe's output table (RFC 4180): a header line of column names, one
//! line per row, CRLF line ends, and fields quoted (quotes doubled) when they hold a comma, a
//! quote, CR or LF. A pure function; writing the file is the caller's business.
//!
//! Values: NULL is an empty field; integers as decimal; reals in the shortest form that reads
//! back to the same f64, always with a decimal point (`12.0`, `0.1`, `1e-7` as `0.0000001`);
//! text as is; blobs as lowercase hex.

use std::fmt::Write as _;

use crate::recipe_host::{Table, Value};

/// The table as CSV text.
pub fn table_to_csv(table: &Table) -> String {
    let mut out = String::new();
    let header: Vec<String> = table.columns.iter().map(|c| field(&c.name)).collect();
    out.push_str(&header.join(","));
    out.push_str("\r\n");
    for row in &table.rows {
        let fields: Vec<String> = row.iter().map(value).collect();
        out.push_str(&fields.join(","));
        out.push_str("\r\n");
    }
    out
}

fn value(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Int(i) => i.to_string(),
        Value::Real(r) => real(*r),
        Value::Text(s) => field(s),
        Value::Blob(b) => b
            .iter()
            .fold(String::with_capacity(b.len() * 2), |mut s, x| {
                let _ = write!(s, "{x:02x}");
                s
            }),
    }
}

/// Shortest round-trip decimal, with a decimal point for finite values.
pub fn real(r: f64) -> String {
    let s = r.to_string();
    if r.is_finite() && !s.contains('.') {
        format!("{s}.0")
    } else {
        s
    }
}

fn field(s: &str) -> String {
    if s.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe_host::{Column, ColumnKind};

    #[test]
    fn renders_rfc_4180() {
        let col = |name: &str, kind| Column {
            name: name.into(),
            kind,
            unit: None,
        };
        let table = Table {
            name: "t".into(),
            columns: vec![
                col("Time (%)", ColumnKind::Real),
                col("Total Time (ns)", ColumnKind::Int),
                col("Name", ColumnKind::Text),
            ],
            rows: vec![
                vec![
                    Value::Real(12.0),
                    Value::Int(-5),
                    Value::Text("void k<int, float>(\"x\")".into()),
                ],
                vec![Value::Null, Value::Int(0), Value::Text("a\nb".into())],
                vec![
                    Value::Real(1e-7),
                    Value::Blob(vec![0, 255]),
                    Value::Text("plain".into()),
                ],
            ],
        };
        assert_eq!(
            table_to_csv(&table),
            "Time (%),Total Time (ns),Name\r\n\
             12.0,-5,\"void k<int, float>(\"\"x\"\")\"\r\n\
             ,0,\"a\nb\"\r\n\
             0.0000001,00ff,plain\r\n"
        );
    }

    #[test]
    fn reals_read_back_exactly() {
        for r in [0.1, 16.7, 1234.3, 1.0 / 3.0, 4.508, 1e300, 5e-324] {
            assert_eq!(real(r).parse::<f64>().unwrap(), r);
        }
        assert_eq!(real(f64::NAN), "NaN");
    }
}
