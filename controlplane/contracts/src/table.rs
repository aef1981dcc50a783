//! The CSV tables analysis jobs write (`GET /jobs/{id}/files/<name>.csv`, RFC 4180: a header
//! row, quoted fields with doubled quotes, CRLF or LF line ends), read back into rows for a
//! client to show, and sorted the way a person expects: numbers by value, text by characters,
//! empty cells last.
//!
//! ```text
//!  "Range,Instances\n\"a,b\",3\n" ──Table::parse──> header [Range, Instances], rows [[a,b | 3]]
//!  table.sorted(column, descending) ──> row order (indices), numeric where both cells are
//! ```

use std::cmp::Ordering;

/// A parsed CSV table. Invariant: every row has exactly `header.len()` cells (short rows are
/// padded with empty cells, long ones keep their extra cells cut off).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// Splits CSV text into records of fields. Never fails: an unterminated quote runs to the end.
fn records(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut record = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\r') if chars.peek() == Some(&'\n') => {}
            (false, '\n') => {
                record.push(std::mem::take(&mut field));
                out.push(std::mem::take(&mut record));
            }
            (false, c) => field.push(c),
        }
    }
    if !field.is_empty() || !record.is_empty() {
        record.push(field);
        out.push(record);
    }
    out
}

/// Orders two cells: both numbers by value, else text; an empty cell after any other.
pub fn compare_cells(a: &str, b: &str) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    match (a.trim().parse::<f64>(), b.trim().parse::<f64>()) {
        (Ok(x), Ok(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        _ => a.cmp(b),
    }
}

impl Table {
    /// Reads CSV text whose first record is the header.
    pub fn parse(text: &str) -> Table {
        let mut records = records(text).into_iter();
        let header = records.next().unwrap_or_default();
        let width = header.len();
        let rows = records
            .filter(|r| !(r.len() == 1 && r[0].is_empty()))
            .map(|mut r| {
                r.resize(width, String::new());
                r
            })
            .collect();
        Table { header, rows }
    }

    /// The row indices in the order of `column` (ascending or descending; ties keep file
    /// order; empty cells last either way). An unknown column keeps file order.
    pub fn sorted(&self, column: usize, descending: bool) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.rows.len()).collect();
        if column >= self.header.len() {
            return order;
        }
        let cell = |i: usize| self.rows[i][column].as_str();
        order.sort_by(|&x, &y| {
            let (a, b) = (cell(x), cell(y));
            if a.is_empty() || b.is_empty() {
                return compare_cells(a, b);
            }
            let o = compare_cells(a, b);
            if descending {
                o.reverse()
            } else {
                o
            }
        });
        order
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields_line_ends_and_ragged_rows() {
        let t = Table::parse("Range,Instances,Note\r\n\"a,\"\"b\"\"\",3,x\n\"multi\nline\",12\n\n");
        assert_eq!(t.header, ["Range", "Instances", "Note"]);
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.rows[0], ["a,\"b\"", "3", "x"]);
        assert_eq!(t.rows[1], ["multi\nline", "12", ""]);
        assert_eq!(Table::parse(""), Table::default());
        assert_eq!(Table::parse("only,header").rows.len(), 0);
        let unterminated = Table::parse("h\n\"open");
        assert_eq!(unterminated.rows, [["open"]]);
    }

    #[test]
    fn numbers_sort_by_value_and_empty_cells_last() {
        let t = Table::parse("name,total\nb,100\na,9\nc,\nd,25.5\n");
        assert_eq!(t.sorted(1, false), [1, 3, 0, 2]);
        assert_eq!(t.sorted(1, true), [0, 3, 1, 2]);
        assert_eq!(t.sorted(0, false), [1, 0, 2, 3]);
        assert_eq!(t.sorted(0, true), [3, 2, 0, 1]);
        assert_eq!(t.sorted(9, true), [0, 1, 2, 3]);
    }
}
