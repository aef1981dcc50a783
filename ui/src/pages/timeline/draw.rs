//! One frame of the timeline on the canvas (Canvas2D): rectangles batched by colour, a pixel
//! column drawn once per row, names only on events wide enough to read, the time axis, the
//! labels, the selection. Returns the tiles the frame lacked; until they come, a coarser tile
//! already cached stands in. The frame's figures go into the canvas's `data-*` attributes (the
//! browser tests and `cargo xtask bench timeline` read them).

use std::{collections::HashMap, rc::Rc};

use nsight_contracts::timeline::{bucket_ns, tile_span_ns, Tile};

use super::{
    layout::{colour, duration, tick_ns, AXIS_H, GROUP_H, LABEL_W, ROW_H},
    viewer::{Hit, Slot, Viewer},
};

/// A filled rectangle waiting for its colour's batch.
type Rect = [f64; 4];

/// Levels above the wanted one searched for a stand-in tile.
const FALLBACK_LEVELS: u8 = 6;

fn fill(colour: u16, dim: bool, bucket: bool) -> String {
    let light = if bucket { 68 } else { 52 };
    if dim {
        format!("hsla({colour},20%,80%,0.6)")
    } else {
        format!("hsl({colour},62%,{light}%)")
    }
}

/// Draws the frame; returns the tiles to fetch.
pub fn draw(v: &mut Viewer) -> Vec<(u32, u8, u64)> {
    let started = now();
    let ctx = v.ctx.clone();
    let (w, h) = (v.width, v.height);
    ctx.set_fill_style_str("#ffffff");
    ctx.fill_rect(0.0, 0.0, w, h);
    let level = v.view.level(v.timeline.top_level);
    let wanted_tiles = v.view.tiles(level);
    let mut missing = Vec::new();
    let mut batches: HashMap<(u16, bool, bool), Vec<Rect>> = HashMap::new();
    let mut texts: Vec<(f64, f64, f64, String)> = Vec::new();
    let mut hits = Vec::new();
    let mut drawn = 0u64;
    let lines = v.lines.clone();
    let search = v.search.clone();
    let top = AXIS_H;
    for (n, line) in lines.iter().enumerate() {
        let y = line.y - v.scroll + top;
        if y + line.h < top || y > h {
            continue;
        }
        if n % 2 == 1 {
            ctx.set_fill_style_str("#f7f8fa");
            ctx.fill_rect(0.0, y, w, line.h);
        }
        if line.group {
            continue;
        }
        for index in wanted_tiles.clone() {
            let key = (line.track, level, index);
            let tile = match v.cached(key) {
                Some(t) => Some(t),
                None => {
                    if !v.tiles.contains_key(&key) {
                        missing.push(key);
                    }
                    stand_in(v, line.track, level, index)
                }
            };
            let Some(tile) = tile else {
                continue;
            };
            drawn += draw_tile(
                v,
                &tile,
                line.track,
                y,
                line.rows,
                &search,
                &mut batches,
                &mut texts,
                &mut hits,
            );
        }
    }
    for ((hue, dim, bucket), rects) in &batches {
        ctx.set_fill_style_str(&fill(*hue, *dim, *bucket));
        for r in rects {
            ctx.fill_rect(r[0], r[1], r[2], r[3]);
        }
    }
    ctx.set_font("11px system-ui, sans-serif");
    ctx.set_fill_style_str("#111111");
    for (x, y, width, text) in &texts {
        let fits = ((width - 6.0) / 6.2).floor().max(0.0) as usize;
        let shown: String = if text.chars().count() > fits {
            let mut s: String = text.chars().take(fits.saturating_sub(1)).collect();
            s.push('…');
            s
        } else {
            text.clone()
        };
        let _ = ctx.fill_text(&shown, x + 3.0, y + ROW_H - 4.0);
    }
    highlight(v, &hits);
    selection(v);
    labels(v, &lines);
    axis(v);
    v.hits = hits;
    let pending = v
        .tiles
        .values()
        .filter(|s| matches!(s, Slot::Loading))
        .count()
        + missing.len();
    let failed = v.tiles.values().find_map(|s| match s {
        Slot::Failed(e) => Some(e.clone()),
        _ => None,
    });
    let took = now() - started;
    let c = &v.canvas;
    let _ = c.set_attribute("data-frame", &v.frame.to_string());
    let _ = c.set_attribute("data-frame-ms", &format!("{took:.3}"));
    let _ = c.set_attribute("data-level", &level.to_string());
    let _ = c.set_attribute("data-drawn", &drawn.to_string());
    let _ = c.set_attribute("data-pending", &pending.to_string());
    let _ = c.set_attribute("data-tiles", &v.tiles.len().to_string());
    let _ = c.set_attribute("data-from", &format!("{:.0}", v.view.from));
    let _ = c.set_attribute("data-to", &format!("{:.0}", v.view.to));
    if let Some(e) = failed {
        let _ = c.set_attribute("data-error", &e);
    }
    missing
}

