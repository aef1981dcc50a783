//! The NVTX range a kernel was launched in (`cuda_gpu_kern_sum --name nvtx-name`):
//!
//! ```text
//!  kernel (globalPid, correlationId) ──LaunchCalls──> CUDA API call (globalTid, start, end)
//!        ──PushPopRanges::innermost──> text of the innermost push/pop range around the call
//! ```
//!
//! - The launch call is the `CUPTI_ACTIVITY_KIND_RUNTIME` row with the same `correlationId` in
//!   the same process (PID of `globalTid` = PID of the kernel's `globalPid`), leaving out rows
//!   of event class 67 (backtraces in older exports); the earliest (by start, end) if several.
//! - The innermost range is the `NVTX_EVENTS` push/pop range (with an end) on the call's thread
//!   with `start <= call.start` and `end >= call.end`: the latest start, then the earliest end,
//!   then the smallest text (byte order). Its text is `StringIds[textId]`, else `text`, else
//!   empty.

use std::collections::HashMap;

use crate::{
    nvtx::{pid, EventTypes, NvtxSql, NVTX_TABLE},
    Output, Schema, Value,
};

pub const RUNTIME_TABLE: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";

/// A CUDA API call on the CPU: thread, start, end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Call {
    pub start: i64,
    pub end: i64,
    pub tid: i64,
}

/// CUDA API calls by (PID, correlationId).
#[derive(Debug, Clone, Default)]
pub struct LaunchCalls(HashMap<(i64, i64), Call>);

impl LaunchCalls {
    /// Reads the runtime calls; `None` with a note when the table or a column is missing.
    pub fn read(schema: &Schema<'_>, out: &mut Output) -> Result<Option<Self>, String> {
        let why = "--name nvtx-name needs the CUDA API calls that launched the kernels; \
                   kernels are not prefixed";
        let Some(columns) = schema.require(
            out,
            RUNTIME_TABLE,
            &["start", "end", "globalTid", "correlationId"],
            why,
        ) else {
            return Ok(None);
        };
        let class = if columns.iter().any(|c| c == "eventClass") {
            "r.eventClass IS NOT 67"
        } else {
            "1"
        };
        let mut calls: HashMap<(i64, i64), Call> = HashMap::new();
        schema.report().query(
            &format!(
                "SELECT r.globalTid, r.correlationId, r.start, r.\"end\" FROM {RUNTIME_TABLE} \
                 AS r WHERE {class}"
            ),
            &[],
            &mut |row| {
                if let [Value::Int(t), Value::Int(c), Value::Int(s), Value::Int(e)] = row {
                    let call = Call {
                        start: *s,
                        end: *e,
                        tid: *t,
                    };
                    calls
                        .entry((pid(*t), *c))
                        .and_modify(|have| *have = (*have).min(call))
                        .or_insert(call);
                }
                Ok(())
            },
        )?;
        Ok(Some(Self(calls)))
    }

    /// The call with `correlation_id` in the process of `global_pid`.
    pub fn get(&self, global_pid: i64, correlation_id: i64) -> Option<Call> {
        self.0.get(&(pid(global_pid), correlation_id)).copied()
    }
}

/// One thread's push/pop ranges sorted by (start, end descending, text descending), with the
/// running maximum of their ends (to stop a backward search early).
#[derive(Debug, Clone, Default)]
struct Thread {
    ranges: Vec<(i64, i64, usize)>,
    max_end: Vec<i64>,
}

/// The push/pop ranges of a report by thread, with their texts interned.
#[derive(Debug, Clone, Default)]
pub struct PushPopRanges {
    threads: HashMap<i64, Thread>,
    texts: Vec<String>,
}

impl PushPopRanges {
    /// Reads the push/pop ranges; `None` with a note when there is no NVTX table.
    pub fn read(schema: &Schema<'_>, out: &mut Output) -> Result<Option<Self>, String> {
        let Some(columns) = schema.require(
            out,
            NVTX_TABLE,
            &["start", "end", "eventType", "globalTid"],
            "--name nvtx-name needs NVTX ranges; kernels are not prefixed",
        ) else {
            return Ok(None);
        };
        let types = EventTypes::read(schema)?;
        let sql = NvtxSql::new(&columns, schema.has_table("StringIds"));
        let list: Vec<String> = types.push_pop.iter().map(i64::to_string).collect();
        let q = format!(
            "SELECT e.globalTid, e.start, e.\"end\", coalesce({}, '') FROM {NVTX_TABLE} AS e {} \
             WHERE e.eventType IN ({}) AND e.\"end\" IS NOT NULL",
            sql.text,
            sql.join,
            list.join(",")
        );
        let mut me = Self::default();
        let mut ids: HashMap<String, usize> = HashMap::new();
        schema.report().query(&q, &[], &mut |row| {
            if let [Value::Int(t), Value::Int(s), Value::Int(e), Value::Text(text)] = row {
                let next = ids.len();
                let id = *ids.entry(text.clone()).or_insert(next);
                if id == next {
                    me.texts.push(text.clone());
                }
                me.threads.entry(*t).or_default().ranges.push((*s, *e, id));
            }
            Ok(())
        })?;
        me.index();
        Ok(Some(me))
    }

    /// Sorts each thread's ranges and computes the running maximum of their ends.
    fn index(&mut self) {
        let texts = &self.texts;
        for thread in self.threads.values_mut() {
            thread.ranges.sort_unstable_by(|a, b| {
                a.0.cmp(&b.0)
                    .then(b.1.cmp(&a.1))
                    .then_with(|| texts[b.2].cmp(&texts[a.2]))
            });
            let mut m = i64::MIN;
            thread.max_end = thread
                .ranges
                .iter()
                .map(|r| {
                    m = m.max(r.1);
                    m
                })
                .collect();
        }
    }

    /// The text of the innermost range around `call` on its thread, if any.
    pub fn innermost(&self, call: Call) -> Option<&str> {
        let t = self.threads.get(&call.tid)?;
        // Ranges that start by call.start, searched from the latest start backwards.
        let mut i = t.ranges.partition_point(|r| r.0 <= call.start);
        while i > 0 {
            i -= 1;
            if t.max_end[i] < call.end {
                return None;
            }
            let (_, end, text) = t.ranges[i];
            if end >= call.end {
                return Some(&self.texts[text]);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(r: &[(i64, i64, i64, &str)]) -> PushPopRanges {
        let mut me = PushPopRanges::default();
        for &(tid, s, e, text) in r {
            me.texts.push(text.to_owned());
            let id = me.texts.len() - 1;
            me.threads.entry(tid).or_default().ranges.push((s, e, id));
        }
        me.index();
        me
    }

    #[test]
    fn the_innermost_range_on_the_calls_thread_wins() {
        let r = ranges(&[
            (1, 0, 100, "outer"),
            (1, 10, 50, "inner"),
            (1, 60, 70, "sibling"),
            (1, 10, 40, "b"),
            (1, 10, 40, "a"),
            (2, 0, 100, "other thread"),
        ]);
        let call = |tid, start, end| Call { start, end, tid };
        assert_eq!(r.innermost(call(1, 20, 30)), Some("a"));
        assert_eq!(r.innermost(call(1, 45, 50)), Some("inner"));
        assert_eq!(r.innermost(call(1, 75, 80)), Some("outer"));
        assert_eq!(r.innermost(call(1, 90, 110)), None);
        assert_eq!(r.innermost(call(2, 1, 2)), Some("other thread"));
        assert_eq!(r.innermost(call(3, 1, 2)), None);
    }
}
