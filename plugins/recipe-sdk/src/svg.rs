//! SVG figures a recipe returns (embedded by the host in the notebook and HTML page): a bar
//! chart with a title, axis labels and the largest value on the y axis, and a heat map (rows
//! of cells shaded from white to green by value). Text is XML-escaped.

use std::fmt::Write as _;

use crate::Figure;

const W: f64 = 720.0;
const H: f64 = 360.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;

/// `&`, `<`, `>`, `"` and `'` as XML entities.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// A bar chart of `bars` (label shown on hover, height) named `name`; the first and last
/// labels are written under the x axis.
pub fn bar_chart(
    name: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    bars: &[(String, f64)],
) -> Figure {
    let top = bars
        .iter()
        .map(|(_, v)| *v)
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let slot = pw / bars.len().max(1) as f64;
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
    for (i, (label, v)) in bars.iter().enumerate() {
        let h = if top > 0.0 && v.is_finite() {
            v / top * ph
        } else {
            0.0
        };
        let _ = write!(
            svg,
            "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{h:.2}\" \
             fill=\"#76b900\"><title>{}: {v}</title></rect>",
            LEFT + i as f64 * slot + slot * 0.05,
            TOP + ph - h,
            slot * 0.9,
            escape(label)
        );
    }
    let axis_y = TOP + ph;
    let _ = write!(
        svg,
        "<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{axis_y}\" stroke=\"black\"/>\
         <line x1=\"{LEFT}\" y1=\"{axis_y}\" x2=\"{}\" y2=\"{axis_y}\" stroke=\"black\"/>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{top}</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\">0</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\
         <text x=\"16\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {})\">{}</text>",
        W - RIGHT,
        LEFT - 6.0,
        TOP + 4.0,
        LEFT - 6.0,
        axis_y,
        LEFT + pw / 2.0,
        H - 12.0,
        escape(x_label),
        TOP + ph / 2.0,
        TOP + ph / 2.0,
        escape(y_label)
    );
    if let (Some((first, _)), Some((last, _))) = (bars.first(), bars.last()) {
        let _ = write!(
            svg,
            "<text x=\"{LEFT}\" y=\"{}\">{}</text>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            axis_y + 16.0,
            escape(first),
            W - RIGHT,
            axis_y + 16.0,
            escape(last)
        );
    }
    svg.push_str("</svg>");
    Figure {
        name: name.to_owned(),
        svg,
    }
}

/// Width of the row labels of a heat map.
const HEAT_LEFT: f64 = 150.0;
/// Height of one heat map row.
const HEAT_ROW: f64 = 22.0;

/// A heat map named `name`: one row of cells per `(label, values)`, each cell shaded from
/// white (0) to green (`max`, or above), its value shown on hover. The x axis is
/// `x_label`, with `first` and `last` written under its ends.
pub fn heat_map(
    name: &str,
    title: &str,
    x_label: (&str, &str, &str),
    rows: &[(String, Vec<f64>)],
    max: f64,
) -> Figure {
    let (x_label, first, last) = x_label;
    let columns = rows.iter().map(|(_, v)| v.len()).max().unwrap_or(0).max(1);
    let pw = W - HEAT_LEFT - RIGHT;
    let cell = pw / columns as f64;
    let h = TOP + rows.len() as f64 * HEAT_ROW + BOTTOM;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{h}\" \
         viewBox=\"0 0 {W} {h}\" font-family=\"sans-serif\" font-size=\"12\">\
         <rect width=\"{W}\" height=\"{h}\" fill=\"white\"/>\
         <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>",
        W / 2.0,
        escape(title)
    );
    for (r, (label, values)) in rows.iter().enumerate() {
        let y = TOP + r as f64 * HEAT_ROW;
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{:.2}\" text-anchor=\"end\">{}</text>",
            HEAT_LEFT - 6.0,
            y + HEAT_ROW * 0.7,
            escape(label)
        );
        for (c, v) in values.iter().enumerate() {
            let t = if max > 0.0 && v.is_finite() {
                (v / max).clamp(0.0, 1.0)
            } else {
                0.0
            };
            // White (255, 255, 255) to NVIDIA green (118, 185, 0).
            let mix = |to: f64| (255.0 + (to - 255.0) * t).round() as u8;
            let _ = write!(
                svg,
                "<rect x=\"{:.2}\" y=\"{y:.2}\" width=\"{cell:.2}\" height=\"{HEAT_ROW}\" \
                 fill=\"#{:02x}{:02x}{:02x}\" stroke=\"#eeeeee\" stroke-width=\"0.5\">\
                 <title>{}, bin {c}: {v}</title></rect>",
                HEAT_LEFT + c as f64 * cell,
                mix(118.0),
                mix(185.0),
                mix(0.0),
                escape(label)
            );
        }
    }
    let axis_y = TOP + rows.len() as f64 * HEAT_ROW;
    let _ = write!(
        svg,
        "<line x1=\"{HEAT_LEFT}\" y1=\"{axis_y}\" x2=\"{}\" y2=\"{axis_y}\" stroke=\"black\"/>\
         <text x=\"{HEAT_LEFT}\" y=\"{}\">{}</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\">white 0, green {max} or more</text>",
        W - RIGHT,
        axis_y + 16.0,
        escape(first),
        W - RIGHT,
        axis_y + 16.0,
        escape(last),
        HEAT_LEFT + pw / 2.0,
        axis_y + 34.0,
        escape(x_label),
        W - RIGHT,
        h - 8.0,
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

    #[test]
    fn heat_map_shades_cells_by_value() {
        let rows = [
            ("a <1>".to_owned(), vec![0.0, 50.0, 100.0]),
            ("b".to_owned(), vec![200.0]),
        ];
        let f = heat_map("m", "t", ("time", "0", "9"), &rows, 100.0);
        assert!(f.svg.starts_with("<svg ") && f.svg.ends_with("</svg>"));
        assert!(f.svg.contains("a &lt;1&gt;"));
        assert_eq!(f.svg.matches("<title>").count(), 4);
        assert_eq!(f.svg.matches("fill=\"#ffffff\"").count(), 1);
        assert_eq!(f.svg.matches("fill=\"#76b900\"").count(), 2);
        assert!(heat_map("e", "t", ("x", "", ""), &[], 100.0)
            .svg
            .ends_with("</svg>"));
    }

    #[test]
    fn bars_scale_to_the_largest_and_text_is_escaped() {
        let f = bar_chart(
            "h",
            "a <b> & c",
            "x",
            "y",
            &[("0".into(), 2.0), ("1".into(), 4.0)],
        );
        assert!(f.svg.starts_with("<svg ") && f.svg.ends_with("</svg>"));
        assert!(f.svg.contains("a &lt;b&gt; &amp; c"));
        assert_eq!(f.svg.matches("<rect x=").count(), 2);
        assert!(f.svg.contains("height=\"260.00\""), "{}", f.svg);
        assert!(bar_chart("e", "t", "x", "y", &[]).svg.ends_with("</svg>"));
    }
}
