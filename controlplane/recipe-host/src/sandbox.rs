//! What one recipe call may use, and why a call that stopped early stopped: the memory limiter
//! of a call's `Store`, the bounded log it keeps, and the mapping from a wasmtime error to a
//! message a recipe author or a user can act on (out of fuel, over the memory limit, a trap
//! with the recipe's panic message).
//!
//! ```text
//!  memory.grow past the limit ──> CallLimiter records it, answers -1 ──> the guest's allocator
//!                                 aborts (trap) ──> CallFailure::MemoryLimit
//!  fuel gone ──> Trap::OutOfFuel ──> CallFailure::OutOfFuel
//!  panic ──> the SDK's panic hook logs "panicked at ..." ──> abort (trap) ──> CallFailure::Trap
//!                                                                            { panic: Some(..) }
//! ```

use crate::recipe_host::{Level, LogLine};

/// Most log lines one call keeps; later ones are counted, not kept.
pub const MAX_LOG_LINES: usize = 2_000;
/// Longest log line kept, in bytes (longer ones are cut at a character boundary).
pub const MAX_LOG_LINE_BYTES: usize = 4_096;
/// Most table elements (function references) one instance may have.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;
/// The prefix of the line the recipe SDK's panic hook logs (Rust's `PanicHookInfo` display).
pub const PANIC_PREFIX: &str = "panicked at ";

/// The `Store`'s resource limiter: a linear-memory budget, recording a refused growth so that
/// the trap that follows can be explained.
#[derive(Debug)]
pub struct CallLimiter {
    memory_bytes: usize,
    /// The size (bytes) a refused `memory.grow` asked for, if one was refused.
    pub refused_memory: Option<usize>,
}

impl CallLimiter {
    pub fn new(memory_bytes: usize) -> Self {
        Self {
            memory_bytes,
            refused_memory: None,
        }
    }
}

impl wasmtime::ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            // `memory.grow` answers -1, as the spec says; a Rust guest's allocator then aborts.
            self.refused_memory = Some(desired);
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        4
    }

    fn tables(&self) -> usize {
        4
    }

    fn memories(&self) -> usize {
        1
    }
}

/// The log of one call, bounded in lines and line length.
#[derive(Debug, Default)]
pub struct CallLog {
    lines: Vec<LogLine>,
    dropped: usize,
    /// The last panic message the recipe logged (see [`PANIC_PREFIX`]), kept even when the
    /// log is full.
    panic: Option<String>,
}

impl CallLog {
    pub fn push(&mut self, level: Level, mut message: String) {
        cut_at_char(&mut message, MAX_LOG_LINE_BYTES);
        if level == Level::Error && message.starts_with(PANIC_PREFIX) {
            self.panic = Some(message.clone());
        }
        if self.lines.len() < MAX_LOG_LINES {
            self.lines.push(LogLine { level, message });
        } else {
            self.dropped += 1;
        }
    }

    /// The lines kept, then one saying how many were dropped, if any.
    pub fn take(&mut self) -> Vec<LogLine> {
        let mut lines = std::mem::take(&mut self.lines);
        if self.dropped > 0 {
            lines.push(LogLine {
                level: Level::Warn,
                message: format!(
                    "{} more log lines dropped (a call keeps at most {MAX_LOG_LINES})",
                    self.dropped
                ),
            });
            self.dropped = 0;
        }
        lines
    }

    pub fn panic_message(&self) -> Option<&str> {
        self.panic.as_deref()
    }
}

/// Cuts `s` to at most `max` bytes, at a character boundary, marking the cut with `…`.
fn cut_at_char(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push('…');
}

/// Why a call into a recipe stopped before it returned.
#[derive(Debug, thiserror::Error)]
pub enum CallFailure {
    #[error(
        "it used up its fuel ({fuel} units, about one per Wasm instruction) before finishing: \
         it may loop forever; a very large report may need a larger --fuel"
    )]
    OutOfFuel { fuel: u64 },
    #[error(
        "it needed more memory than its limit of {limit_mib} MiB (it asked to grow to \
         {wanted_mib} MiB); a very large report may need a larger --memory-mib"
    )]
    MemoryLimit { limit_mib: usize, wanted_mib: usize },
    #[error("it trapped ({trap}){}", panic.as_ref().map(|p| format!(": the recipe {p}")).unwrap_or_default())]
    Trap { trap: String, panic: Option<String> },
    #[error("{0:#}")]
    Other(wasmtime::Error),
}

