//! The summary table of NVIDIA's statistical reports: one row per group with Time (%), Total,
//! count, Avg, Med, Min, Max, StdDev and the group's labels, ordered by Total descending, then
//! by the report's own tie rule ([`Ties`]).
//!
//! Numbers: statistics are computed in nanoseconds; Avg, Med and StdDev are rounded to one
//! decimal (`round_half_away`), Time (%) likewise. With `--timeunit nsec` Total, Min and Max
//! are integers; with another unit every time column is the nanosecond value (after that
//! rounding) divided by 1e3, 1e6 or 1e9, unrounded.

use std::{cmp::Ordering, collections::HashMap};

use crate::{percent, round_half_away, Column, ColumnKind, Stats, Table, TimeUnit, Value};

/// The shape of one summary table.
#[derive(Debug, Clone, Copy)]
pub struct SummarySpec {
    /// The table's name (the CSV file name), e.g. `cuda_api_sum`.
    pub table: &'static str,
    /// Header of the count column: `Instances`, `Num Calls`, `Count`.
    pub count_header: &'static str,
    /// Headers of the label columns, shown after the statistics (e.g. `["Name"]`).
    pub labels: &'static [&'static str],
    /// The order in which labels break ties (indexes into `labels`), e.g. `[1, 0]` to compare
    /// NVTX ranges by name before style.
    pub tie_order: &'static [usize],
    /// How rows of equal Total are ordered.
    pub ties: Ties,
    pub unit: TimeUnit,
}

/// How a summary orders rows of equal Total (each ends with the group id, so the order is
/// total). NVIDIA's queries differ per report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ties {
    /// `ORDER BY total DESC, count, name`: count ascending, then the labels (`cuda_gpu_kern_sum`).
    CountThenLabels,
    /// Count descending, then the labels (`nvtx_sum`; NVIDIA's rule not verified).
    CountDescThenLabels,
    /// `ORDER BY total DESC` over rows grouped by a name id: the id ascending (`cuda_api_sum`,
    /// `osrt_sum`, whose SQL groups by `nameId`).
    Id,
    /// `ORDER BY total DESC` over rows grouped by name: the labels ascending (the memory
    /// summaries).
    Labels,
}

/// The durations of one group and what identifies it.
#[derive(Debug, Clone, Default)]
pub struct Group {
    /// One per label column, in column order.
    pub labels: Vec<String>,
    /// Breaks ties after the labels (e.g. a name id); 0 when unused.
    pub id: i64,
    /// Durations in nanoseconds.
    pub durations: Vec<i64>,
}

/// Groups being filled row by row, keyed by an id (e.g. a name id), each labelled once, when
/// its first row arrives.
#[derive(Debug, Default)]
pub struct GroupsById(HashMap<i64, Group>);

impl GroupsById {
    /// Adds `duration` (ns) to group `id`, creating it with `labels()` the first time.
    pub fn add(&mut self, id: i64, labels: impl FnOnce() -> Vec<String>, duration: i64) {
        self.0
            .entry(id)
            .or_insert_with(|| Group {
                labels: labels(),
                id,
                durations: Vec::new(),
            })
            .durations
            .push(duration);
    }

    /// The groups, in no particular order ([`summary_table`] orders them).
    pub fn into_groups(self) -> Vec<Group> {
        self.0.into_values().collect()
    }
}

/// The columns of a summary table for `spec`.
pub fn summary_columns(spec: &SummarySpec) -> Vec<Column> {
    let u = spec.unit.suffix();
    let (whole, frac) = if spec.unit == TimeUnit::Nsec {
        (ColumnKind::Int, ColumnKind::Real)
    } else {
        (ColumnKind::Real, ColumnKind::Real)
    };
    let time = |name: &str, kind| Column::new(format!("{name} ({u})"), kind, Some(u));
    let mut columns = vec![
        Column::new("Time (%)", ColumnKind::Real, Some("%")),
        time("Total Time", whole),
        Column::new(spec.count_header, ColumnKind::Int, None),
        time("Avg", frac),
        time("Med", frac),
        time("Min", whole),
        time("Max", whole),
        time("StdDev", frac),
    ];
    columns.extend(
        spec.labels
            .iter()
            .map(|l| Column::new(*l, ColumnKind::Text, None)),
    );
    columns
}

