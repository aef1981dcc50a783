//! The pace figure: a line chart of one or more series over the iterations (x = iteration
//! index, y from 0 to the largest value), as a standalone SVG. Owns only drawing; the values
//! come from the recipe's table and are not recomputed here.

use std::fmt::Write as _;

use nsight_recipe_sdk::{svg::escape, Figure};

const W: f64 = 720.0;
const H: f64 = 360.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 3] = ["#76b900", "#1f77b4", "#d62728"];

/// A line per `(label, values)` in `series`, each value at its index; non-finite values are
/// skipped (the line breaks there). The y axis runs from min(0, lowest) to the highest value.
pub fn line_chart(
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
