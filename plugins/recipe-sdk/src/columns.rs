//! Query results in columnar form (`column-values` in wit/recipe.wit): what
//! [`Report::query_columns`](crate::Report::query_columns) hands a recipe, batch by batch, so
//! that a scan of millions of rows moves whole `Vec<i64>`s instead of one value at a time. Also
//! [`FastMap`], a hash map with a cheap hash for integer keys (group-by on name ids).

use std::{
    collections::HashMap,
    hash::{BuildHasherDefault, Hasher},
};

use crate::Value;

/// One column of a batch. Invariant: for `Ints` and `Reals`, `nulls` (the null rows) is
/// ascending and `values` has one entry per row (0 at the null rows).
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnValues {
    Ints { values: Vec<i64>, nulls: Vec<u32> },
    Reals { values: Vec<f64>, nulls: Vec<u32> },
    Values(Vec<Value>),
}

impl ColumnValues {
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

    /// Each row's integer, `None` for a null or a value of another kind.
    pub fn ints(&self) -> Box<dyn Iterator<Item = Option<i64>> + '_> {
        match self {
            Self::Ints { values, nulls } => {
                let mut nulls = nulls.iter().peekable();
                Box::new((0u32..).zip(values).map(move |(row, &v)| {
                    if nulls.next_if(|&&n| n == row).is_some() {
                        None
                    } else {
                        Some(v)
                    }
                }))
            }
            Self::Reals { values, .. } => Box::new(values.iter().map(|_| None)),
            Self::Values(v) => Box::new(v.iter().map(Value::as_int)),
        }
    }

    /// The integers when every row holds one (no nulls, no other kinds): the fast path.
    pub fn all_ints(&self) -> Option<&[i64]> {
        match self {
            Self::Ints { values, nulls } if nulls.is_empty() => Some(values),
            _ => None,
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
            Self::Ints { values, nulls } => with_nulls(values, &nulls, Value::Int),
            Self::Reals { values, nulls } => with_nulls(values, &nulls, Value::Real),
            Self::Values(v) => v,
        }
    }

    /// A `Values` column of `values` (what a [`Report`](crate::Report) without a columnar
    /// path gives).
    pub fn from_values(values: Vec<Value>) -> Self {
        Self::Values(values)
    }
}

/// Calls `row` once per row of `columns` (one value per column), in order.
pub fn for_each_row(
    columns: Vec<ColumnValues>,
    row: &mut dyn FnMut(&[Value]) -> Result<(), String>,
) -> Result<(), String> {
    let rows = columns.first().map_or(0, ColumnValues::len);
    let mut columns: Vec<_> = columns
        .into_iter()
        .map(|c| c.into_values().into_iter())
        .collect();
    let mut values = Vec::with_capacity(columns.len());
    for _ in 0..rows {
        values.clear();
        values.extend(columns.iter_mut().map(|c| c.next().unwrap_or(Value::Null)));
        row(&values)?;
    }
    Ok(())
}

/// A multiplicative hash (as rustc's FxHash) for small integer keys: much cheaper than the
/// default SipHash in a per-row group-by. Not for keys an attacker chooses.
#[derive(Debug, Default, Clone, Copy)]
pub struct FastHasher(u64);

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_i64(&mut self, i: i64) {
        self.write_u64(i as u64);
    }

    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }

    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }

    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

/// A `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_skip_the_null_rows() {
        let c = ColumnValues::Ints {
            values: vec![4, 0, 6, 0],
            nulls: vec![1, 3],
        };
        assert_eq!(c.ints().collect::<Vec<_>>(), [Some(4), None, Some(6), None]);
        assert_eq!(c.all_ints(), None);
        assert_eq!(
            c.into_values(),
            [Value::Int(4), Value::Null, Value::Int(6), Value::Null]
        );
        let v = ColumnValues::Values(vec![Value::Int(1), Value::Text("a".into())]);
        assert_eq!(v.ints().collect::<Vec<_>>(), [Some(1), None]);
    }

    #[test]
    fn rows_come_back_in_order() {
        let columns = vec![
            ColumnValues::Ints {
                values: vec![1, 2],
                nulls: vec![],
            },
            ColumnValues::Values(vec![Value::Text("a".into()), Value::Null]),
        ];
        let mut seen = Vec::new();
        for_each_row(columns, &mut |r| {
            seen.push(r.to_vec());
            Ok(())
        })
        .unwrap();
        assert_eq!(
            seen,
            [
                vec![Value::Int(1), Value::Text("a".into())],
                vec![Value::Int(2), Value::Null]
            ]
        );
    }

    #[test]
    fn fast_map_groups_integer_keys() {
        let mut m: FastMap<(Option<i64>, i64), u32> = FastMap::default();
        for k in [(Some(1), 2), (None, 2), (Some(1), 2)] {
            *m.entry(k).or_default() += 1;
        }
        assert_eq!(m[&(Some(1), 2)], 2);
        assert_eq!(m[&(None, 2)], 1);
    }
}
