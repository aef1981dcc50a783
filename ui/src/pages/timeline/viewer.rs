//! The timeline's canvas and its state: the view, the track tree's folding, the tile cache, the
//! selection; mouse, wheel and keyboard input; one redraw per animation frame when something
//! changed. Leptos renders the panels around it; the canvas is drawn from Rust (`draw`).
//!
//! ```text
//!  input (mouse/wheel/keys) ──> Viewer (view, folding, selection) ──request()──> rAF ──> draw
//!  draw ──tiles it lacks──> fetch /timeline/tiles (spawn_local) ──> cache ──request()──> rAF
//!  click / drag end ──> callbacks ──> Leptos signals (details, aggregates) and the URL
//! ```

use std::{
    cell::RefCell,
    collections::{HashMap, HashSet},
    rc::{Rc, Weak},
};

use leptos::task::spawn_local;
use nsight_contracts::timeline::{Tile, Timeline};
use wasm_bindgen::{closure::Closure, JsCast};
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement, KeyboardEvent, MouseEvent, WheelEvent};

use super::layout::{lines, Line, Viewport, AXIS_H, LABEL_W};
use crate::api;

/// Tiles kept at most (each a few KB to a few hundred KB; the browser's memory stays bounded).
pub const MAX_TILES: usize = 2500;

/// One tile's state in the cache.
pub enum Slot {
    Loading,
    Ready { tile: Rc<Tile>, used: u64 },
    Failed(String),
}

/// Something drawn that a click can pick: an event, or a bucket (its longest event).
#[derive(Debug, Clone, Copy)]
pub struct Hit {
    pub x0: f64,
    pub x1: f64,
    pub y0: f64,
    pub y1: f64,
    pub track: u32,
    pub event: u32,
}

/// A drag in progress on the events area.
#[derive(Debug, Clone, Copy)]
pub struct Drag {
    pub x0: f64,
    pub last: f64,
    pub moved: bool,
    /// Alt or the middle button: the drag pans instead of selecting.
    pub pan: bool,
}

/// An event on a track: `(track, event)`.
pub type EventRef = (u32, u32);
/// A time range in ns: `(start, end)`.
pub type Span = (f64, f64);

/// What the page hears from the canvas. Called with the viewer not borrowed, so a callback may
/// call back into it.
#[derive(Clone)]
pub struct Callbacks {
    pub select: Rc<dyn Fn(Option<EventRef>)>,
    pub range: Rc<dyn Fn(Option<Span>)>,
    pub view: Rc<dyn Fn(f64, f64)>,
}

/// The canvas's state.
pub struct Viewer {
    pub report: String,
    pub timeline: Timeline,
    pub canvas: HtmlCanvasElement,
    pub ctx: CanvasRenderingContext2d,
    pub width: f64,
    pub height: f64,
    pub view: Viewport,
    pub scroll: f64,
    pub collapsed: HashSet<u32>,
    pub lines: Vec<Line>,
    pub tiles: HashMap<(u32, u8, u64), Slot>,
    pub frame: u64,
    pub selected: Option<(u32, u32)>,
    pub selection: Option<(f64, f64)>,
    pub search: String,
    pub hits: Vec<Hit>,
    pub drag: Option<Drag>,
    pub callbacks: Callbacks,
    scheduled: bool,
    url_timer: Option<i32>,
}

/// The viewer and the listeners that feed it; dropping it detaches nothing but makes the
/// listeners inert (they hold a `Weak`).
pub struct Handle {
    pub viewer: Rc<RefCell<Viewer>>,
    _listeners: Vec<Closure<dyn FnMut(web_sys::Event)>>,
}

impl Viewer {
    /// The lines' total height.
    pub fn tree_height(&self) -> f64 {
        self.lines.last().map_or(0.0, |l| l.y + l.h)
    }

    fn relayout(&mut self) {
        self.lines = lines(&self.timeline.tracks, &self.collapsed);
        self.scroll = self.scroll.clamp(0.0, self.max_scroll());
    }

    fn max_scroll(&self) -> f64 {
        (self.tree_height() - (self.height - AXIS_H)).max(0.0)
    }