/// The statistics of each group with values, in the order of a summary: Total descending,
/// then `ties`, then the group id.
fn ranked(ties: Ties, tie_order: &[usize], groups: Vec<Group>) -> Vec<(Group, Stats)> {
    let mut rows: Vec<(Group, Stats)> = groups
        .into_iter()
        .filter_map(|mut g| Stats::of(&mut g.durations).map(|s| (g, s)))
        .collect();
    rows.sort_by(|(ga, a), (gb, b)| {
        let labels = || compare_labels(tie_order, &ga.labels, &gb.labels);
        let tie = match ties {
            Ties::CountThenLabels => a.count.cmp(&b.count).then_with(labels),
            Ties::CountDescThenLabels => b.count.cmp(&a.count).then_with(labels),
            Ties::Id => Ordering::Equal,
            Ties::Labels => labels(),
        };
        b.total.cmp(&a.total).then(tie).then(ga.id.cmp(&gb.id))
    });
    rows
}

/// Builds the summary table of `groups` (groups without durations are dropped).
pub fn summary_table(spec: &SummarySpec, groups: Vec<Group>) -> Table {
    let rows = ranked(spec.ties, spec.tie_order, groups);
    let grand: i128 = rows.iter().map(|(_, s)| i128::from(s.total)).sum();
    let grand = i64::try_from(grand).unwrap_or(i64::MAX);
    let unit = spec.unit;
    let whole = |ns: i64| match unit {
        TimeUnit::Nsec => Value::Int(ns),
        _ => Value::Real(ns as f64 / unit.nanos()),
    };
    let frac = |ns: f64| Value::Real(round_half_away(ns, 1) / unit.nanos());
    let rows = rows
        .into_iter()
        .map(|(g, s)| {
            let mut row = vec![
                percent(s.total, grand).map_or(Value::Null, Value::Real),
                whole(s.total),
                Value::Int(i64::try_from(s.count).unwrap_or(i64::MAX)),
                frac(s.mean),
                frac(s.median),
                whole(s.min),
                whole(s.max),
                frac(s.stddev),
            ];
            row.extend(g.labels.into_iter().map(Value::Text));
            row
        })
        .collect();
    Table {
        name: spec.table.to_owned(),
        columns: summary_columns(spec),
        rows,
    }
}

/// The shape of a summary by size (`cuda_gpu_mem_size_sum`): no Time (%), sizes in MB.
#[derive(Debug, Clone, Copy)]
pub struct SizeSummarySpec {
    /// The table's name (the CSV file name).
    pub table: &'static str,
    /// Header of the count column, e.g. `Count`.
    pub count_header: &'static str,
    /// Headers of the label columns, shown after the statistics (e.g. `["Operation"]`).
    pub labels: &'static [&'static str],
    /// The order in which labels break ties (indexes into `labels`).
    pub tie_order: &'static [usize],
    pub ties: Ties,
}

/// Bytes in one MB (`1e6`, as NVIDIA's size summaries count).
pub const BYTES_PER_MB: f64 = 1e6;

/// The columns of a summary by size: `Total (MB)`, the count, `Avg`, `Med`, `Min`, `Max`,
/// `StdDev` (each `(MB)`), then the labels.
pub fn size_summary_columns(spec: &SizeSummarySpec) -> Vec<Column> {
    let mb = |name: &str| Column::new(format!("{name} (MB)"), ColumnKind::Real, Some("MB"));
    let mut columns = vec![
        mb("Total"),
        Column::new(spec.count_header, ColumnKind::Int, None),
        mb("Avg"),
        mb("Med"),
        mb("Min"),
        mb("Max"),
        mb("StdDev"),
    ];
    columns.extend(
        spec.labels
            .iter()
            .map(|l| Column::new(*l, ColumnKind::Text, None)),
    );
    columns
}

