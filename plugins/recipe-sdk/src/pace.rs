//! Pacing: the instances of one thing (a kernel, an NVTX range) taken as the iterations of
//! the application, for `cuda_gpu_kern_pace` and `nvtx_pace`. Owns the two tables (the
//! iterations with durations and gaps; their statistics) and the line chart; the recipes
//! choose and read the instances.
//!
//! ```text
//!  instances (by start, end, rowid) ─> durations, gaps ─> iterations table
//!                                                     ├─> stats table (Stats, one decimal)
//!                                                     └─> line chart (SVG)
//! ```

use std::fmt::Write as _;

use crate::{
    round_half_away, svg::escape, time_value, Column, ColumnKind, Figure, Output, Stats, Table,
    TimeUnit, Value,
};

/// One instance, in the order the recipe read them (start, end, rowid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instance {
    pub start: i64,
    pub end: i64,
    pub pid: Option<i64>,
    /// The device (kernels) or thread id (NVTX ranges) column's value.
    pub place: Option<i64>,
    /// The stream (kernels) or nothing.
    pub lane: Option<i64>,
}

/// The columns after the times: their headers, e.g. `["PID", "Device", "Stream"]`.
pub type PlaceColumns = [&'static str; 3];

/// Adds the iterations table `name`, the statistics table `<name>_stats` and, for two or more
/// instances, a line chart titled after `what` to `out`.
pub fn pace_output(
    out: &mut Output,
    name: &str,
    what: &str,
    unit: TimeUnit,
    instances: &[Instance],
    places: PlaceColumns,
) {
    let (durations, gaps) = pace(instances);
    out.tables.push(iterations_table(
        name, unit, instances, &durations, &gaps, places,
    ));
    let mut d: Vec<i64> = durations.clone();
    let mut g: Vec<i64> = gaps.iter().flatten().copied().collect();
    out.tables.push(stats_table(
        name,
        unit,
        &[("Duration", Stats::of(&mut d)), ("Gap", Stats::of(&mut g))],
    ));
    if instances.len() > 1 {
        let scale = |v: i64| v as f64 / unit.nanos();
        out.figures.push(line_chart(
            name,
            &format!("Pace of {} ({} iterations)", shorten(what), instances.len()),
            "iteration",
            &format!("time ({})", unit.suffix()),
            &[
                ("duration", durations.iter().map(|&v| scale(v)).collect()),
                (
                    "gap since previous end",
                    gaps.iter().map(|g| g.map_or(f64::NAN, scale)).collect(),
                ),
            ],
        ));
    }
}

/// `name` cut to 60 characters (with an ellipsis) for the chart's title; template kernel
/// names run to hundreds.
fn shorten(name: &str) -> String {
    const MAX: usize = 60;
    if name.chars().count() <= MAX {
        name.to_owned()
    } else {
        let mut short: String = name.chars().take(MAX - 1).collect();
        short.push('\u{2026}');
        short
    }
}

/// Each instance's duration, and its gap since the previous instance ended (none for the
/// first; negative when the two overlap, on different streams).
fn pace(instances: &[Instance]) -> (Vec<i64>, Vec<Option<i64>>) {
    let durations = instances.iter().map(|i| i.end - i.start).collect();
    let gaps = instances
        .iter()
        .enumerate()
        .map(|(n, i)| {
            n.checked_sub(1)
                .and_then(|p| instances.get(p))
                .map(|prev| i.start - prev.end)
        })
        .collect();
    (durations, gaps)
}

fn time_kind(unit: TimeUnit) -> ColumnKind {
    if unit == TimeUnit::Nsec {
        ColumnKind::Int
    } else {
        ColumnKind::Real
    }
}

fn iterations_table(
    name: &str,
    unit: TimeUnit,
    instances: &[Instance],
    durations: &[i64],
    gaps: &[Option<i64>],
    places: PlaceColumns,
) -> Table {
    let u = unit.suffix();
    let kind = time_kind(unit);
    let opt = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
    let mut accum = 0i64;
    let rows = instances
        .iter()
        .zip(durations)
        .zip(gaps)
        .enumerate()
        .map(|(n, ((i, &d), &g))| {
            accum = accum.saturating_add(g.unwrap_or(0));
            vec![
                Value::Int(i64::try_from(n).unwrap_or(i64::MAX)),
                time_value(unit, i.start),
                time_value(unit, i.end),
                time_value(unit, d),
                g.map_or(Value::Null, |g| time_value(unit, g)),
                time_value(unit, accum),
                opt(i.pid),
                opt(i.place),
                opt(i.lane),
            ]
        })
        .collect();
    let time = |name: &str| Column::new(format!("{name} ({u})"), kind, Some(u));
    Table {
        name: name.into(),
        columns: vec![
            Column::new("Iteration", ColumnKind::Int, None),
            time("Start"),
            time("End"),
            time("Duration"),
            time("Gap"),
            time("Gap Accum"),
            Column::new(places[0], ColumnKind::Int, None),
            Column::new(places[1], ColumnKind::Int, None),
            Column::new(places[2], ColumnKind::Int, None),
        ],
        rows,
    }
}

/// Count, Avg, Med, Min, Max, StdDev of durations and gaps, rounded as the summaries (one
/// decimal in ns, then divided for another unit).
fn stats_table(name: &str, unit: TimeUnit, stats: &[(&str, Option<Stats>)]) -> Table {
    let u = unit.suffix();
    let kind = time_kind(unit);
    let real = |x: f64| Value::Real(round_half_away(x, 1) / unit.nanos());
    let rows = stats
        .iter()
        .filter_map(|(what, s)| s.map(|s| (what, s)))
        .map(|(what, s)| {
            vec![
                Value::Text((*what).to_owned()),
                Value::Int(i64::try_from(s.count).unwrap_or(i64::MAX)),
                real(s.mean),
                real(s.median),
                time_value(unit, s.min),
                time_value(unit, s.max),
                real(s.stddev),
            ]
        })
        .collect();
    let time = |name: &str, kind| Column::new(format!("{name} ({u})"), kind, Some(u));
    Table {
        name: format!("{name}_stats"),
        columns: vec![
            Column::new("Measure", ColumnKind::Text, None),
            Column::new("Count", ColumnKind::Int, None),
            time("Avg", ColumnKind::Real),
            time("Med", ColumnKind::Real),
            time("Min", kind),
            time("Max", kind),
            time("StdDev", ColumnKind::Real),
        ],
        rows,
    }
}

const W: f64 = 720.0;
const H: f64 = 360.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 3] = ["#76b900", "#1f77b4", "#d62728"];

