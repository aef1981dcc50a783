-- Oracle for nvtx_pace's iteration table, run in current SQLite (rusqlite's, tests/common) by
-- tests/oracle/nvtx_pace.rs, written independently of the recipe. The test fills in @TYPES@
-- (a query of the range event type ids: push/pop and start/end, from ENUM_NSYS_EVENT_TYPE or
-- nsys's numbers) and @TEXT@ (the range text expression over `e`). :name is the range text;
-- only ranges with an end wholly inside [:lo, :hi]. The statistics oracle
-- (cuda_gpu_kern_pace_stats.sql) continues these CTEs in place of the last line.
WITH inst AS (
    SELECT e.rowid AS rid, e.start AS start, e."end" AS fin,
           e.globalTid / 16777216 % 16777216 AS pid, e.globalTid % 16777216 AS tid,
           e.domainId AS domain
    FROM NVTX_EVENTS AS e
    WHERE e.eventType IN (@TYPES@)
      AND e.start IS NOT NULL AND e."end" IS NOT NULL
      AND @TEXT@ = :name
      AND e.start >= :lo AND e."end" <= :hi
),
seq AS (
    SELECT row_number() OVER w - 1 AS it, start, fin, fin - start AS dur,
           start - lag(fin) OVER w AS gap, pid, tid, domain
    FROM inst
    WINDOW w AS (ORDER BY start, fin, rid)
),
pace AS (
    SELECT it, start, fin, dur, gap,
           coalesce(sum(gap) OVER (ORDER BY it ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
                    0) AS accum,
           pid, tid, domain
    FROM seq
)
SELECT * FROM pace ORDER BY it