    /// The line under `y` (canvas pixels).
    pub fn line_at(&self, y: f64) -> Option<&Line> {
        let y = y - AXIS_H + self.scroll;
        self.lines.iter().find(|l| y >= l.y && y < l.y + l.h)
    }

    /// The event drawn under `(x, y)`, the nearest within 3 pixels.
    fn pick(&self, x: f64, y: f64) -> Option<(u32, u32)> {
        self.hits
            .iter()
            .filter(|h| y >= h.y0 && y < h.y1 && x >= h.x0 - 3.0 && x <= h.x1 + 3.0)
            .min_by(|a, b| {
                let d = |h: &Hit| {
                    if x < h.x0 {
                        h.x0 - x
                    } else if x > h.x1 {
                        x - h.x1
                    } else {
                        0.0
                    }
                };
                d(a).total_cmp(&d(b))
            })
            .map(|h| (h.track, h.event))
    }

    /// Sizes the canvas to its container (CSS pixels times the device pixel ratio).
    pub fn resize(&mut self) {
        let window = web_sys::window();
        let ratio = window.as_ref().map_or(1.0, |w| w.device_pixel_ratio());
        let parent_w = self
            .canvas
            .parent_element()
            .map_or(1000.0, |p| f64::from(p.client_width()));
        let inner_h = window
            .and_then(|w| w.inner_height().ok())
            .and_then(|h| h.as_f64())
            .unwrap_or(900.0);
        self.width = parent_w.max(LABEL_W + 200.0);
        self.height =
            (self.tree_height() + AXIS_H + 4.0).clamp(160.0, (inner_h - 160.0).max(300.0));
        self.canvas.set_width((self.width * ratio) as u32);
        self.canvas.set_height((self.height * ratio) as u32);
        let style = self.canvas.style();
        let _ = style.set_property("width", &format!("{}px", self.width));
        let _ = style.set_property("height", &format!("{}px", self.height));
        let _ = self.ctx.set_transform(ratio, 0.0, 0.0, ratio, 0.0, 0.0);
        self.view.width = self.width - LABEL_W;
        self.scroll = self.scroll.clamp(0.0, self.max_scroll());
    }

    /// The tile if cached (marking it used this frame).
    pub fn cached(&mut self, key: (u32, u8, u64)) -> Option<Rc<Tile>> {
        let frame = self.frame;
        match self.tiles.get_mut(&key) {
            Some(Slot::Ready { tile, used }) => {
                *used = frame;
                Some(tile.clone())
            }
            _ => None,
        }
    }

    /// Drops the least recently drawn tiles beyond [`MAX_TILES`].
    fn evict(&mut self) {
        if self.tiles.len() <= MAX_TILES {
            return;
        }
        let mut ready: Vec<(u64, (u32, u8, u64))> = self
            .tiles
            .iter()
            .filter_map(|(k, s)| match s {
                Slot::Ready { used, .. } => Some((*used, *k)),
                _ => None,
            })
            .collect();
        ready.sort_unstable();
        let excess = self.tiles.len() - MAX_TILES;
        for (_, k) in ready.into_iter().take(excess) {
            self.tiles.remove(&k);
        }
    }
}

/// Redraws on the next animation frame (once, however often it is asked).
pub fn request(viewer: &Rc<RefCell<Viewer>>) {
    {
        let Ok(mut v) = viewer.try_borrow_mut() else {
            return;
        };
        if v.scheduled {
            return;
        }
        v.scheduled = true;
    }
    let weak = Rc::downgrade(viewer);
    let frame = Closure::once_into_js(move || {
        if let Some(viewer) = weak.upgrade() {
            frame(&viewer);
        }
    });
    if let Some(w) = web_sys::window() {
        let _ = w.request_animation_frame(frame.unchecked_ref());
    }
}

fn frame(viewer: &Rc<RefCell<Viewer>>) {
    let missing = {
        let mut v = viewer.borrow_mut();
        v.scheduled = false;
        v.frame += 1;
        let missing = super::draw::draw(&mut v);
        v.evict();
        missing
    };
    for key in missing {
        fetch(viewer, key);
    }
}

