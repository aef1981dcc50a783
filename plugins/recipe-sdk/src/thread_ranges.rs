//! The NVTX ranges of a report that can hold a CUDA API call, per thread, for `nvtx_kern_sum`
//! and `nvtx_gpu_proj_sum`: push/pop and start/end ranges that end on the thread they started
//! on (`endGlobalTid` NULL), named `<domain>:<text>` and styled `PushPop`/`StartEnd` by the
//! `nvtx` rules. A range without an end lasts until the latest start or end of any range
//! (NVIDIA's rule in `nvtx_kern_sum`). This module answers "which ranges contain this call"
//! and how ranges nest; it knows nothing about kernels.

use std::collections::HashMap;

use crate::{
    nvtx::{Domains, EventTypes, NvtxSql, NVTX_TABLE},
    Schema, Value,
};

/// One range: its rowid, start, end and interned name and style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub id: i64,
    pub start: i64,
    pub end: i64,
    /// Index into [`ThreadRanges::labels`].
    pub label: usize,
}

#[derive(Debug, Default)]
struct Thread {
    /// By start.
    ranges: Vec<Range>,
    /// `max_end[i]`: the latest end among `ranges[..=i]`.
    max_end: Vec<i64>,
}

/// The ranges by thread (`globalTid`), with (name, style) interned.
#[derive(Debug, Default)]
pub struct ThreadRanges {
    threads: HashMap<i64, Thread>,
    /// (range name, style).
    pub labels: Vec<(String, &'static str)>,
}

impl ThreadRanges {
    /// Reads every range; `columns` are those of `NVTX_EVENTS`.
    pub fn read(schema: &Schema<'_>, columns: &[String], strings: bool) -> Result<Self, String> {
        let report = schema.report();
        let types = EventTypes::read(schema)?;
        let sql = NvtxSql::new(columns, strings);
        let domains = Domains::read(report, &types, &sql)?;
        let same_thread = if columns.iter().any(|c| c == "endGlobalTid") {
            "e.endGlobalTid IS NULL"
        } else {
            "1"
        };
        let q = format!(
            "SELECT e.rowid, e.start, e.\"end\", e.eventType, {}, {}, {} FROM {NVTX_TABLE} AS e {} \
             WHERE e.eventType IN ({}) AND {same_thread}",
            sql.domain,
            sql.tid,
            sql.text,
            sql.join,
            types.range_list()
        );
        let mut me = Self::default();
        let mut ids: HashMap<(String, &'static str), usize> = HashMap::new();
        let mut open: Vec<(i64, usize)> = Vec::new();
        let mut latest = i64::MIN;
        report.query(&q, &[], &mut |row| {
            let [Value::Int(id), Value::Int(start), end, Value::Int(kind), domain, tid, text] = row
            else {
                return Ok(());
            };
            let tid = tid.as_int().unwrap_or(0);
            let domain = domains
                .name(domain.as_int().unwrap_or(0), tid)
                .unwrap_or_default();
            let style = if types.push_pop.contains(kind) {
                "PushPop"
            } else {
                "StartEnd"
            };
            let name = format!("{domain}:{}", text.as_text().unwrap_or_default());
            let next = ids.len();
            let label = *ids.entry((name.clone(), style)).or_insert(next);
            if label == next {
                me.labels.push((name, style));
            }
            latest = latest.max(*start);
            let end = match end.as_int() {
                Some(e) => {
                    latest = latest.max(e);
                    e
                }
                None => {
                    open.push((tid, me.count(tid)));
                    i64::MIN
                }
            };
            me.threads.entry(tid).or_default().ranges.push(Range {
                id: *id,
                start: *start,
                end,
                label,
            });
            Ok(())
        })?;
        for (tid, i) in open {
            if let Some(t) = me.threads.get_mut(&tid) {
                t.ranges[i].end = latest;
            }
        }
        me.index();
        Ok(me)
    }

    fn count(&self, tid: i64) -> usize {
        self.threads.get(&tid).map_or(0, |t| t.ranges.len())
    }

    /// Sorts each thread's ranges by start and computes the running maximum of their ends.
    fn index(&mut self) {
        for thread in self.threads.values_mut() {
            thread
                .ranges
                .sort_unstable_by_key(|r| (r.start, r.end, r.id));
            let mut m = i64::MIN;
            thread.max_end = thread
                .ranges
                .iter()
                .map(|r| {
                    m = m.max(r.end);
                    m
                })
                .collect();
        }
    }

    /// Every thread (`globalTid`) with its ranges, by start.
    pub fn threads(&self) -> impl Iterator<Item = (i64, &[Range])> + '_ {
        self.threads
            .iter()
            .map(|(tid, t)| (*tid, t.ranges.as_slice()))
    }

    /// Every range on thread `tid` with `start <= from` and `end >= to`.
    pub fn containing(&self, tid: i64, from: i64, to: i64) -> impl Iterator<Item = Range> + '_ {
        let thread = self.threads.get(&tid);
        let last = thread.map_or(0, |t| t.ranges.partition_point(|r| r.start <= from));
        (0..last)
            .rev()
            // Below an index whose running maximum end is before `to`, no range reaches it.
            .take_while(move |&i| thread.is_some_and(|t| t.max_end[i] >= to))
            .filter_map(move |i| thread.map(|t| t.ranges[i]))
            .filter(move |r| r.end >= to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(r: &[(i64, i64, i64)]) -> ThreadRanges {
        let mut me = ThreadRanges::default();
        for (id, &(tid, start, end)) in r.iter().enumerate() {
            me.threads.entry(tid).or_default().ranges.push(Range {
                id: id as i64,
                start,
                end,
                label: 0,
            });
        }
        me.index();
        me
    }

    #[test]
    fn every_range_around_the_call_on_its_thread_contains_it() {
        let r = ranges(&[
            (1, 0, 100),
            (1, 10, 50),
            (1, 60, 70),
            (1, 10, 40),
            (2, 0, 100),
        ]);
        let ids = |tid, from, to| {
            let mut v: Vec<i64> = r.containing(tid, from, to).map(|x| x.id).collect();
            v.sort_unstable();
            v
        };
        assert_eq!(ids(1, 20, 30), [0, 1, 3]);
        assert_eq!(ids(1, 45, 50), [0, 1]);
        assert_eq!(ids(1, 65, 70), [0, 2]);
        assert_eq!(ids(1, 90, 110), Vec::<i64>::new());
        assert_eq!(ids(2, 0, 100), [4]);
        assert_eq!(ids(3, 1, 2), Vec::<i64>::new());
        // Bounds are inclusive.
        assert_eq!(ids(1, 0, 100), [0]);
    }
}