/// A line per `(label, values)` in `series`, each value at its index; non-finite values are
/// skipped (the line breaks there). The y axis runs from min(0, lowest) to the highest value.
fn line_chart(
    name: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(&str, Vec<f64>)],
) -> Figure {
    let finite = || {
        series
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .filter(|v| v.is_finite())
    };
    let hi = finite().fold(0.0f64, f64::max);
    let lo = finite().fold(0.0f64, f64::min);
    let n = series.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let x = |i: usize| {
        LEFT + if n > 1 {
            i as f64 * pw / (n - 1) as f64
        } else {
            pw / 2.0
        }
    };
    let span = if hi > lo { hi - lo } else { 1.0 };
    let y = |v: f64| TOP + ph - (v - lo) / span * ph;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"12\">\
         <rect width=\"{W}\" height=\"{H}\" fill=\"white\"/>\
         <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>",
        W / 2.0,
        escape(title)
    );
    for (k, (label, values)) in series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let mut path = String::new();
        let mut pen_down = false;
        for (i, v) in values.iter().enumerate() {
            if !v.is_finite() {
                pen_down = false;
                continue;
            }
            let cmd = if pen_down { 'L' } else { 'M' };
            let _ = write!(path, "{cmd}{:.2} {:.2} ", x(i), y(*v));
            pen_down = true;
        }
        let _ = write!(
            svg,
            "<path d=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\"><title>{}</title></path>\
             <text x=\"{}\" y=\"{}\" fill=\"{color}\">{}</text>",
            path.trim_end(),
            escape(label),
            LEFT + 8.0 + 160.0 * k as f64,
            TOP - 4.0,
            escape(label)
        );
    }
    let axis_y = TOP + ph;
    let _ = write!(
        svg,
        "<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{axis_y}\" stroke=\"black\"/>\
         <line x1=\"{LEFT}\" y1=\"{axis_y}\" x2=\"{}\" y2=\"{axis_y}\" stroke=\"black\"/>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{hi}</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{lo}</text>\
         <text x=\"{LEFT}\" y=\"{}\">0</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\
         <text x=\"16\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {})\">{}</text>",
        W - RIGHT,
        LEFT - 6.0,
        TOP + 4.0,
        LEFT - 6.0,
        axis_y,
        axis_y + 16.0,
        W - RIGHT,
        axis_y + 16.0,
        n.saturating_sub(1),
        LEFT + pw / 2.0,
        H - 12.0,
        escape(x_label),
        TOP + ph / 2.0,
        TOP + ph / 2.0,
        escape(y_label)
    );
    svg.push_str("</svg>");
    Figure {
        name: name.to_owned(),
        svg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: i64, end: i64) -> Instance {
        Instance {
            start,
            end,
            pid: Some(1),
            place: Some(0),
            lane: None,
        }
    }

    #[test]
    fn gaps_run_from_the_previous_end_and_may_be_negative() {
        let mut out = Output::default();
        let inst = [at(0, 10), at(15, 20), at(18, 30)];
        pace_output(
            &mut out,
            "p",
            "k",
            TimeUnit::Nsec,
            &inst,
            ["PID", "Device", "Stream"],
        );
        let rows = &out.tables[0].rows;
        assert_eq!(rows[0][4], Value::Null);
        assert_eq!(rows[1][4], Value::Int(5));
        assert_eq!(rows[2][4], Value::Int(-2));
        assert_eq!(rows[2][5], Value::Int(3));
        assert_eq!(out.tables[1].rows.len(), 2);
        assert_eq!(out.figures.len(), 1);
        assert!(out.figures[0].svg.ends_with("</svg>"));
        let mut one = Output::default();
        pace_output(
            &mut one,
            "p",
            "k",
            TimeUnit::Nsec,
            &inst[..1],
            ["PID", "Device", "Stream"],
        );
        assert_eq!(
            one.tables[1].rows.len(),
            1,
            "no gap statistics for one instance"
        );
        assert!(one.figures.is_empty());
    }

    #[test]
    fn long_names_are_cut_in_the_title() {
        assert_eq!(shorten("abc"), "abc");
        assert_eq!(shorten(&"x".repeat(100)).chars().count(), 60);
    }
}
