//! The dump: what one process recorded in one collection window, as the injection writes it
//! (JSON) and the agent reads it to build the SQLite report. Plain data, no behaviour.
//!
//! Invariants: every `text_id` names an entry of [`Dump::strings`]; every event's `start` lies in
//! `[window.start_ns, window.end_ns]`; `end`, when present, is `>= start`. Times are
//! `CLOCK_MONOTONIC` nanoseconds (the clock nsys calls the target system clock).

use serde::{Deserialize, Serialize};

/// The kind of an NVTX event, as the report's `eventType` distinguishes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventKind {
    /// `nvtxRangePush*` / `nvtxRangePop` (and the domain variants).
    PushPop,
    /// `nvtxRangeStart*` / `nvtxRangeEnd`.
    StartEnd,
    /// `nvtxMark*`.
    Mark,
    /// `nvtxDomainCreate*`: `text` is the domain's name, `domain` its id.
    DomainCreate,
    /// `nvtxNameCategory*` / `nvtxDomainNameCategory*`: `category` named `text`.
    Category,
}

/// An event's payload (`nvtxEventAttributes_t.payload`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Payload {
    U64(u64),
    I64(i64),
    F64(f64),
    U32(u32),
    I32(i32),
    F32(f32),
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub kind: EventKind,
    pub start: u64,
    /// `None` for marks, domain creations, categories, and ranges still open at the dump.
    pub end: Option<u64>,
    /// OS thread id that began the event.
    pub tid: u32,
    /// OS thread id that ended a start/end range (may differ from `tid`).
    pub end_tid: Option<u32>,
    /// 0 is the default domain.
    pub domain: u64,
    /// 0 means no category.
    pub category: u32,
    /// ARGB, when the caller gave one.
    pub color: Option<u32>,
    /// An explicit (unregistered) message.
    pub text: Option<String>,
    /// A registered string (an id of [`Dump::strings`]).
    pub text_id: Option<u64>,
    pub payload: Option<Payload>,
    /// The id `nvtxRangeStart*` returned (start/end ranges only).
    pub range_id: Option<u64>,
}

/// A string registered with `nvtxDomainRegisterString*`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredString {
    pub id: u64,
    pub domain: u64,
    pub value: String,
}

/// A thread's name (from `nvtxNameOsThread*`, else the OS's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadName {
    pub tid: u32,
    pub name: String,
}

/// The collection window, in the process's clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// `CLOCK_MONOTONIC` at the start.
    pub start_ns: u64,
    /// `CLOCK_MONOTONIC` at the dump.
    pub end_ns: u64,
    /// `CLOCK_REALTIME` (ns since the Unix epoch) at the start.
    pub utc_start_ns: u64,
}

/// Everything one process recorded in one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dump {
    pub pid: u32,
    pub process_name: String,
    pub window: Window,
    pub strings: Vec<RegisteredString>,
    pub thread_names: Vec<ThreadName>,
    pub events: Vec<Event>,
    /// GPU activity from CUPTI (`--backend cupti`), when the process used CUDA with it on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<crate::cuda::CudaActivity>,
}

impl Dump {
    /// Reads a dump file.
    pub fn read(path: &std::path::Path) -> std::io::Result<Self> {
        let bytes = std::fs::read(path)?;
        serde_json::from_slice(&bytes).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} is not an NVTX dump: {e}", path.display()),
            )
        })
    }

    /// Writes the dump to `path` through a temporary file and a rename, so a reader never sees
    /// half a dump.
    pub fn write(&self, path: &std::path::Path) -> std::io::Result<()> {
        let tmp = path.with_extension("partial");
        {
            let file = std::fs::File::create(&tmp)?;
            let mut out = std::io::BufWriter::new(file);
            serde_json::to_writer(&mut out, self).map_err(std::io::Error::other)?;
            std::io::Write::flush(&mut out)?;
        }
        std::fs::rename(&tmp, path)
    }
}
