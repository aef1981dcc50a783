//! The recorder: per-thread logs of NVTX events, the collection window, and the dump. Safe Rust
//! with the time passed in (`now`, `CLOCK_MONOTONIC` ns), so it is tested without a process or
//! a clock; [`crate::ffi`] is the only caller in the library.
//!
//! ```text
//!  push/pop, marks ──> ThreadLog (one per thread, own mutex: uncontended on the hot path)
//!  start/end ranges ─> shared map (they may end on another thread) ──┐
//!  domains, categories, registered strings, thread names ────────────┴─> dump(window) -> Dump
//! ```
//! Invariants: while not recording nothing but the push/pop stack grows (so a pop always finds
//! its push); an event is kept only if it began inside the current window (a range pushed before
//! START is dropped when popped); each START opens a new generation, so a range begun in an old
//! window never lands in a new one.
//!
//! Memory: a thread's ranges and marks are kept in [`compact`] form (48 bytes each, messages
//! interned per thread); start/end ranges, which may cross threads, as full [`Event`]s.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex, MutexGuard, PoisonError,
    },
};

use crate::dump::{Dump, Event, EventKind, Payload, RegisteredString, ThreadName, Window};

mod compact;
use compact::{Chunks, Compact, Labels};

/// What a caller says about an event (`nvtxEventAttributes_t`, decoded).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attrs {
    pub category: u32,
    pub color: Option<u32>,
    pub text: Option<String>,
    pub text_id: Option<u64>,
    pub payload: Option<Payload>,
}

/// One thread's log. Locked by its own thread on every event and by the dump.
#[derive(Debug)]
pub struct ThreadLog {
    tid: u32,
    /// Open push/pop ranges, innermost last: (domain, generation, the event if recorded).
    stack: Vec<(u64, u64, Option<Compact>)>,
    events: Chunks,
    labels: Labels,
}

/// A start/end range waiting for its end.
#[derive(Debug)]
struct OpenRange {
    generation: u64,
    event: Event,
}

#[derive(Debug, Default)]
struct Names {
    strings: Vec<RegisteredString>,
    /// (domain id, name, creation time).
    domains: Vec<(u64, String, u64)>,
    /// (domain, category, name, time).
    categories: Vec<(u64, u32, String, u64)>,
    threads: HashMap<u32, String>,
}

#[derive(Debug, Clone, Copy, Default)]
struct WindowState {
    start_ns: u64,
    utc_start_ns: u64,
}

/// The process-wide recorder.
#[derive(Debug)]
pub struct Recorder {
    pid: u32,
    process_name: String,
    recording: AtomicBool,
    generation: AtomicU64,
    window: Mutex<WindowState>,
    threads: Mutex<Vec<Arc<Mutex<ThreadLog>>>>,
    open_ranges: Mutex<HashMap<u64, OpenRange>>,
    ended_ranges: Mutex<Vec<Event>>,
    names: Mutex<Names>,
    next_id: AtomicU64,
}

