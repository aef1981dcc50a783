//! A batch of query results in columnar form (pure, no SQLite or Wasm): what a cursor's worker
//! builds, what `next-columns` hands to a recipe (wit/recipe.wit, `column-values`) and what
//! `next-batch` turns back into rows.
//!
//! ```text
//!  row 0: (Int 5, Text "a")    ColumnBuilder ─> Ints  { values: [5, 7, 0], nulls: [2] }
//!  row 1: (Int 7, Text "b")                  ─> Values([Text "a", Text "b", Null])
//!  row 2: (Null, Null)
//! ```
//!
//! A column stays in the most compact form its values allow: integers (and nulls) as `Ints`,
//! reals (and nulls) as `Reals`, anything else as `Values`; a column whose values are all null
//! is `Ints` with every row listed in `nulls`.

use rusqlite::types::{Value, ValueRef};

/// One column of a batch. Invariant: for `Ints` and `Reals`, `nulls` is ascending, every entry
/// is a row index below `values.len()`, and `values` holds 0 at those rows.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnBuf {
    Ints { values: Vec<i64>, nulls: Vec<u32> },
    Reals { values: Vec<f64>, nulls: Vec<u32> },
    Values(Vec<Value>),
}

impl Default for ColumnBuf {
    fn default() -> Self {
        Self::Ints {
            values: Vec::new(),
            nulls: Vec::new(),
        }
    }
}

