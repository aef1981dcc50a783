-- Oracle for diff, run in current SQLite (rusqlite's, tests/common) on report A with report B attached as `b`
-- (tests/recipe_diff.rs), written independently of the recipe: both sides' kernel statistics
-- and the join are computed here in SQL.
-- The part before the join marker line (two @ signs) is a template for one side's statistics: the test
-- writes it twice, with @DB@ = main and @X@ = a for report A, @DB@ = b and @X@ = b for report B,
-- and NAME_COLUMN = the kernel name column (demangledName, shortName or mangledName).
-- Output: *10 columns are the one-decimal values times ten, as integers.
@X@_k AS (
    SELECT k."end" - k.start AS dur,
           coalesce((SELECT value FROM @DB@.StringIds WHERE id = k.NAME_COLUMN),
                    (SELECT value FROM @DB@.StringIds WHERE id = k.demangledName),
                    '') AS name
    FROM @DB@.CUPTI_ACTIVITY_KIND_KERNEL AS k
    WHERE k.start IS NOT NULL AND k."end" IS NOT NULL
),
@X@_ranked AS (
    SELECT name, dur,
           row_number() OVER (PARTITION BY name ORDER BY dur) AS rn,
           count(*) OVER (PARTITION BY name) AS n
    FROM @X@_k
),
@X@_med AS (
    SELECT name, avg(dur) AS med FROM @X@_ranked
    WHERE rn IN ((n + 1) / 2, (n + 2) / 2)
    GROUP BY name
),
@X@_g AS (
    SELECT name, sum(dur) AS total, count(*) AS num, avg(dur) AS mean,
           min(dur) AS mn, max(dur) AS mx, CAST(avg(dur) AS INTEGER) AS pivot
    FROM @X@_k GROUP BY name
),
@X@_dev AS (
    SELECT g.name, total(k.dur - g.pivot) AS s1,
           total((k.dur - g.pivot) * (k.dur - g.pivot)) AS s2
    FROM @X@_k AS k JOIN @X@_g AS g USING (name) GROUP BY g.name
),
@X@ AS (
    SELECT g.name AS name, g.total AS total, g.num AS num,
           CAST(round(round(g.mean, 1) * 10) AS INTEGER) AS avg10,
           CAST(round(round(med.med, 1) * 10) AS INTEGER) AS med10,
           g.mn AS mn, g.mx AS mx,
           CAST(round(round(CASE WHEN g.num < 2 THEN 0.0
                                 ELSE sqrt(max(dev.s2 - dev.s1 * dev.s1 / g.num, 0.0) / (g.num - 1))
                            END, 1) * 10) AS INTEGER) AS sd10
    FROM @X@_g AS g JOIN @X@_med AS med USING (name) JOIN @X@_dev AS dev USING (name)
)
-- @@ join
SELECT a.total AS a_total, b.total AS b_total, b.total - a.total AS d_total,
       CASE WHEN a.total <> 0
            THEN CAST(round(round((b.total - a.total) * 100.0 / a.total, 1) * 10) AS INTEGER)
       END AS pct10,
       a.num AS a_num, b.num AS b_num, b.num - a.num AS d_num,
       a.avg10 AS a_avg10, b.avg10 AS b_avg10, b.avg10 - a.avg10 AS d_avg10,
       a.med10 AS a_med10, b.med10 AS b_med10, b.med10 - a.med10 AS d_med10,
       a.mn AS a_min, b.mn AS b_min, b.mn - a.mn AS d_min,
       a.mx AS a_max, b.mx AS b_max, b.mx - a.mx AS d_max,
       a.sd10 AS a_sd10, b.sd10 AS b_sd10, b.sd10 - a.sd10 AS d_sd10,
       CASE WHEN a.name IS NOT NULL AND b.name IS NOT NULL THEN 'both'
            WHEN a.name IS NOT NULL THEN 'A only'
            ELSE 'B only' END AS side,
       coalesce(a.name, b.name) AS name
FROM a FULL OUTER JOIN b ON a.name = b.name
ORDER BY abs(coalesce(b.total, 0) - coalesce(a.total, 0)) DESC, coalesce(a.name, b.name) ASC;
