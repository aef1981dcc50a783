-- Oracle for cuda_gpu_kern_hist, run in current SQLite (rusqlite's, tests/common) (tests/oracle/timeline.rs), written
-- independently of the recipe: binning and shares are computed here in SQL.
-- Parameters: :lo/:hi (only kernels wholly inside; the whole clock when unfiltered), :bins.
-- With r = max - min there are b = min(:bins, r) bins (1 when r = 0). Bin of a duration d:
-- (d - min) * b / r in integers, the longest in the last bin. Bin i holds the integers
-- min + ceil(i * r / b) .. min + ceil((i + 1) * r / b) - 1 (the last one up to max).
-- Output: pct10 is the share rounded to one decimal, times ten, as an integer.
WITH k AS (
    SELECT "end" - start AS dur FROM CUPTI_ACTIVITY_KIND_KERNEL
    WHERE start IS NOT NULL AND "end" IS NOT NULL AND start >= :lo AND "end" <= :hi
),
nb AS (
    SELECT min(dur) AS mn, max(dur) AS mx, max(dur) - min(dur) AS r, count(*) AS n,
           CASE WHEN max(dur) = min(dur) THEN 1 ELSE min(:bins, max(dur) - min(dur)) END AS b
    FROM k HAVING count(*) > 0
),
idx(i) AS (
    SELECT 0 UNION ALL SELECT i + 1 FROM idx WHERE i + 1 < (SELECT b FROM nb)
),
counts AS (
    SELECT CASE WHEN nb.r = 0 THEN 0 ELSE min((k.dur - nb.mn) * nb.b / nb.r, nb.b - 1) END AS i,
           count(*) AS c
    FROM k, nb GROUP BY 1
),
edges AS (
    SELECT idx.i,
           nb.mn + (idx.i * nb.r + nb.b - 1) / nb.b AS lo,
           CASE WHEN idx.i = nb.b - 1 THEN nb.mx
                ELSE nb.mn + ((idx.i + 1) * nb.r + nb.b - 1) / nb.b - 1 END AS hi,
           nb.n
    FROM idx, nb
)
SELECT edges.i AS bin, edges.lo AS min, edges.hi AS max,
       coalesce(counts.c, 0) AS num,
       CAST(round(round(coalesce(counts.c, 0) * 100.0 / edges.n, 1) * 10) AS INTEGER) AS pct10
FROM edges LEFT JOIN counts USING (i)
ORDER BY edges.i;
