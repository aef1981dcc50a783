-- Oracle for cuda_gpu_kern_pace's statistics table (tests/oracle/kern_pace.rs): the test puts
-- the CTEs of the iteration oracle (cuda_gpu_kern_pace.sql, up to its `pace`) in front.
-- Median by row_number(), standard deviation (n - 1) from sums of deviations from an integer
-- near the mean; avg10, med10, sd10 are the values rounded to one decimal, times ten, as
-- integers.
, v AS (
    SELECT 'Duration' AS measure, 0 AS ord, dur AS x FROM pace
    UNION ALL
    SELECT 'Gap', 1, gap FROM pace WHERE gap IS NOT NULL
),
ranked AS (
    SELECT measure, x,
           row_number() OVER (PARTITION BY measure ORDER BY x) AS rn,
           count(*) OVER (PARTITION BY measure) AS n
    FROM v
),
med AS (
    SELECT measure, avg(x) AS med FROM ranked
    WHERE rn IN ((n + 1) / 2, (n + 2) / 2)
    GROUP BY measure
),
g AS (
    SELECT measure, min(ord) AS ord, count(*) AS num, avg(x) AS mean, min(x) AS mn,
           max(x) AS mx, CAST(avg(x) AS INTEGER) AS pivot
    FROM v GROUP BY measure
),
dev AS (
    SELECT g.measure, total(v.x - g.pivot) AS s1,
           total((v.x - g.pivot) * (v.x - g.pivot)) AS s2
    FROM v JOIN g USING (measure) GROUP BY g.measure
)
SELECT g.measure AS measure,
       g.num AS num,
       CAST(round(round(g.mean, 1) * 10) AS INTEGER) AS avg10,
       CAST(round(round(med.med, 1) * 10) AS INTEGER) AS med10,
       g.mn AS min,
       g.mx AS max,
       CAST(round(round(CASE WHEN g.num < 2 THEN 0.0
                             ELSE sqrt(max(dev.s2 - dev.s1 * dev.s1 / g.num, 0.0) / (g.num - 1))
                        END, 1) * 10) AS INTEGER) AS sd10
FROM g JOIN med USING (measure) JOIN dev USING (measure)
ORDER BY g.ord