fn fetch(viewer: &Rc<RefCell<Viewer>>, key: (u32, u8, u64)) {
    let report = {
        let mut v = viewer.borrow_mut();
        if v.tiles.contains_key(&key) {
            return;
        }
        v.tiles.insert(key, Slot::Loading);
        v.report.clone()
    };
    let weak = Rc::downgrade(viewer);
    spawn_local(async move {
        let result = api::tile(report, key.0, key.1, key.2).await;
        let Some(viewer) = weak.upgrade() else {
            return;
        };
        {
            let mut v = viewer.borrow_mut();
            let slot = match result {
                Ok(tile) => Slot::Ready {
                    tile: Rc::new(tile),
                    used: v.frame,
                },
                Err(e) => Slot::Failed(e.to_string()),
            };
            v.tiles.insert(key, slot);
        }
        request(&viewer);
    });
}

/// Writes the view into the URL a moment after it stops changing.
fn view_changed(viewer: &Rc<RefCell<Viewer>>) {
    let Some(window) = web_sys::window() else {
        return;
    };
    let weak = Rc::downgrade(viewer);
    let mut v = viewer.borrow_mut();
    if let Some(t) = v.url_timer.take() {
        window.clear_timeout_with_handle(t);
    }
    let callback = Closure::once_into_js(move || {
        if let Some(viewer) = weak.upgrade() {
            let (callback, from, to) = {
                let mut v = viewer.borrow_mut();
                v.url_timer = None;
                (v.callbacks.view.clone(), v.view.from, v.view.to)
            };
            callback(from, to);
        }
    });
    v.url_timer = window
        .set_timeout_with_callback_and_timeout_and_arguments_0(callback.unchecked_ref(), 300)
        .ok();
}

fn offset(canvas: &HtmlCanvasElement, e: &MouseEvent) -> (f64, f64) {
    let r = canvas.get_bounding_client_rect();
    (
        f64::from(e.client_x()) - r.left(),
        f64::from(e.client_y()) - r.top(),
    )
}

/// Creates the canvas in `container` and wires its input.
#[allow(clippy::too_many_arguments)]
pub fn mount(
    container: &web_sys::Element,
    report: String,
    timeline: Timeline,
    range: Option<(f64, f64)>,
    selected: Option<(u32, u32)>,
    selection: Option<(f64, f64)>,
    callbacks: Callbacks,
) -> Option<Handle> {
    let document = web_sys::window()?.document()?;
    let canvas: HtmlCanvasElement = document.create_element("canvas").ok()?.dyn_into().ok()?;
    canvas.set_tab_index(0);
    let _ = canvas.set_attribute("data-testid", "timeline-canvas");
    let _ = canvas.set_attribute(
        "aria-label",
        "Timeline: W and S zoom, A and D pan, drag to select a range, click an event for its details",
    );
    let _ = canvas.set_attribute("role", "application");
    container.append_child(&canvas).ok()?;
    let ctx: CanvasRenderingContext2d = canvas
        .get_context_with_context_options("2d", &{
            let o = js_sys::Object::new();
            let _ = js_sys::Reflect::set(&o, &"alpha".into(), &false.into());
            o.into()
        })
        .ok()??
        .dyn_into()
        .ok()?;
    let (min, max) = (
        timeline.start_ns as f64,
        timeline.end_ns.max(timeline.start_ns + 1) as f64,
    );
    let view = Viewport {
        from: min,
        to: max,
        width: 1000.0,
        min,
        max,
    };
    let view = match range {
        Some((a, b)) => view.show(a, b),
        None => view,
    };
    let viewer = Rc::new(RefCell::new(Viewer {
        report,
        timeline,
        canvas: canvas.clone(),
        ctx,
        width: 0.0,
        height: 0.0,
        view,
        scroll: 0.0,
        collapsed: HashSet::new(),
        lines: Vec::new(),
        tiles: HashMap::new(),
        frame: 0,
        selected,
        selection,
        search: String::new(),
        hits: Vec::new(),
        drag: None,
        callbacks,
        scheduled: false,
        url_timer: None,
    }));
    {
        let mut v = viewer.borrow_mut();
        v.relayout();
        v.resize();
        if let Some((a, b)) = range {
            v.view = v.view.show(a, b);
        }
    }
    let mut listeners = Vec::new();
    let mut on =
        |target: &web_sys::EventTarget, name: &str, f: fn(&Rc<RefCell<Viewer>>, web_sys::Event)| {
            let weak: Weak<RefCell<Viewer>> = Rc::downgrade(&viewer);
            let closure = Closure::<dyn FnMut(web_sys::Event)>::new(move |e: web_sys::Event| {
                if let Some(viewer) = weak.upgrade() {
                    f(&viewer, e);
                }
            });
            let _ = target.add_event_listener_with_callback(name, closure.as_ref().unchecked_ref());
            listeners.push(closure);
        };
    on(&canvas, "mousedown", mouse_down);
    on(&canvas, "mousemove", mouse_move);
    on(&canvas, "mouseup", mouse_up);
    on(&canvas, "wheel", wheel);
    on(&canvas, "keydown", key_down);
    if let Some(w) = web_sys::window() {
        on(&w, "resize", |viewer, _| {
            viewer.borrow_mut().resize();
            request(viewer);
        });
    }
    request(&viewer);
    Some(Handle {
        viewer,
        _listeners: listeners,
    })
}