fn now() -> f64 {
    web_sys::window()
        .and_then(|w| w.performance())
        .map_or(0.0, |p| p.now())
}

/// A cached tile of a coarser level that covers tile `index` of `level`.
fn stand_in(v: &mut Viewer, track: u32, level: u8, index: u64) -> Option<Rc<Tile>> {
    let top = v.timeline.top_level;
    (1..=FALLBACK_LEVELS)
        .map(|up| level + up)
        .take_while(|&l| l <= top)
        .find_map(|l| v.cached((track, l, index >> (l - level))))
}

/// Queues one tile's rectangles; returns how many events and buckets it drew.
#[allow(clippy::too_many_arguments)]
fn draw_tile(
    v: &Viewer,
    tile: &Tile,
    track: u32,
    y: f64,
    rows: u16,
    search: &str,
    batches: &mut HashMap<(u16, bool, bool), Vec<Rect>>,
    texts: &mut Vec<(f64, f64, f64, String)>,
    hits: &mut Vec<Hit>,
) -> u64 {
    let view = v.view;
    let x0 = LABEL_W;
    let right = v.width;
    let hues: Vec<u16> = tile.names.iter().map(|n| colour(n)).collect();
    let dims: Vec<bool> = tile
        .names
        .iter()
        .map(|n| !search.is_empty() && !n.to_lowercase().contains(search))
        .collect();
    let tile_start = view.min + tile_span_ns(tile.level) as f64 * tile.index as f64;
    let width_ns = bucket_ns(tile.level) as f64;
    let mut drawn = 0;
    for row in &tile.rows {
        // A folded track draws its first row only.
        if row.row >= rows {
            continue;
        }
        let ry = y + f64::from(row.row) * ROW_H + 1.0;
        let mut last_px = f64::NEG_INFINITY;
        for e in &row.events {
            let a = x0 + view.x(e.start_ns as f64);
            let b = x0 + view.x(e.end_ns as f64);
            if b < x0 || a > right {
                continue;
            }
            let a = a.max(x0);
            let width = (b.min(right) - a).max(1.0);
            let name = e.name as usize;
            hits.push(Hit {
                x0: a,
                x1: a + width,
                y0: ry,
                y1: ry + ROW_H - 1.0,
                track,
                event: e.event,
            });
            if width < 1.5 && a.floor() == last_px {
                continue;
            }
            last_px = a.floor();
            drawn += 1;
            let key = (
                hues.get(name).copied().unwrap_or(0),
                dims.get(name).copied().unwrap_or(false),
                false,
            );
            batches
                .entry(key)
                .or_default()
                .push([a, ry, width, ROW_H - 2.0]);
            if width >= 40.0 {
                texts.push((
                    a,
                    ry,
                    width,
                    tile.names.get(name).cloned().unwrap_or_default(),
                ));
            }
        }
        last_px = f64::NEG_INFINITY;
        for b in &row.buckets {
            let start = tile_start + f64::from(b.bucket) * width_ns;
            let a = x0 + view.x(start);
            if a < x0 || a > right {
                continue;
            }
            let width = (width_ns / view.ns_per_px()).max(1.0);
            hits.push(Hit {
                x0: a,
                x1: a + width,
                y0: ry,
                y1: ry + ROW_H - 1.0,
                track,
                event: b.event,
            });
            if a.floor() == last_px {
                continue;
            }
            last_px = a.floor();
            drawn += 1;
            // The bar's height says how busy the bucket is (at least a third, to be seen).
            let busy = (b.busy_ns as f64 / width_ns).clamp(0.33, 1.0);
            let bar = (ROW_H - 2.0) * busy;
            let name = b.name as usize;
            let key = (
                hues.get(name).copied().unwrap_or(0),
                dims.get(name).copied().unwrap_or(false),
                true,
            );
            batches
                .entry(key)
                .or_default()
                .push([a, ry + ROW_H - 2.0 - bar, width, bar]);
        }
    }
    drawn
}

