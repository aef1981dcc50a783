-- Oracle for cuda_gpu_kern_sum, run in current SQLite (rusqlite's, tests/common) (tests/recipe_oracle.rs), written
-- independently of the recipe: the statistics are computed here in SQL.
-- Only events wholly inside [:lo, :hi] (the test sets both; the full range when unfiltered).
-- The test puts the kernel name column (demangledName, shortName or mangledName) in place of
-- the placeholder in the first coalesce() below.
-- Output: pct10, avg10, med10, sd10 are the rounded values times ten, as integers.
WITH k AS (
    SELECT k."end" - k.start AS dur,
           coalesce((SELECT value FROM StringIds WHERE id = k.NAME_COLUMN),
                    (SELECT value FROM StringIds WHERE id = k.demangledName),
                    '') AS name
    FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
    WHERE k.start IS NOT NULL AND k."end" IS NOT NULL
      AND k.start >= :lo AND k."end" <= :hi
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
-- Sums of deviations from an integer near the mean: no cancellation in s2 - s1*s1/n.
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
