-- Oracle for gpu_time_util, run in current SQLite (rusqlite's, tests/common) (tests/oracle/timeline.rs), written
-- independently of the recipe: the parts and their kernel time are computed here in SQL.
-- Parameters: :lo/:hi (only kernels wholly inside), :chunks, :threshold (percent).
-- Per (PID, device): the span [first start, last end] is cut at s + i * span / chunks
-- (integer division); each part's busy time is the sum of its overlaps with the kernels.
-- Parts of zero length are left out. Output: use10 is In Use (%) rounded to one decimal,
-- times ten, as an integer.
WITH k AS (
    SELECT globalPid / 16777216 % 16777216 AS pid, deviceId AS dev, start AS s, "end" AS e
    FROM CUPTI_ACTIVITY_KIND_KERNEL
    WHERE start IS NOT NULL AND "end" IS NOT NULL AND deviceId IS NOT NULL
      AND globalPid IS NOT NULL AND start >= :lo AND "end" <= :hi
),
span AS (SELECT pid, dev, min(s) AS s0, max(e) - min(s) AS d FROM k GROUP BY pid, dev),
idx(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM idx WHERE i + 1 < :chunks),
parts AS (
    SELECT pid, dev, i, s0 + i * d / :chunks AS cs, s0 + (i + 1) * d / :chunks AS ce
    FROM span, idx
),
busy AS (
    SELECT p.pid, p.dev, p.i, p.cs, p.ce,
           coalesce(sum(min(k.e, p.ce) - max(k.s, p.cs)), 0) AS b
    FROM parts AS p
    LEFT JOIN k ON k.pid = p.pid AND k.dev = p.dev AND k.s < p.ce AND k.e > p.cs
    WHERE p.ce > p.cs
    GROUP BY p.pid, p.dev, p.i
)
SELECT pid, dev AS device, i AS chunk, cs AS start, ce AS "end", ce - cs AS dur,
       CAST(round(round(b * 100.0 / (ce - cs), 1) * 10) AS INTEGER) AS use10
FROM busy
WHERE b * 100.0 / (ce - cs) < :threshold
ORDER BY pid, dev, i;