/// Builds the summary by size of `groups`, whose `durations` hold sizes in bytes. The same
/// statistics and order as [`summary_table`]; every size column is the unrounded statistic in
/// bytes divided by 1e6 (MB) and rounded to three decimals, as `nsys stats` prints them.
pub fn size_summary_table(spec: &SizeSummarySpec, groups: Vec<Group>) -> Table {
    let mb = |bytes: f64| Value::Real(round_half_away(bytes / BYTES_PER_MB, 3));
    let rows = ranked(spec.ties, spec.tie_order, groups)
        .into_iter()
        .map(|(g, s)| {
            let mut row = vec![
                mb(s.total as f64),
                Value::Int(i64::try_from(s.count).unwrap_or(i64::MAX)),
                mb(s.mean),
                mb(s.median),
                mb(s.min as f64),
                mb(s.max as f64),
                mb(s.stddev),
            ];
            row.extend(g.labels.into_iter().map(Value::Text));
            row
        })
        .collect();
    Table {
        name: spec.table.to_owned(),
        columns: size_summary_columns(spec),
        rows,
    }
}

fn compare_labels(order: &[usize], a: &[String], b: &[String]) -> Ordering {
    order
        .iter()
        .map(|&i| a.get(i).cmp(&b.get(i)))
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: SummarySpec = SummarySpec {
        table: "t",
        count_header: "Instances",
        labels: &["Style", "Range"],
        tie_order: &[1, 0],
        ties: Ties::CountDescThenLabels,
        unit: TimeUnit::Nsec,
    };

    fn group(style: &str, range: &str, d: &[i64]) -> Group {
        Group {
            labels: vec![style.into(), range.into()],
            id: 0,
            durations: d.to_vec(),
        }
    }

    #[test]
    fn groups_by_id_label_once_and_keep_every_duration() {
        let mut groups = GroupsById::default();
        let mut labelled = 0;
        for (id, d) in [(7, 5), (3, 1), (7, 6)] {
            groups.add(
                id,
                || {
                    labelled += 1;
                    vec![format!("n{id}")]
                },
                d,
            );
        }
        let mut groups = groups.into_groups();
        groups.sort_by_key(|g| g.id);
        assert_eq!(labelled, 2);
        assert_eq!(groups[0].labels, ["n3"]);
        assert_eq!(groups[1].durations, [5, 6]);
        assert_eq!(groups[1].id, 7);
    }

    #[test]
    fn columns_follow_nvidias_headers() {
        let names: Vec<String> = summary_columns(&SPEC).into_iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "Time (%)",
                "Total Time (ns)",
                "Instances",
                "Avg (ns)",
                "Med (ns)",
                "Min (ns)",
                "Max (ns)",
                "StdDev (ns)",
                "Style",
                "Range"
            ]
        );
    }

    #[test]
    fn rows_are_ordered_by_total_then_count_then_name() {
        let t = summary_table(
            &SPEC,
            vec![
                group("PushPop", ":b", &[5, 5]),
                group("PushPop", ":a", &[10]),
                group("StartEnd", ":a", &[10]),
                group("PushPop", ":c", &[30]),
                group("PushPop", ":empty", &[]),
            ],
        );
        let order: Vec<(&Value, &Value)> = t.rows.iter().map(|r| (&r[8], &r[9])).collect();
        let text = |s: &str| Value::Text(s.into());
        assert_eq!(
            order,
            [
                (&text("PushPop"), &text(":c")),
                (&text("PushPop"), &text(":b")),
                (&text("PushPop"), &text(":a")),
                (&text("StartEnd"), &text(":a")),
            ]
        );
        assert_eq!(
            t.rows[0][..8],
            [
                Value::Real(50.0),
                Value::Int(30),
                Value::Int(1),
                Value::Real(30.0),
                Value::Real(30.0),
                Value::Int(30),
                Value::Int(30),
                Value::Real(0.0)
            ]
        );
        assert_eq!(t.rows[1][0], Value::Real(16.7));
    }

    #[test]
    fn other_time_units_divide_the_rounded_nanoseconds() {
        let spec = SummarySpec {
            unit: TimeUnit::Usec,
            ..SPEC
        };
        let t = summary_table(&spec, vec![group("PushPop", ":a", &[1000, 1001, 2500, 7])]);
        assert_eq!(t.columns[1].name, "Total Time (us)");
        assert_eq!(t.columns[1].kind, ColumnKind::Real);
        assert_eq!(t.columns[1].unit.as_deref(), Some("us"));
        let r = &t.rows[0];
        assert_eq!(r[1], Value::Real(4508.0 / 1e3));
        assert_eq!(r[3], Value::Real(1127.0 / 1e3));
        assert_eq!(r[4], Value::Real(1000.5 / 1e3));
        assert_eq!(r[5], Value::Real(0.007));
    }

    #[test]
    fn each_tie_rule_orders_equal_totals_its_own_way() {
        let g = |name: &str, id: i64, d: &[i64]| Group {
            labels: vec![name.into()],
            id,
            durations: d.to_vec(),
        };
        let order = |ties: Ties| -> Vec<String> {
            let spec = SummarySpec {
                labels: &["Name"],
                tie_order: &[0],
                ties,
                ..SPEC
            };
            let groups = vec![
                g("b", 1, &[5, 5]),
                g("c", 2, &[10]),
                g("a", 3, &[10]),
                g("z", 0, &[30]),
            ];
            summary_table(&spec, groups)
                .rows
                .iter()
                .map(|r| format!("{:?}", r[8]))
                .collect()
        };
        let names = |n: [&str; 4]| -> Vec<String> {
            n.iter()
                .map(|s| format!("{:?}", Value::Text((*s).into())))
                .collect()
        };
        assert_eq!(order(Ties::CountThenLabels), names(["z", "a", "c", "b"]));
        assert_eq!(
            order(Ties::CountDescThenLabels),
            names(["z", "b", "a", "c"])
        );
        assert_eq!(order(Ties::Id), names(["z", "b", "c", "a"]));
        assert_eq!(order(Ties::Labels), names(["z", "a", "b", "c"]));
    }

    #[test]
    fn sizes_are_mb_rounded_to_three_decimals() {
        let spec = SizeSummarySpec {
            table: "s",
            count_header: "Count",
            labels: &["Operation"],
            tie_order: &[0],
            ties: Ties::Labels,
        };
        let g = |name: &str, d: &[i64]| Group {
            labels: vec![name.into()],
            id: 0,
            durations: d.to_vec(),
        };
        let t = size_summary_table(
            &spec,
            vec![
                g("b", &[1_000_000, 2_000_500]),
                g("a", &[3_000_500]),
                g("c", &[8_000_000]),
            ],
        );
        let names: Vec<&str> = t.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "Total (MB)",
                "Count",
                "Avg (MB)",
                "Med (MB)",
                "Min (MB)",
                "Max (MB)",
                "StdDev (MB)",
                "Operation"
            ]
        );
        let labels: Vec<&Value> = t.rows.iter().map(|r| &r[7]).collect();
        let text = |s: &str| Value::Text(s.into());
        // 8 MB first; then 3.0005 MB twice: by name.
        assert_eq!(labels, [&text("c"), &text("a"), &text("b")]);
        let b = &t.rows[2];
        assert_eq!(b[0], Value::Real(3.001));
        assert_eq!(b[1], Value::Int(2));
        // Mean 1,500,250 bytes: 1.50025 MB -> 1.5.
        assert_eq!(b[2], Value::Real(1.5));
        assert_eq!(b[4], Value::Real(1.0));
        assert_eq!(b[5], Value::Real(2.001));
        // StdDev 707,460.6... bytes.
        assert_eq!(b[6], Value::Real(0.707));
    }

    #[test]
    fn all_zero_durations_have_no_percentage() {
        let t = summary_table(&SPEC, vec![group("PushPop", ":z", &[0, 0])]);
        assert_eq!(t.rows[0][0], Value::Null);
    }
}
