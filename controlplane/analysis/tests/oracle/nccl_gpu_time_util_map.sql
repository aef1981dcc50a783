-- Oracle for nccl_gpu_time_util_map, run in current SQLite (rusqlite's, tests/common) by
-- tests/oracle/nccl.rs, written independently of the recipe. Parameters :lo, :hi (the window;
-- the whole clock unfiltered) and :bins.
-- Kernels wholly inside the window with a process and device; a kernel is NCCL's when its
-- short name (else its demangled name) starts with 'nccl' (case-sensitive), else compute.
-- Per (PID, device) and kind (all, nccl, compute) the kernels are merged into islands (gaps
-- and islands: a kernel starts a new island when it starts after the latest end before it);
-- overlap = the intersections of the NCCL and compute islands. The span from the first start
-- to the last end over all kernels is cut at s + i * (e - s) / :bins (integer division); each
-- bin's share covered by each kind, rounded to one decimal, times ten. No NCCL kernel: no rows.
WITH RECURSIVE k AS (
    SELECT k.globalPid / 16777216 % 16777216 AS pid, k.deviceId AS dev,
           k.start AS s, k."end" AS e,
           CASE WHEN substr(coalesce((SELECT value FROM StringIds WHERE id = k.shortName),
                                     (SELECT value FROM StringIds WHERE id = k.demangledName)),
                            1, 4) = 'nccl'
                THEN 'nccl' ELSE 'compute' END AS kind
    FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
    WHERE k.start IS NOT NULL AND k."end" IS NOT NULL
      AND k.deviceId IS NOT NULL AND k.globalPid IS NOT NULL
      AND k.start >= :lo AND k."end" <= :hi
),
tagged AS (
    SELECT pid, dev, s, e, 'all' AS cat FROM k
    UNION ALL
    SELECT pid, dev, s, e, kind FROM k
),
marked AS (
    SELECT pid, dev, cat, s, e,
           CASE WHEN s <= max(e) OVER (PARTITION BY pid, dev, cat ORDER BY s, e
                                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                THEN 0 ELSE 1 END AS fresh
    FROM tagged
    WHERE e > s
),
numbered AS (
    SELECT pid, dev, cat, s, e,
           sum(fresh) OVER (PARTITION BY pid, dev, cat ORDER BY s, e ROWS UNBOUNDED PRECEDING)
               AS island
    FROM marked
),
islands AS MATERIALIZED (
    SELECT pid, dev, cat, min(s) AS s, max(e) AS e FROM numbered GROUP BY pid, dev, cat, island
),
spans AS MATERIALIZED (
    SELECT pid, dev, cat, s, e FROM islands
    UNION ALL
    SELECT a.pid, a.dev, 'overlap', max(a.s, b.s), min(a.e, b.e)
    FROM islands AS a JOIN islands AS b
      ON a.pid = b.pid AND a.dev = b.dev AND a.cat = 'nccl' AND b.cat = 'compute'
     AND a.s < b.e AND b.s < a.e
),
span AS (SELECT min(s) AS s0, max(e) AS e0 FROM k),
idx(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM idx WHERE i + 1 < :bins),
bins AS (
    SELECT i, s0 + i * (e0 - s0) / :bins AS lo, s0 + (i + 1) * (e0 - s0) / :bins AS hi
    FROM idx, span
),
pd AS (SELECT DISTINCT pid, dev FROM k),
cats(cat) AS (VALUES ('all'), ('nccl'), ('compute'), ('overlap')),
cov AS (
    SELECT pd.pid, pd.dev, b.i, b.lo, b.hi, c.cat,
           coalesce((SELECT sum(min(x.e, b.hi) - max(x.s, b.lo)) FROM spans AS x
                     WHERE x.pid = pd.pid AND x.dev = pd.dev AND x.cat = c.cat
                       AND x.s < b.hi AND x.e > b.lo), 0) AS ns
    FROM pd, bins AS b, cats AS c
    WHERE b.hi > b.lo AND EXISTS (SELECT 1 FROM k WHERE kind = 'nccl')
)
SELECT pid, dev, i AS bin, lo AS start, hi AS "end",
       CAST(round(round(sum(CASE WHEN cat = 'all' THEN ns END) * 100.0 / (hi - lo), 1) * 10)
            AS INTEGER) AS all10,
       CAST(round(round(sum(CASE WHEN cat = 'nccl' THEN ns END) * 100.0 / (hi - lo), 1) * 10)
            AS INTEGER) AS nccl10,
       CAST(round(round(sum(CASE WHEN cat = 'compute' THEN ns END) * 100.0 / (hi - lo), 1) * 10)
            AS INTEGER) AS compute10,
       CAST(round(round(sum(CASE WHEN cat = 'overlap' THEN ns END) * 100.0 / (hi - lo), 1) * 10)
            AS INTEGER) AS overlap10
FROM cov
GROUP BY pid, dev, i
ORDER BY pid, dev, i;