/// Outlines the selected event where it is drawn.
fn highlight(v: &Viewer, hits: &[Hit]) {
    let Some((track, event)) = v.selected else {
        return;
    };
    let ctx = &v.ctx;
    ctx.set_stroke_style_str("#000000");
    ctx.set_line_width(2.0);
    for h in hits.iter().filter(|h| h.track == track && h.event == event) {
        ctx.stroke_rect(h.x0 - 1.0, h.y0 - 1.0, h.x1 - h.x0 + 2.0, h.y1 - h.y0 + 2.0);
    }
}

fn selection(v: &Viewer) {
    let Some((a, b)) = v.selection else {
        return;
    };
    let ctx = &v.ctx;
    let xa = (LABEL_W + v.view.x(a)).max(LABEL_W);
    let xb = (LABEL_W + v.view.x(b)).min(v.width);
    if xb <= xa {
        return;
    }
    ctx.set_fill_style_str("rgba(118,185,0,0.18)");
    ctx.fill_rect(xa, AXIS_H, xb - xa, v.height - AXIS_H);
    ctx.set_fill_style_str("#3d6b00");
    ctx.fill_rect(xa, AXIS_H, 1.0, v.height - AXIS_H);
    ctx.fill_rect(xb - 1.0, AXIS_H, 1.0, v.height - AXIS_H);
}

fn labels(v: &Viewer, lines: &[super::layout::Line]) {
    let ctx = &v.ctx;
    ctx.set_fill_style_str("#ffffff");
    ctx.fill_rect(0.0, AXIS_H, LABEL_W, v.height - AXIS_H);
    ctx.set_fill_style_str("#d6d6dc");
    ctx.fill_rect(LABEL_W - 1.0, 0.0, 1.0, v.height);
    for line in lines {
        let y = line.y - v.scroll + AXIS_H;
        if y + line.h < AXIS_H || y > v.height {
            continue;
        }
        let Some(track) = v.timeline.tracks.get(line.track as usize) else {
            continue;
        };
        let marker = if line.group || line.rows > 1 || line.collapsed {
            if line.collapsed {
                "▸ "
            } else {
                "▾ "
            }
        } else {
            "  "
        };
        let text = format!("{marker}{}", track.label);
        let indent = 6.0 + line.depth as f64 * 12.0;
        let fits = ((LABEL_W - indent - 6.0) / 6.4).floor().max(1.0) as usize;
        let shown: String = if text.chars().count() > fits {
            let mut s: String = text.chars().take(fits - 1).collect();
            s.push('…');
            s
        } else {
            text
        };
        ctx.set_font(if line.group {
            "600 12px system-ui, sans-serif"
        } else {
            "12px system-ui, sans-serif"
        });
        ctx.set_fill_style_str(if line.group { "#1d1d1f" } else { "#3b3b44" });
        let base = if line.group { GROUP_H } else { ROW_H };
        let _ = ctx.fill_text(&shown, indent, y + base - 4.0);
    }
}

fn axis(v: &Viewer) {
    let ctx = &v.ctx;
    ctx.set_fill_style_str("#f4f5f7");
    ctx.fill_rect(0.0, 0.0, v.width, AXIS_H);
    ctx.set_fill_style_str("#5b5b66");
    ctx.set_font("11px system-ui, sans-serif");
    let _ = ctx.fill_text(
        &format!("{} shown", duration(v.view.to - v.view.from)),
        6.0,
        15.0,
    );
    let step = tick_ns(v.view.ns_per_px(), 110.0);
    let origin = v.view.min;
    let mut t = ((v.view.from - origin) / step).ceil() * step + origin;
    while t < v.view.to {
        let x = LABEL_W + v.view.x(t);
        ctx.fill_rect(x, AXIS_H - 6.0, 1.0, 6.0);
        let _ = ctx.fill_text(&duration(t - origin), x + 3.0, 13.0);
        t += step;
    }
}
