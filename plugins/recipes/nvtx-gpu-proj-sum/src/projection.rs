//! Projection of NVTX ranges onto the GPU: every GPU operation (kernel, memcpy, memset) with
//! the CUDA API call that launched it (same `correlationId`, same process; backtrace rows are
//! no calls), and for each range around that call on its thread, the earliest start and latest
//! end of the operations it launched; plus how ranges nest. Reads rows; builds no table.

use std::collections::HashMap;

use nsight_recipe_sdk::{
    memops::{MEMCPY_TABLE, MEMSET_TABLE},
    thread_ranges::ThreadRanges,
    Output, Schema, Value, Window,
};

pub const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
pub const RUNTIME: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";
/// The tables of GPU operations, each optional.
pub const GPU_TABLES: [&str; 3] = [KERNEL, MEMCPY_TABLE, MEMSET_TABLE];

/// What a range projects to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Projected {
    pub start: i64,
    pub end: i64,
    pub ops: u64,
}

/// The projection of every range (by range id) that launched at least one GPU operation
/// inside `window` (the operation wholly inside).
pub fn project(
    schema: &Schema<'_>,
    ranges: &ThreadRanges,
    has_class: bool,
    window: &Window,
    out: &mut Output,
) -> Result<HashMap<i64, Projected>, String> {
    let not_backtrace = if has_class {
        "AND r.eventClass IS NOT 67"
    } else {
        ""
    };
    let mut projected: HashMap<i64, Projected> = HashMap::new();
    for table in GPU_TABLES {
        let Some(_) = schema.require(
            out,
            table,
            &["start", "end", "correlationId", "globalPid"],
            "its GPU operations are not projected",
        ) else {
            continue;
        };
        let sql = format!(
            "SELECT r.globalTid, r.start, r.\"end\", o.start, o.\"end\" \
             FROM {table} AS o JOIN {RUNTIME} AS r \
               ON o.correlationId = r.correlationId \
              AND o.globalPid = (r.globalTid & -16777216) {not_backtrace} \
             WHERE {}",
            window.sql("o")
        );
        schema.report().query(&sql, &[], &mut |row| {
            let int = |i: usize| row.get(i).and_then(Value::as_int);
            let (Some(tid), Some(call_start), Some(call_end), Some(start), Some(end)) =
                (int(0), int(1), int(2), int(3), int(4))
            else {
                return Ok(());
            };
            for range in ranges.containing(tid, call_start, call_end) {
                projected
                    .entry(range.id)
                    .and_modify(|p| {
                        p.start = p.start.min(start);
                        p.end = p.end.max(end);
                        p.ops += 1;
                    })
                    .or_insert(Projected { start, end, ops: 1 });
            }
            Ok(())
        })?;
    }
    Ok(projected)
}

/// Each range's stack level and number of children, by range id. A range's level is how many
/// other ranges on its thread contain it (start <= its start, end >= its end; of two equal
/// intervals the one with the lower id contains the other); its children are the ranges it
/// contains whose level is one more than its own.
pub fn nesting(ranges: &ThreadRanges) -> HashMap<i64, (u64, u64)> {
    let mut levels: HashMap<i64, u64> = HashMap::new();
    let mut containers: Vec<(i64, Vec<i64>)> = Vec::new();
    for (tid, thread) in ranges.threads() {
        for r in thread {
            let around: Vec<i64> = ranges
                .containing(tid, r.start, r.end)
                .filter(|c| c.id != r.id && !(c.start == r.start && c.end == r.end && c.id > r.id))
                .map(|c| c.id)
                .collect();
            levels.insert(r.id, around.len() as u64);
            containers.push((r.id, around));
        }
    }
    let mut children: HashMap<i64, u64> = HashMap::new();
    let level_of = |id: &i64| levels.get(id).copied().unwrap_or(0);
    for (id, around) in &containers {
        let level = level_of(id);
        for c in around {
            if level_of(c) + 1 == level {
                *children.entry(*c).or_default() += 1;
            }
        }
    }
    levels
        .into_iter()
        .map(|(id, level)| (id, (level, children.get(&id).copied().unwrap_or(0))))
        .collect()
}