fn mouse_down(viewer: &Rc<RefCell<Viewer>>, e: web_sys::Event) {
    let Some(e) = e.dyn_ref::<MouseEvent>() else {
        return;
    };
    let mut v = viewer.borrow_mut();
    let (x, y) = offset(&v.canvas, e);
    if x < LABEL_W {
        if let Some(line) = v.line_at(y) {
            let track = line.track;
            let foldable = line.group || line.rows > 1 || line.collapsed;
            if foldable && !v.collapsed.remove(&track) {
                v.collapsed.insert(track);
            }
            v.relayout();
            v.resize();
        }
        drop(v);
        request(viewer);
        return;
    }
    e.prevent_default();
    let _ = v.canvas.focus();
    v.drag = Some(Drag {
        x0: x,
        last: x,
        moved: false,
        pan: e.alt_key() || e.button() == 1,
    });
}

fn mouse_move(viewer: &Rc<RefCell<Viewer>>, e: web_sys::Event) {
    let Some(e) = e.dyn_ref::<MouseEvent>() else {
        return;
    };
    let mut v = viewer.borrow_mut();
    let Some(mut drag) = v.drag else {
        return;
    };
    let (x, _) = offset(&v.canvas, e);
    if (x - drag.x0).abs() > 3.0 {
        drag.moved = true;
    }
    let panned = drag.pan && drag.moved;
    if panned {
        v.view = v.view.pan(drag.last - x);
    } else if drag.moved {
        let (a, b) = (v.view.time(drag.x0 - LABEL_W), v.view.time(x - LABEL_W));
        // Whole nanoseconds: what the URL and the aggregates request say.
        v.selection = Some((a.min(b).round(), a.max(b).round()));
    }
    drag.last = x;
    v.drag = Some(drag);
    drop(v);
    if panned {
        view_changed(viewer);
    }
    request(viewer);
}

fn mouse_up(viewer: &Rc<RefCell<Viewer>>, e: web_sys::Event) {
    let Some(e) = e.dyn_ref::<MouseEvent>() else {
        return;
    };
    let mut v = viewer.borrow_mut();
    let Some(drag) = v.drag.take() else {
        return;
    };
    let (x, y) = offset(&v.canvas, e);
    let callbacks = v.callbacks.clone();
    let selection = v.selection;
    let picked = (!drag.moved).then(|| v.pick(x, y));
    if let Some(p) = picked {
        v.selected = p;
    }
    drop(v);
    match picked {
        Some(p) => (callbacks.select)(p),
        None if !drag.pan => (callbacks.range)(selection),
        None => {}
    }
    request(viewer);
}

