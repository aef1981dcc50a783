-- Oracle for cuda_gpu_kern_pace's iteration table, run in current SQLite (rusqlite's,
-- tests/common) by tests/oracle/kern_pace.rs, written independently of the recipe: the order,
-- gaps and their running sum come from window functions here.
-- :name is the kernel name: the instances are the kernels whose demangled name is :name, or,
-- when no kernel has that demangled name, whose short name is. Only kernels wholly inside
-- [:lo, :hi] (the whole clock when unfiltered). The statistics oracle
-- (cuda_gpu_kern_pace_stats.sql) continues these CTEs in place of the last line.
WITH named AS (
    SELECT k.rowid AS rid, k.start AS start, k."end" AS fin,
           k.globalPid / 16777216 % 16777216 AS pid, k.deviceId AS device, k.streamId AS stream,
           (SELECT value FROM StringIds WHERE id = k.demangledName) AS dname,
           (SELECT value FROM StringIds WHERE id = k.shortName) AS sname
    FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
),
inst AS (
    SELECT * FROM named
    WHERE CASE WHEN EXISTS (SELECT 1 FROM named WHERE dname = :name) THEN dname ELSE sname END
          = :name
      AND start IS NOT NULL AND fin IS NOT NULL AND start >= :lo AND fin <= :hi
),
seq AS (
    SELECT row_number() OVER w - 1 AS it, start, fin, fin - start AS dur,
           start - lag(fin) OVER w AS gap, pid, device, stream
    FROM inst
    WINDOW w AS (ORDER BY start, fin, rid)
),
pace AS (
    SELECT it, start, fin, dur, gap,
           coalesce(sum(gap) OVER (ORDER BY it ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
                    0) AS accum,
           pid, device, stream
    FROM seq
)
SELECT * FROM pace ORDER BY it