/// Explains `error`, returned by a call into a recipe, with what the call's store saw.
pub fn classify(
    error: wasmtime::Error,
    fuel: u64,
    limiter: &CallLimiter,
    log: &CallLog,
) -> CallFailure {
    let trap = error.downcast_ref::<wasmtime::Trap>().copied();
    match trap {
        Some(wasmtime::Trap::OutOfFuel) => CallFailure::OutOfFuel { fuel },
        Some(trap) => match limiter.refused_memory {
            Some(wanted) => CallFailure::MemoryLimit {
                limit_mib: limiter.memory_bytes >> 20,
                wanted_mib: wanted.div_ceil(1 << 20),
            },
            None => CallFailure::Trap {
                trap: trap.to_string(),
                panic: log.panic_message().map(str::to_owned),
            },
        },
        None => CallFailure::Other(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter as _;

    #[test]
    fn growth_past_the_limit_is_refused_and_remembered() {
        let mut l = CallLimiter::new(64 << 20);
        assert!(l.memory_growing(0, 32 << 20, None).unwrap());
        assert_eq!(l.refused_memory, None);
        assert!(!l.memory_growing(32 << 20, 65 << 20, None).unwrap());
        assert_eq!(l.refused_memory, Some(65 << 20));
    }

    #[test]
    fn the_log_keeps_a_bounded_number_of_short_lines() {
        let mut log = CallLog::default();
        for i in 0..MAX_LOG_LINES + 5 {
            log.push(Level::Info, format!("line {i}"));
        }
        log.push(Level::Info, "é".repeat(MAX_LOG_LINE_BYTES));
        let lines = log.take();
        assert_eq!(lines.len(), MAX_LOG_LINES + 1);
        assert_eq!(
            lines.last().unwrap().message,
            "6 more log lines dropped (a call keeps at most 2000)"
        );
        let mut long = CallLog::default();
        long.push(Level::Info, "é".repeat(MAX_LOG_LINE_BYTES));
        let kept = &long.take()[0].message;
        assert!(
            kept.len() <= MAX_LOG_LINE_BYTES && kept.ends_with('…'),
            "{}",
            kept.len()
        );
    }

    #[test]
    fn a_panic_line_is_kept_even_when_the_log_is_full() {
        let mut log = CallLog::default();
        for _ in 0..MAX_LOG_LINES {
            log.push(Level::Info, "x".into());
        }
        log.push(Level::Info, "panicked at not an error line".into());
        assert_eq!(log.panic_message(), None);
        log.push(Level::Error, "panicked at src/lib.rs:3:5:\nboom".into());
        assert_eq!(
            log.panic_message(),
            Some("panicked at src/lib.rs:3:5:\nboom")
        );
    }

    #[test]
    fn failures_read_as_advice() {
        let limiter = CallLimiter::new(512 << 20);
        let log = CallLog::default();
        let fuel = classify(wasmtime::Trap::OutOfFuel.into(), 1000, &limiter, &log);
        assert!(fuel.to_string().contains("--fuel"), "{fuel}");
        let mut over = CallLimiter::new(512 << 20);
        over.refused_memory = Some((600 << 20) + 1);
        let mem = classify(
            wasmtime::Trap::UnreachableCodeReached.into(),
            1,
            &over,
            &log,
        );
        assert_eq!(
            mem.to_string(),
            "it needed more memory than its limit of 512 MiB (it asked to grow to 601 MiB); \
             a very large report may need a larger --memory-mib"
        );
        let mut log = CallLog::default();
        log.push(Level::Error, "panicked at src/lib.rs:1:1:\nno rows".into());
        let trap = classify(
            wasmtime::Trap::UnreachableCodeReached.into(),
            1,
            &limiter,
            &log,
        );
        assert!(
            trap.to_string()
                .ends_with(": the recipe panicked at src/lib.rs:1:1:\nno rows"),
            "{trap}"
        );
    }
}
