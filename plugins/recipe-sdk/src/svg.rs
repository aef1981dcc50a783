//! SVG figures a recipe returns (embedded by the host in the notebook and HTML page): a bar
//! chart with a title, axis labels and the largest value on the y axis. Text is XML-escaped.

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

#[cfg(test)]
mod tests {
    use super::*;

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
