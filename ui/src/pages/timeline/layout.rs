//! The timeline's geometry (pure): which lines the track tree shows and where, the visible time
//! range and its zoom and pan, the levels and tiles a frame needs, tick spacing, colours.
//!
//! ```text
//!  ┌ label column (LABEL_W) ┬ time axis (AXIS_H) ─────────────────────────────┐
//!  │ ▾ python [91186]       │                                                 │
//!  │     CUDA API           │ ██ ▌▌ ███   (one ROW_H per row of the track)     │
//!  │ ▾ GPU 0                │                                                 │
//!  │     Stream 7           │ ████ █ ██                                        │
//!  └────────────────────────┴─────────────────────────────────────────────────┘
//! ```

use std::collections::HashSet;

use nsight_contracts::timeline::{level_for, tile_span_ns, Track};

/// Width of the label column, in CSS pixels.
pub const LABEL_W: f64 = 240.0;
/// Height of the time axis.
pub const AXIS_H: f64 = 22.0;
/// Height of one row of events.
pub const ROW_H: f64 = 16.0;
/// Height of a group's line (process, thread, GPU).
pub const GROUP_H: f64 = 18.0;
/// The narrowest view: 1 µs... no: 200 ns across the canvas.
pub const MIN_SPAN_NS: f64 = 200.0;

/// One line of the track tree as drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub track: u32,
    pub depth: usize,
    /// A group's header (no events), or a track's rows.
    pub group: bool,
    pub collapsed: bool,
    /// Rows drawn (1 when collapsed).
    pub rows: u16,
    /// Top, from the top of the tree (before scrolling).
    pub y: f64,
    pub h: f64,
}

/// The lines of `tracks` (parents before children) with `collapsed` tracks folded.
pub fn lines(tracks: &[Track], collapsed: &HashSet<u32>) -> Vec<Line> {
    let mut depth = vec![0usize; tracks.len()];
    let mut hidden = vec![false; tracks.len()];
    let mut out = Vec::new();
    let mut y = 0.0;
    for t in tracks {
        let i = t.id as usize;
        if let Some(p) = t.parent.map(|p| p as usize).filter(|&p| p < tracks.len()) {
            depth[i] = depth[p] + 1;
            hidden[i] = hidden[p] || collapsed.contains(&(p as u32));
        }
        if hidden[i] {
            continue;
        }
        let group = t.kind.is_group();
        let folded = collapsed.contains(&t.id);
        let rows = if group {
            0
        } else if folded {
            1
        } else {
            t.rows.max(1)
        };
        let h = if group {
            GROUP_H
        } else {
            f64::from(rows) * ROW_H + 2.0
        };
        out.push(Line {
            track: t.id,
            depth: depth[i],
            group,
            collapsed: folded,
            rows,
            y,
            h,
        });
        y += h;
    }
    out
}

/// The visible time range, in ns of the report's clock, over `width` pixels of events.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Viewport {
    pub from: f64,
    pub to: f64,
    pub width: f64,
    /// The report's range: the view never leaves it.
    pub min: f64,
    pub max: f64,
}

impl Viewport {
    pub fn ns_per_px(&self) -> f64 {
        (self.to - self.from) / self.width.max(1.0)
    }

    /// x (from the events area's left edge) of time `t`.
    pub fn x(&self, t: f64) -> f64 {
        (t - self.from) / self.ns_per_px()
    }

    pub fn time(&self, x: f64) -> f64 {
        self.from + x * self.ns_per_px()
    }

    /// Keeps the range inside the report and at least [`MIN_SPAN_NS`] wide.
    fn clamp(mut self) -> Self {
        let full = (self.max - self.min).max(MIN_SPAN_NS);
        let span = (self.to - self.from).clamp(MIN_SPAN_NS, full);
        if self.from < self.min {
            self.from = self.min;
        }
        if self.from + span > self.min + full {
            self.from = self.min + full - span;
        }
        self.to = self.from + span;
        self
    }

    /// Zooms by `factor` (< 1 in) keeping the time under `x` in place.
    pub fn zoom(self, factor: f64, x: f64) -> Self {
        let pivot = self.time(x);
        Viewport {
            from: pivot - (pivot - self.from) * factor,
            to: pivot + (self.to - pivot) * factor,
            ..self
        }
        .clamp()
    }

    /// Moves by `dx` pixels (positive: later).
    pub fn pan(self, dx: f64) -> Self {
        let dt = dx * self.ns_per_px();
        Viewport {
            from: self.from + dt,
            to: self.to + dt,
            ..self
        }
        .clamp()
    }

    /// Shows `[from, to)`.
    pub fn show(self, from: f64, to: f64) -> Self {
        Viewport { from, to, ..self }.clamp()
    }

    /// The level a frame draws at (one bucket per pixel or finer, never above `top`).
    pub fn level(&self, top: u8) -> u8 {
        level_for(self.ns_per_px()).min(top)
    }

    /// The tiles of `level` that cover the view (tile numbers from the report's start).
    pub fn tiles(&self, level: u8) -> std::ops::RangeInclusive<u64> {
        let span = tile_span_ns(level) as f64;
        let first = ((self.from - self.min) / span).floor().max(0.0) as u64;
        let last = ((self.to - self.min) / span).floor().max(0.0) as u64;
        first..=last
    }
}

/// Tick spacing: 1, 2 or 5 times a power of ten ns, about every `px` pixels.
pub fn tick_ns(ns_per_px: f64, px: f64) -> f64 {
    let raw = (ns_per_px * px).max(1.0);
    let pow = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * pow)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * pow)
}

/// A duration for people: `850 ns`, `12.5 µs`, `3.25 ms`, `1.5 s`.
pub fn duration(ns: f64) -> String {
    let a = ns.abs();
    let (v, unit) = if a >= 1e9 {
        (ns / 1e9, "s")
    } else if a >= 1e6 {
        (ns / 1e6, "ms")
    } else if a >= 1e3 {
        (ns / 1e3, "µs")
    } else {
        return format!("{ns:.0} ns");
    };
    let text = format!("{v:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} {unit}")
}

/// A stable colour for a name (an HSL hue from its hash), as Nsight gives each kernel its own.
pub fn colour(name: &str) -> u16 {
    // FNV-1a: stable across runs and builds.
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    (h % 360) as u16
}

/// `<a>_<b>` as two numbers.
pub fn parse_pair(raw: &str) -> Option<(f64, f64)> {
    let (a, b) = raw.split_once('_')?;
    let (a, b) = (a.parse::<f64>().ok()?, b.parse::<f64>().ok()?);
    (a.is_finite() && b.is_finite() && b > a).then_some((a, b))
}

/// `<track>.<event>` as two numbers.
pub fn parse_event(raw: &str) -> Option<(u32, u32)> {
    let (t, e) = raw.split_once('.')?;
    Some((t.parse().ok()?, e.parse().ok()?))
}