/// Locks, recovering from a poisoned mutex (a panic elsewhere must not stop recording).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Recorder {
    pub fn new(pid: u32, process_name: String) -> Self {
        Self {
            pid,
            process_name,
            recording: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            window: Mutex::new(WindowState::default()),
            threads: Mutex::new(Vec::new()),
            open_ranges: Mutex::new(HashMap::new()),
            ended_ranges: Mutex::new(Vec::new()),
            names: Mutex::new(Names::default()),
            next_id: AtomicU64::new(1),
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn is_recording(&self) -> bool {
        self.recording.load(Ordering::Acquire)
    }

    /// A new thread's log, registered so that the dump sees it.
    pub fn register_thread(&self, tid: u32) -> Arc<Mutex<ThreadLog>> {
        let log = Arc::new(Mutex::new(ThreadLog {
            tid,
            stack: Vec::new(),
            events: Chunks::default(),
            labels: Labels::default(),
        }));
        lock(&self.threads).push(Arc::clone(&log));
        log
    }

    /// Opens a window at `now`; a START while recording is a no-op (returns false).
    pub fn start(&self, now: u64, utc_now: u64) -> bool {
        let mut window = lock(&self.window);
        if self.is_recording() {
            return false;
        }
        *window = WindowState {
            start_ns: now,
            utc_start_ns: utc_now,
        };
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.recording.store(true, Ordering::Release);
        true
    }

    fn event(&self, kind: EventKind, start: u64, tid: u32, domain: u64, attrs: Attrs) -> Event {
        Event {
            kind,
            start,
            end: None,
            tid,
            end_tid: None,
            domain,
            category: attrs.category,
            color: attrs.color,
            text: attrs.text,
            text_id: attrs.text_id,
            payload: attrs.payload,
            range_id: None,
        }
    }

    /// `nvtxRangePush*`: returns the zero-based nesting level of the new range.
    pub fn push(
        &self,
        log: &mut ThreadLog,
        now: u64,
        domain: u64,
        attrs: impl FnOnce() -> Attrs,
    ) -> i32 {
        let generation = self.generation.load(Ordering::Acquire);
        let event = self
            .is_recording()
            .then(|| Compact::new(EventKind::PushPop, now, domain, attrs(), &mut log.labels));
        let level = log.stack.iter().filter(|(d, _, _)| *d == domain).count();
        log.stack.push((domain, generation, event));
        i32::try_from(level).unwrap_or(i32::MAX)
    }

    /// `nvtxRangePop`: returns the level of the ended range, or -1 when nothing was pushed.
    pub fn pop(&self, log: &mut ThreadLog, now: u64, domain: u64) -> i32 {
        let Some(index) = log.stack.iter().rposition(|(d, _, _)| *d == domain) else {
            return -1;
        };
        let (_, generation, event) = log.stack.remove(index);
        if let Some(mut event) = event {
            if self.is_recording() && generation == self.generation.load(Ordering::Acquire) {
                event.end_at(now);
                log.events.push(event);
            }
        }
        let level = log.stack.iter().filter(|(d, _, _)| *d == domain).count();
        i32::try_from(level).unwrap_or(i32::MAX)
    }

    /// `nvtxMark*`.
    pub fn mark(&self, log: &mut ThreadLog, now: u64, domain: u64, attrs: impl FnOnce() -> Attrs) {
        if self.is_recording() {
            let event = Compact::new(EventKind::Mark, now, domain, attrs(), &mut log.labels);
            log.events.push(event);
        }
    }

    /// `nvtxRangeStart*`: returns the range id (never 0).
    pub fn range_start(
        &self,
        now: u64,
        tid: u32,
        domain: u64,
        attrs: impl FnOnce() -> Attrs,
    ) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if self.is_recording() {
            let mut event = self.event(EventKind::StartEnd, now, tid, domain, attrs());
            event.range_id = Some(id);
            let generation = self.generation.load(Ordering::Acquire);
            lock(&self.open_ranges).insert(id, OpenRange { generation, event });
        }
        id
    }

    /// `nvtxRangeEnd`: unknown ids (never started while recording) are ignored.
    pub fn range_end(&self, now: u64, tid: u32, id: u64) {
        let Some(open) = lock(&self.open_ranges).remove(&id) else {
            return;
        };
        if self.is_recording() && open.generation == self.generation.load(Ordering::Acquire) {
            let mut event = open.event;
            event.end = Some(now);
            event.end_tid = Some(tid);
            lock(&self.ended_ranges).push(event);
        }
    }

    /// `nvtxDomainCreate*`: returns the new domain's id (never 0; 0 is the default domain).
    pub fn domain_create(&self, now: u64, name: String) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        lock(&self.names).domains.push((id, name, now));
        id
    }

    /// `nvtxDomainRegisterString*`: returns the string's id (never 0).
    pub fn register_string(&self, domain: u64, value: String) -> u64 {
        let mut names = lock(&self.names);
        if let Some(s) = names
            .strings
            .iter()
            .find(|s| s.domain == domain && s.value == value)
        {
            return s.id;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        names.strings.push(RegisteredString { id, domain, value });
        id
    }

    /// `nvtxNameCategory*` / `nvtxDomainNameCategory*`.
    pub fn name_category(&self, now: u64, domain: u64, category: u32, name: String) {
        lock(&self.names)
            .categories
            .push((domain, category, name, now));
    }

    /// `nvtxNameOsThread*`.
    pub fn name_thread(&self, tid: u32, name: String) {
        lock(&self.names).threads.insert(tid, name);
    }

    /// Closes the window at `now` and returns what it holds; recording stops. Without an open
    /// window the dump is empty (its window starts and ends at `now`).
    pub fn stop(&self, now: u64, os_thread_name: impl Fn(u32) -> Option<String>) -> Dump {
        let window = *lock(&self.window);
        let was_recording = self.recording.swap(false, Ordering::AcqRel);
        let (start_ns, utc_start_ns) = if was_recording {
            (window.start_ns, window.utc_start_ns)
        } else {
            (now, 0)
        };
        let generation = self.generation.load(Ordering::Acquire);
        let in_window = |e: &Event| e.start >= start_ns && e.start <= now;
        let mut events = Vec::new();
        if was_recording {
            for log in lock(&self.threads).iter() {
                let mut guard = lock(log);
                let log = &mut *guard;
                let keep = |e: &Compact| e.start >= start_ns && e.start <= now;
                let (tid, labels) = (log.tid, &log.labels);
                events.extend(
                    log.events
                        .drain()
                        .filter(|e| keep(e))
                        .map(|e| e.expand(tid, labels)),
                );
                for (_, g, open) in &log.stack {
                    if let Some(e) = open.as_ref().filter(|e| *g == generation && keep(e)) {
                        events.push(e.expand(tid, labels));
                    }
                }
            }
            events.extend(lock(&self.ended_ranges).drain(..).filter(|e| in_window(e)));
            for open in lock(&self.open_ranges).values() {
                if open.generation == generation && in_window(&open.event) {
                    events.push(open.event.clone());
                }
            }
        }
        let names = lock(&self.names);
        // Domains and categories made before the window still name the window's events: they
        // are reported at the window's start.
        for (id, name, at) in &names.domains {
            let mut e = self.event(
                EventKind::DomainCreate,
                (*at).max(start_ns),
                0,
                *id,
                Attrs {
                    text: Some(name.clone()),
                    ..Attrs::default()
                },
            );
            e.tid = self.pid;
            events.push(e);
        }
        for (domain, category, name, at) in &names.categories {
            let attrs = Attrs {
                category: *category,
                text: Some(name.clone()),
                ..Attrs::default()
            };
            let mut e = self.event(EventKind::Category, (*at).max(start_ns), 0, *domain, attrs);
            e.tid = self.pid;
            events.push(e);
        }
        events.sort_by_key(|e| (e.start, e.tid));
        let mut tids: Vec<u32> = events.iter().map(|e| e.tid).collect();
        tids.sort_unstable();
        tids.dedup();
        let thread_names = tids
            .into_iter()
            .filter_map(|tid| {
                let name = names
                    .threads
                    .get(&tid)
                    .cloned()
                    .or_else(|| os_thread_name(tid))?;
                Some(ThreadName { tid, name })
            })
            .collect();
        Dump {
            cuda: None,
            pid: self.pid,
            process_name: self.process_name.clone(),
            window: Window {
                start_ns,
                end_ns: now,
                utc_start_ns,
            },
            strings: names.strings.clone(),
            thread_names,
            events,
        }
    }
}

/// A thread's name as the OS knows it (`/proc/self/task/<tid>/comm`).
pub fn os_thread_name(tid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
        .ok()
        .map(|s| s.trim_end().to_owned())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests;