fn wheel(viewer: &Rc<RefCell<Viewer>>, e: web_sys::Event) {
    let Some(e) = e.dyn_ref::<WheelEvent>() else {
        return;
    };
    e.prevent_default();
    let mut v = viewer.borrow_mut();
    let (x, _) = offset(&v.canvas, e);
    let (dx, dy) = (e.delta_x(), e.delta_y());
    if e.ctrl_key() || e.meta_key() {
        // Pinch on a trackpad arrives as ctrl+wheel.
        v.view = v.view.zoom((dy * 0.002).exp(), (x - LABEL_W).max(0.0));
    } else if e.shift_key() || dx.abs() > dy.abs() {
        let d = if dx.abs() > dy.abs() { dx } else { dy };
        v.view = v.view.pan(d);
    } else {
        let max = v.max_scroll();
        v.scroll = (v.scroll + dy).clamp(0.0, max);
    }
    drop(v);
    view_changed(viewer);
    request(viewer);
}

fn key_down(viewer: &Rc<RefCell<Viewer>>, e: web_sys::Event) {
    let Some(e) = e.dyn_ref::<KeyboardEvent>() else {
        return;
    };
    let mut v = viewer.borrow_mut();
    let centre = v.view.width / 2.0;
    let step = v.view.width * 0.15;
    let next = match e.key().to_ascii_lowercase().as_str() {
        "w" | "+" | "=" => v.view.zoom(0.7, centre),
        "s" | "-" => v.view.zoom(1.0 / 0.7, centre),
        "a" | "arrowleft" => v.view.pan(-step),
        "d" | "arrowright" => v.view.pan(step),
        "escape" => {
            v.selection = None;
            let range = v.callbacks.range.clone();
            drop(v);
            range(None);
            request(viewer);
            return;
        }
        _ => return,
    };
    e.prevent_default();
    v.view = next;
    drop(v);
    view_changed(viewer);
    request(viewer);
}

/// Shows `[from, to)` (the details panel's "zoom to", the reset button).
pub fn show(viewer: &Rc<RefCell<Viewer>>, from: f64, to: f64) {
    {
        let mut v = viewer.borrow_mut();
        v.view = v.view.show(from, to);
    }
    view_changed(viewer);
    request(viewer);
}

/// Brings `[start, end)` into view: the view keeps its width and centres on it when it is out
/// of sight (an event wider than the view is shown whole, with a margin); nothing moves when
/// it is already visible.
pub fn bring_into_view(viewer: &Rc<RefCell<Viewer>>, start: f64, end: f64) {
    let (from, to) = {
        let v = viewer.borrow();
        (v.view.from, v.view.to)
    };
    if start >= from && end <= to {
        return;
    }
    let width = to - from;
    if end - start >= width {
        let margin = (end - start) * 0.05;
        show(viewer, start - margin, end + margin);
    } else {
        let centre = (start + end) / 2.0;
        show(viewer, centre - width / 2.0, centre + width / 2.0);
    }
}

/// Highlights the names containing `text` (case-insensitive; empty: none).
pub fn search(viewer: &Rc<RefCell<Viewer>>, text: &str) {
    viewer.borrow_mut().search = text.to_lowercase();
    request(viewer);
}

/// Marks `(track, event)` as selected (a link in the details panel).
pub fn select(viewer: &Rc<RefCell<Viewer>>, picked: Option<(u32, u32)>) {
    viewer.borrow_mut().selected = picked;
    request(viewer);
}

/// Makes sure `track`'s line is visible: unfolds its ancestors and scrolls to it.
pub fn reveal(viewer: &Rc<RefCell<Viewer>>, track: u32) {
    {
        let mut v = viewer.borrow_mut();
        let mut parent = v.timeline.tracks.get(track as usize).and_then(|t| t.parent);
        while let Some(p) = parent {
            v.collapsed.remove(&p);
            parent = v.timeline.tracks.get(p as usize).and_then(|t| t.parent);
        }
        v.relayout();
        v.resize();
        if let Some(line) = v.lines.iter().find(|l| l.track == track) {
            let visible = v.height - AXIS_H;
            if line.y < v.scroll || line.y + line.h > v.scroll + visible {
                let max = v.max_scroll();
                v.scroll = (line.y - visible / 3.0).clamp(0.0, max);
            }
        }
    }
    request(viewer);
}
