//! NVTX ranges projected onto the GPU, as Nsight Systems draws them under each GPU: a range's
//! projection on a device runs from the first start to the last end of the GPU operations
//! (kernels, memcpy, memset) launched by the CUDA API calls the range holds on its own thread
//! (the same definition as the `nvtx_gpu_proj_sum` recipe).
//!
//! ```text
//!  SQL: each API call that launched GPU work, with that work's span per device (correlation id)
//!  pure: for each range of the thread, the calls inside it ──min/max per device──> projection
//! ```

use std::collections::{BTreeMap, HashMap};

use rusqlite::Connection;

use super::{
    index::RawEvent,
    load::{pid_tid, LoadError},
};

/// A CUDA API call and the span of the GPU work it launched on one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub start: i64,
    pub end: i64,
    pub device: i64,
    pub gpu_start: i64,
    pub gpu_end: i64,
}

/// Per (pid, tid), the calls that launched GPU work, by start. `gpu_tables` are the kernel,
/// memcpy and memset tables the report has.
pub fn calls(
    conn: &Connection,
    gpu_tables: &[&str],
) -> Result<HashMap<(i64, i64), Vec<Call>>, LoadError> {
    if gpu_tables.is_empty() {
        return Ok(HashMap::new());
    }
    let ops = gpu_tables
        .iter()
        .map(|t| format!("SELECT start, end, deviceId, correlationId, globalPid FROM {t}"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let sql = format!(
        "SELECT r.globalTid, r.start, r.end, o.deviceId, min(o.start), max(o.end) \
         FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r JOIN ({ops}) AS o \
           ON o.correlationId = r.correlationId \
          AND o.globalPid = (r.globalTid & 0xFFFFFFFFFF000000) \
         WHERE r.end IS NOT NULL \
         GROUP BY r.rowid, o.deviceId ORDER BY r.globalTid, r.start"
    );
    let mut out: HashMap<(i64, i64), Vec<Call>> = HashMap::new();
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let thread = pid_tid(r.get::<_, Option<i64>>(0)?.unwrap_or(0));
        out.entry(thread).or_default().push(Call {
            start: r.get(1)?,
            end: r.get(2)?,
            device: r.get(3)?,
            gpu_start: r.get(4)?,
            gpu_end: r.get(5)?,
        });
    }
    Ok(out)
}

/// The projections of `ranges` (one thread's NVTX ranges) through `calls` (the same thread's,
/// by start): per device, an event with the range's name and rowid over the GPU work's span.
pub fn project(ranges: &[RawEvent], calls: &[Call]) -> BTreeMap<i64, Vec<RawEvent>> {
    let mut out: BTreeMap<i64, Vec<RawEvent>> = BTreeMap::new();
    for range in ranges {
        let from = calls.partition_point(|c| c.start < range.start);
        let mut span: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        for c in calls[from..].iter().take_while(|c| c.start <= range.end) {
            if c.end > range.end {
                continue;
            }
            let s = span.entry(c.device).or_insert((c.gpu_start, c.gpu_end));
            s.0 = s.0.min(c.gpu_start);
            s.1 = s.1.max(c.gpu_end);
        }
        for (device, (start, end)) in span {
            out.entry(device).or_default().push(RawEvent {
                start,
                end,
                ..*range
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::index::Source;
    use super::*;

    fn range(start: i64, end: i64, rowid: i64) -> RawEvent {
        RawEvent {
            start,
            end,
            name: 0,
            source: Source::Nvtx,
            rowid,
        }
    }

    fn call(start: i64, end: i64, device: i64, gpu: (i64, i64)) -> Call {
        Call {
            start,
            end,
            device,
            gpu_start: gpu.0,
            gpu_end: gpu.1,
        }
    }

    #[test]
    fn a_range_projects_the_work_its_calls_launched_per_device() {
        let calls = [
            call(10, 12, 0, (100, 150)),
            call(20, 22, 0, (160, 300)),
            call(25, 27, 1, (170, 180)),
            // Ends after the outer range: not its call.
            call(95, 105, 0, (400, 500)),
        ];
        let ranges = [range(0, 100, 1), range(15, 30, 2), range(40, 50, 3)];
        let p = project(&ranges, &calls);
        let on0: Vec<(i64, i64, i64)> = p[&0].iter().map(|e| (e.rowid, e.start, e.end)).collect();
        assert_eq!(on0, vec![(1, 100, 300), (2, 160, 300)]);
        let on1: Vec<(i64, i64, i64)> = p[&1].iter().map(|e| (e.rowid, e.start, e.end)).collect();
        assert_eq!(on1, vec![(1, 170, 180), (2, 170, 180)]);
    }
}
