//! The reduce step, pure: two reports' kernel summaries (from `kernels`) joined by kernel name,
//! each statistic of report A, of report B and the change B − A.
//!
//! ```text
//!  partial A (cuda_gpu_kern_sum, ns) ─┐
//!                                     ├─ full join on Name ─> diff table, by |Total Δ| desc
//!  partial B (cuda_gpu_kern_sum, ns) ─┘
//! ```
//! Rules (docs/recipes.md): Avg, Med and StdDev are the one-decimal values of each side, and
//! their change is the difference of those (exact in tenths); Total, Instances, Min and Max
//! changes are exact integers; `Total Time Δ (%)` = round((B − A) × 100 / A, 1), NULL when A
//! is 0. A kernel only in one report has NULL for the other side and every change, and `In`
//! says which side has it. Rows by the absolute change of Total Time descending (a missing side
//! counts as 0), then Name ascending (byte order).

use std::collections::BTreeMap;

use nsight_recipe_sdk::{percent, Column, ColumnKind, Output, Table, TimeUnit, Value};

use crate::kernels::PARTIAL;

/// The statistics of one kernel name in one report, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelStats {
    pub total: i64,
    pub count: i64,
    pub avg: f64,
    pub med: f64,
    pub min: i64,
    pub max: i64,
    pub stddev: f64,
}

/// Reads a partial summary table into statistics by name.
pub fn read_partial(label: &str, out: &Output) -> Result<BTreeMap<String, KernelStats>, String> {
    let bad = |what: String| format!("the partial result of {label} is malformed: {what}");
    let table = out
        .tables
        .iter()
        .find(|t| t.name == PARTIAL)
        .ok_or_else(|| bad(format!("no table {PARTIAL}")))?;
    let mut by_name = BTreeMap::new();
    for (i, row) in table.rows.iter().enumerate() {
        let stats = match row.as_slice() {
            [_, Value::Int(total), Value::Int(count), Value::Real(avg), Value::Real(med), Value::Int(min), Value::Int(max), Value::Real(stddev), Value::Text(name)] => {
                (
                    name.clone(),
                    KernelStats {
                        total: *total,
                        count: *count,
                        avg: *avg,
                        med: *med,
                        min: *min,
                        max: *max,
                        stddev: *stddev,
                    },
                )
            }
            _ => {
                return Err(bad(format!(
                    "row {i} is not a nanosecond kernel summary row"
                )))
            }
        };
        if by_name.insert(stats.0.clone(), stats.1).is_some() {
            return Err(bad(format!("kernel {:?} appears twice", stats.0)));
        }
    }
    Ok(by_name)
}

/// The columns of the diff table in `unit`.
pub fn diff_columns(unit: TimeUnit) -> Vec<Column> {
    let u = unit.suffix();
    let whole = if unit == TimeUnit::Nsec {
        ColumnKind::Int
    } else {
        ColumnKind::Real
    };
    let mut columns = Vec::new();
    triple(&mut columns, "Total Time", whole, Some(u));
    columns.push(Column::new("Total Time Δ (%)", ColumnKind::Real, Some("%")));
    triple(&mut columns, "Instances", ColumnKind::Int, None);
    triple(&mut columns, "Avg", ColumnKind::Real, Some(u));
    triple(&mut columns, "Med", ColumnKind::Real, Some(u));
    triple(&mut columns, "Min", whole, Some(u));
    triple(&mut columns, "Max", whole, Some(u));
    triple(&mut columns, "StdDev", ColumnKind::Real, Some(u));
    columns.push(Column::new("In", ColumnKind::Text, None));
    columns.push(Column::new("Name", ColumnKind::Text, None));
    columns
}

/// `<name> A (<u>)`, `<name> B (<u>)`, `<name> Δ (<u>)`.
fn triple(columns: &mut Vec<Column>, name: &str, kind: ColumnKind, unit: Option<&str>) {
    for side in ["A", "B", "Δ"] {
        let header = match unit {
            Some(u) => format!("{name} {side} ({u})"),
            None => format!("{name} {side}"),
        };
        columns.push(Column::new(header, kind, unit));
    }
}

/// Tenths of a one-decimal value (exact for the values the summary rounded).
fn tenths(x: f64) -> i64 {
    (x * 10.0).round() as i64
}

/// The diff table of two summaries.
pub fn diff_table(
    a: &BTreeMap<String, KernelStats>,
    b: &BTreeMap<String, KernelStats>,
    unit: TimeUnit,
) -> Table {
    let whole = |ns: Option<i64>| match (ns, unit) {
        (None, _) => Value::Null,
        (Some(ns), TimeUnit::Nsec) => Value::Int(ns),
        (Some(ns), _) => Value::Real(ns as f64 / unit.nanos()),
    };
    let frac = |tenths: Option<i64>| {
        tenths.map_or(Value::Null, |t| Value::Real(t as f64 / 10.0 / unit.nanos()))
    };
    let int = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
    let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut rows: Vec<(i128, &String, Vec<Value>)> = names
        .into_iter()
        .map(|name| {
            let (sa, sb) = (a.get(name), b.get(name));
            let both = sa.is_some() && sb.is_some();
            let get = |s: Option<&KernelStats>, f: fn(&KernelStats) -> i64| s.map(f);
            let delta = |x: Option<i64>, y: Option<i64>| match (x, y) {
                (Some(x), Some(y)) => Some(y.saturating_sub(x)),
                _ => None,
            };
            let mut row = Vec::with_capacity(24);
            let (ta, tb) = (get(sa, |s| s.total), get(sb, |s| s.total));
            row.extend([whole(ta), whole(tb), whole(delta(ta, tb))]);
            row.push(match (ta, tb) {
                (Some(x), Some(y)) => {
                    percent(y.saturating_sub(x), x).map_or(Value::Null, Value::Real)
                }
                _ => Value::Null,
            });
            let (ca, cb) = (get(sa, |s| s.count), get(sb, |s| s.count));
            row.extend([int(ca), int(cb), int(delta(ca, cb))]);
            for f in [
                (|s: &KernelStats| tenths(s.avg)) as fn(&KernelStats) -> i64,
                |s| tenths(s.med),
            ] {
                let (x, y) = (get(sa, f), get(sb, f));
                row.extend([frac(x), frac(y), frac(delta(x, y))]);
            }
            for f in [(|s: &KernelStats| s.min) as fn(&KernelStats) -> i64, |s| {
                s.max
            }] {
                let (x, y) = (get(sa, f), get(sb, f));
                row.extend([whole(x), whole(y), whole(delta(x, y))]);
            }
            let (x, y) = (get(sa, |s| tenths(s.stddev)), get(sb, |s| tenths(s.stddev)));
            row.extend([frac(x), frac(y), frac(delta(x, y))]);
            let side = match (both, sa.is_some()) {
                (true, _) => "both",
                (false, true) => "A only",
                (false, false) => "B only",
            };
            row.push(Value::Text(side.into()));
            row.push(Value::Text(name.clone()));
            let change = i128::from(tb.unwrap_or(0)) - i128::from(ta.unwrap_or(0));
            (change.abs(), name, row)
        })
        .collect();
    rows.sort_by(|(ca, na, _), (cb, nb, _)| cb.cmp(ca).then_with(|| na.cmp(nb)));
    Table {
        name: "diff".into(),
        columns: diff_columns(unit),
        rows: rows.into_iter().map(|(_, _, r)| r).collect(),
    }
}