impl ColumnBuf {
    /// Number of rows.
    pub fn len(&self) -> usize {
        match self {
            Self::Ints { values, .. } => values.len(),
            Self::Reals { values, .. } => values.len(),
            Self::Values(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends one value, changing form when it does not fit the current one.
    pub fn push(&mut self, v: ValueRef<'_>) {
        let row = u32::try_from(self.len()).unwrap_or(u32::MAX);
        match (&mut *self, v) {
            (Self::Ints { values, .. }, ValueRef::Integer(i)) => values.push(i),
            (Self::Ints { values, nulls }, ValueRef::Null) => {
                values.push(0);
                nulls.push(row);
            }
            (Self::Reals { values, .. }, ValueRef::Real(r)) => values.push(r),
            (Self::Reals { values, nulls }, ValueRef::Null) => {
                values.push(0.0);
                nulls.push(row);
            }
            (Self::Values(values), v) => values.push(owned(v)),
            // Only nulls so far: take the form of the first non-null value.
            (Self::Ints { values, nulls }, ValueRef::Real(r)) if nulls.len() == values.len() => {
                let mut reals = vec![0.0; values.len()];
                reals.push(r);
                *self = Self::Reals {
                    values: reals,
                    nulls: std::mem::take(nulls),
                };
            }
            (Self::Reals { values, nulls }, ValueRef::Integer(i))
                if nulls.len() == values.len() =>
            {
                let mut ints = vec![0; values.len()];
                ints.push(i);
                *self = Self::Ints {
                    values: ints,
                    nulls: std::mem::take(nulls),
                };
            }
            (_, v) => {
                let mut values = std::mem::take(self).into_values();
                values.push(owned(v));
                *self = Self::Values(values);
            }
        }
    }

    /// Every value, one per row.
    pub fn into_values(self) -> Vec<Value> {
        fn with_nulls<T>(values: Vec<T>, nulls: &[u32], wrap: impl Fn(T) -> Value) -> Vec<Value> {
            let mut nulls = nulls.iter().peekable();
            (0u32..)
                .zip(values)
                .map(|(row, v)| {
                    if nulls.next_if(|&&n| n == row).is_some() {
                        Value::Null
                    } else {
                        wrap(v)
                    }
                })
                .collect()
        }
        match self {
            Self::Ints { values, nulls } => with_nulls(values, &nulls, Value::Integer),
            Self::Reals { values, nulls } => with_nulls(values, &nulls, Value::Real),
            Self::Values(v) => v,
        }
    }

    /// Splits off the rows from `at` on (as `Vec::split_off`).
    pub fn split_off(&mut self, at: usize) -> Self {
        fn split_nulls(nulls: &mut Vec<u32>, at: usize) -> Vec<u32> {
            let at32 = u32::try_from(at).unwrap_or(u32::MAX);
            let first = nulls.partition_point(|&n| n < at32);
            nulls
                .split_off(first)
                .into_iter()
                .map(|n| n - at32)
                .collect()
        }
        match self {
            Self::Ints { values, nulls } => Self::Ints {
                values: values.split_off(at),
                nulls: split_nulls(nulls, at),
            },
            Self::Reals { values, nulls } => Self::Reals {
                values: values.split_off(at),
                nulls: split_nulls(nulls, at),
            },
            Self::Values(v) => Self::Values(v.split_off(at)),
        }
    }
}

/// Some rows of a statement, one [`ColumnBuf`] per result column. Invariant: every column has
/// `rows` rows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ColumnBatch {
    pub rows: usize,
    pub columns: Vec<ColumnBuf>,
}

impl ColumnBatch {
    /// An empty batch of `width` columns.
    pub fn new(width: usize) -> Self {
        Self {
            rows: 0,
            columns: vec![ColumnBuf::default(); width],
        }
    }

    /// Splits off the rows from `at` on; `self` keeps the first `at`.
    pub fn split_off(&mut self, at: usize) -> Self {
        let rest = Self {
            rows: self.rows.saturating_sub(at),
            columns: self.columns.iter_mut().map(|c| c.split_off(at)).collect(),
        };
        self.rows = self.rows.min(at);
        rest
    }

    /// The rows, each with one value per column.
    pub fn into_rows(self) -> Vec<Vec<Value>> {
        let mut columns: Vec<_> = self
            .columns
            .into_iter()
            .map(|c| c.into_values().into_iter())
            .collect();
        (0..self.rows)
            .map(|_| {
                columns
                    .iter_mut()
                    .map(|c| c.next().unwrap_or(Value::Null))
                    .collect()
            })
            .collect()
    }
}

/// An owned copy of one SQLite value (text that is not UTF-8 is replaced lossily).
pub fn owned(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(r) => Value::Real(r),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(values: &[ValueRef<'_>]) -> ColumnBuf {
        let mut c = ColumnBuf::default();
        for v in values {
            c.push(*v);
        }
        c
    }

    #[test]
    fn integers_and_nulls_stay_integers() {
        let c = column(&[ValueRef::Integer(5), ValueRef::Null, ValueRef::Integer(-1)]);
        assert_eq!(
            c,
            ColumnBuf::Ints {
                values: vec![5, 0, -1],
                nulls: vec![1]
            }
        );
        assert_eq!(
            c.into_values(),
            [Value::Integer(5), Value::Null, Value::Integer(-1)]
        );
    }

    #[test]
    fn leading_nulls_take_the_form_of_the_first_value() {
        let c = column(&[ValueRef::Null, ValueRef::Real(1.5), ValueRef::Null]);
        assert_eq!(
            c,
            ColumnBuf::Reals {
                values: vec![0.0, 1.5, 0.0],
                nulls: vec![0, 2]
            }
        );
        let c = column(&[ValueRef::Null, ValueRef::Real(1.5)]);
        let mut c2 = c.clone();
        c2.push(ValueRef::Integer(2));
        assert_eq!(
            c2,
            ColumnBuf::Values(vec![Value::Null, Value::Real(1.5), Value::Integer(2)])
        );
    }

    #[test]
    fn mixed_kinds_become_values_in_order() {
        let c = column(&[
            ValueRef::Integer(1),
            ValueRef::Null,
            ValueRef::Text(b"x"),
            ValueRef::Integer(2),
        ]);
        assert_eq!(
            c,
            ColumnBuf::Values(vec![
                Value::Integer(1),
                Value::Null,
                Value::Text("x".into()),
                Value::Integer(2)
            ])
        );
    }

    #[test]
    fn split_and_rows_keep_every_value_in_place() {
        let mut batch = ColumnBatch::new(2);
        for i in 0..5 {
            let a = if i % 2 == 0 {
                ValueRef::Null
            } else {
                ValueRef::Integer(i)
            };
            batch.columns[0].push(a);
            batch.columns[1].push(ValueRef::Real(i as f64));
            batch.rows += 1;
        }
        let rest = batch.split_off(3);
        assert_eq!((batch.rows, rest.rows), (3, 2));
        assert_eq!(
            rest.columns[0],
            ColumnBuf::Ints {
                values: vec![3, 0],
                nulls: vec![1]
            }
        );
        let rows = batch.into_rows();
        assert_eq!(
            rows,
            [
                vec![Value::Null, Value::Real(0.0)],
                vec![Value::Integer(1), Value::Real(1.0)],
                vec![Value::Null, Value::Real(2.0)],
            ]
        );
        assert_eq!(
            rest.into_rows(),
            [
                vec![Value::Integer(3), Value::Real(3.0)],
                vec![Value::Null, Value::Real(4.0)],
            ]
        );
    }
}
