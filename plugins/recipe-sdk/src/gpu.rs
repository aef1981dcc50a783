//! The GPU timeline per process and device, for `gpu_time_util` and `gpu_gaps`:
//!
//! ```text
//!  KERNEL / MEMCPY / MEMSET rows ──gpu_ops──> GpuOp { pid, device, start, end }
//!        ├─ utilization(ops, chunks) ──> Chunk per (pid, device, i): busy ns in [start, end)
//!        └─ gaps(ops) ──────────────────> Gap per (pid, device): no operation in [start, end)
//! ```
//!
//! PID = `globalPid / 0x1000000 % 0x1000000`. A (process, device) pair's span runs from the
//! start of its first operation to the end of its last. Pure functions over plain data, except
//! [`gpu_ops`], which reads the rows.

use crate::{nvtx::pid, Output, Schema, Value, Window};

pub const KERNEL_TABLE: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
pub const MEMCPY_TABLE: &str = "CUPTI_ACTIVITY_KIND_MEMCPY";
pub const MEMSET_TABLE: &str = "CUPTI_ACTIVITY_KIND_MEMSET";

/// One GPU operation (kernel, memory copy or memset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct GpuOp {
    pub pid: i64,
    pub device: i64,
    pub start: i64,
    pub end: i64,
}

/// The operations of each table in `tables` (name, why it may be missing) that lie wholly in
/// `window`. A missing table or column is a note; rows without start, end, device or process
/// are left out with a note.
pub fn gpu_ops(
    schema: &Schema<'_>,
    tables: &[(&str, &str)],
    window: &Window,
    out: &mut Output,
) -> Result<Vec<GpuOp>, String> {
    let mut ops = Vec::new();
    for (table, why) in tables {
        let required = ["start", "end", "deviceId", "globalPid"];
        if schema.require(out, table, &required, why).is_none() {
            continue;
        }
        let sql = format!(
            "SELECT t.globalPid, t.deviceId, t.start, t.\"end\" FROM {table} AS t WHERE {}",
            window.sql("t")
        );
        let mut incomplete = 0u64;
        schema.report().query(&sql, &[], &mut |row| {
            match row {
                [Value::Int(g), Value::Int(d), Value::Int(s), Value::Int(e)] => ops.push(GpuOp {
                    pid: pid(*g),
                    device: *d,
                    start: *s,
                    end: *e,
                }),
                _ => incomplete += 1,
            }
            Ok(())
        })?;
        if incomplete > 0 {
            out.note(format!(
                "{incomplete} rows of {table} have no start, end, deviceId or globalPid and \
                 are left out"
            ));
        }
    }
    Ok(ops)
}

/// Runs of `ops` with the same (pid, device), after sorting by (pid, device, start, end).
fn by_device(ops: &mut [GpuOp]) -> impl Iterator<Item = &[GpuOp]> {
    ops.sort_unstable();
    ops.chunk_by(|a, b| (a.pid, a.device) == (b.pid, b.device))
}

/// One of the equal parts of a (process, device) span and the operation time inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    pub pid: i64,
    pub device: i64,
    /// 0-based position in the span.
    pub index: u32,
    pub start: i64,
    pub end: i64,
    /// Σ over operations of their overlap with `[start, end)`; concurrent operations add up,
    /// so this can exceed `end - start`.
    pub busy: i64,
}

impl Chunk {
    /// `busy * 100.0 / (end - start)`, in f64 as SQL's `busy * 100.0 / dur`.
    pub fn percent(&self) -> f64 {
        self.busy as f64 * 100.0 / (self.end - self.start) as f64
    }
}

