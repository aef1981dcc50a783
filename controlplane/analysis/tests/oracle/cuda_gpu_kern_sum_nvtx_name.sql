-- Oracle for cuda_gpu_kern_sum --name nvtx-name[:base|:mangled], run in current SQLite (rusqlite's, tests/common)
-- (tests/oracle/kern_nvtx_name.rs), written independently of the recipe.
-- Each kernel's name gets the text of the innermost NVTX push/pop range around the CUDA API
-- call that launched it, as '<range>:<kernel>': the call is the runtime row with the same
-- correlationId in the same process (@CALLS@: event class 67 left out when the column exists),
-- the earliest by (start, end); the range is on the call's thread with start <= call.start and
-- end >= call.end, the latest start, then the earliest end, then the smallest text.
-- The test fills NAME_COLUMN (as in cuda_gpu_kern_sum.sql), @PUSHPOP@ (the push/pop event
-- types), @TEXT@ (the range text over NVTX_EVENTS AS e) and @CALLS@.
-- Only kernels wholly inside [:lo, :hi]. Output as cuda_gpu_kern_sum.sql.
WITH calls AS (
    SELECT r.globalTid AS tid, r.start AS s, r."end" AS e,
           r.globalTid / 16777216 % 16777216 AS pid, r.correlationId AS corr,
           row_number() OVER (PARTITION BY r.globalTid / 16777216 % 16777216, r.correlationId
                              ORDER BY r.start, r."end", r.globalTid) AS rn
    FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r
    WHERE @CALLS@ AND r.start IS NOT NULL AND r."end" IS NOT NULL AND r.globalTid IS NOT NULL
      AND r.correlationId IS NOT NULL
),
ranges AS (
    SELECT e.globalTid AS tid, e.start AS s, e."end" AS e, coalesce(@TEXT@, '') AS text
    FROM NVTX_EVENTS AS e
    WHERE e.eventType IN (@PUSHPOP@) AND e."end" IS NOT NULL
),
k0 AS (
    SELECT k."end" - k.start AS dur,
           coalesce((SELECT value FROM StringIds WHERE id = k.NAME_COLUMN),
                    (SELECT value FROM StringIds WHERE id = k.demangledName),
                    '') AS kname,
           c.tid AS tid, c.s AS cs, c.e AS ce
    FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
    LEFT JOIN calls AS c
      ON c.rn = 1 AND c.pid = k.globalPid / 16777216 % 16777216 AND c.corr = k.correlationId
    WHERE k.start IS NOT NULL AND k."end" IS NOT NULL
      AND k.start >= :lo AND k."end" <= :hi
),
k AS (
    SELECT dur,
           coalesce((SELECT r.text FROM ranges AS r
                     WHERE r.tid = k0.tid AND r.s <= k0.cs AND r.e >= k0.ce
                     ORDER BY r.s DESC, r.e ASC, r.text ASC LIMIT 1) || ':', '') || kname AS name
    FROM k0
),
ranked AS (
    SELECT name, dur,
           row_number() OVER (PARTITION BY name ORDER BY dur) AS rn,
           count(*) OVER (PARTITION BY name) AS n
    FROM k
),
med AS (
    SELECT name, avg(dur) AS med FROM ranked
    WHERE rn IN ((n + 1) / 2, (n + 2) / 2)
    GROUP BY name
),
g AS (
    SELECT name, sum(dur) AS total, count(*) AS num, avg(dur) AS mean,
           min(dur) AS mn, max(dur) AS mx, CAST(avg(dur) AS INTEGER) AS pivot
    FROM k GROUP BY name
),
dev AS (
    SELECT g.name, total(k.dur - g.pivot) AS s1,
           total((k.dur - g.pivot) * (k.dur - g.pivot)) AS s2
    FROM k JOIN g USING (name) GROUP BY g.name
),
grand AS (SELECT sum(total) AS t FROM g)
SELECT CAST(round(round(g.total * 100.0 / (SELECT t FROM grand), 1) * 10) AS INTEGER) AS pct10,
       g.total AS total,
       g.num AS num,
       CAST(round(round(g.mean, 1) * 10) AS INTEGER) AS avg10,
       CAST(round(round(med.med, 1) * 10) AS INTEGER) AS med10,
       g.mn AS min,
       g.mx AS max,
       CAST(round(round(CASE WHEN g.num < 2 THEN 0.0
                             ELSE sqrt(max(dev.s2 - dev.s1 * dev.s1 / g.num, 0.0) / (g.num - 1))
                        END, 1) * 10) AS INTEGER) AS sd10,
       g.name AS name
FROM g JOIN med USING (name) JOIN dev USING (name)
-- NVIDIA's order: ORDER BY total DESC, count, name.
ORDER BY g.total DESC, g.num ASC, g.name ASC;