/// Splits each (process, device) span `[s, e)` into `chunks` parts with the boundaries
/// `s + i * (e - s) / chunks` (integer division, i = 0..=chunks) and sums each part's
/// operation time. Parts of zero length (a span shorter than `chunks` ns) are left out.
/// Ordered by process, device, index.
pub fn utilization(ops: &mut [GpuOp], chunks: u32) -> Vec<Chunk> {
    let n = i128::from(chunks.max(1));
    let mut out = Vec::new();
    for group in by_device(ops) {
        let s = group.iter().map(|o| o.start).min().unwrap_or(0);
        let e = group.iter().map(|o| o.end).max().unwrap_or(s);
        let span = i128::from(e) - i128::from(s);
        let bound = |i: i128| (i128::from(s) + i * span / n) as i64;
        let mut busy = vec![0i64; n as usize];
        if span > 0 {
            for op in group {
                // First part whose end is after op.start.
                let mut j = ((i128::from(op.start) - i128::from(s)) * n / span).clamp(0, n - 1);
                while j > 0 && bound(j) > op.start {
                    j -= 1;
                }
                while j < n && bound(j) < op.end {
                    let overlap = op.end.min(bound(j + 1)) - op.start.max(bound(j));
                    if overlap > 0 {
                        busy[j as usize] += overlap;
                    }
                    j += 1;
                }
            }
        }
        for (i, b) in busy.into_iter().enumerate() {
            let (start, end) = (bound(i as i128), bound(i as i128 + 1));
            if end > start {
                out.push(Chunk {
                    pid: group[0].pid,
                    device: group[0].device,
                    index: i as u32,
                    start,
                    end,
                    busy: b,
                });
            }
        }
    }
    out
}

/// A time with no operation on a (process, device), between its first start and last end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    pub pid: i64,
    pub device: i64,
    /// The latest end of the operations before the gap.
    pub start: i64,
    /// The start of the next operation.
    pub end: i64,
}

/// Every gap of every (process, device): walking the operations by start, a gap is where an
/// operation starts after the latest end so far. Ordered by process, device, start.
pub fn gaps(ops: &mut [GpuOp]) -> Vec<Gap> {
    let mut out = Vec::new();
    for group in by_device(ops) {
        let mut latest = group[0].end;
        for op in &group[1..] {
            if op.start > latest {
                out.push(Gap {
                    pid: op.pid,
                    device: op.device,
                    start: latest,
                    end: op.start,
                });
            }
            latest = latest.max(op.end);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(pid: i64, device: i64, start: i64, end: i64) -> GpuOp {
        GpuOp {
            pid,
            device,
            start,
            end,
        }
    }

    #[test]
    fn gaps_follow_the_latest_end_per_device() {
        let mut ops = vec![
            op(1, 0, 50, 60),
            op(1, 0, 0, 30),
            op(1, 0, 10, 20), // inside the first: no gap at 20
            op(1, 1, 0, 5),
            op(1, 1, 5, 9), // touching: no gap
            op(2, 0, 100, 200),
        ];
        assert_eq!(
            gaps(&mut ops),
            [Gap {
                pid: 1,
                device: 0,
                start: 30,
                end: 50
            }]
        );
    }

    #[test]
    fn utilization_splits_the_span_and_adds_overlaps() {
        // Span 0..10 in 4 parts: bounds 0, 2, 5, 7, 10.
        let mut ops = vec![op(1, 0, 0, 10), op(1, 0, 1, 6)];
        let c = utilization(&mut ops, 4);
        let got: Vec<(i64, i64, i64)> = c.iter().map(|c| (c.start, c.end, c.busy)).collect();
        assert_eq!(got, [(0, 2, 3), (2, 5, 6), (5, 7, 3), (7, 10, 3)]);
        assert_eq!(c[1].percent(), 200.0);
        // A 3 ns span in 5 parts: the empty parts are left out.
        let mut ops = vec![op(1, 0, 0, 3)];
        let c = utilization(&mut ops, 5);
        assert_eq!(c.len(), 3);
        assert!(c.iter().all(|c| c.busy == 1));
        // A zero-length span has no parts.
        assert!(utilization(&mut [op(1, 0, 4, 4)], 3).is_empty());
    }
}
