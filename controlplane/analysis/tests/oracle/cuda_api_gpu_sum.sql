-- Oracle for cuda_api_gpu_sum, run in current SQLite (rusqlite's, tests/common), written
-- independently of the recipe: the statistics are computed here in SQL. The test fills in
-- @OPS@: rows (category, name, dur) of what the report has: CUDA API calls as CUDA_API (backtrace
-- rows, eventClass 67, left out; the name without a trailing `_v` and four characters), kernels
-- as CUDA_KERNEL (demangled names), memcpys ('[CUDA memcpy ' || label || ']', or the older names
-- written out) and memsets ('[CUDA memset]') as MEMORY_OPER. Events wholly inside [:lo, :hi].
-- pct10, avg10, med10, sd10: rounded values times ten.
WITH r(category, name, dur) AS (@OPS@),
ranked AS (
    SELECT category, name, dur,
           row_number() OVER (PARTITION BY category, name ORDER BY dur) AS rn,
           count(*) OVER (PARTITION BY category, name) AS n
    FROM r
),
med AS (
    SELECT category, name, avg(dur) AS med FROM ranked
    WHERE rn IN ((n + 1) / 2, (n + 2) / 2)
    GROUP BY category, name
),
g AS (
    SELECT category, name, sum(dur) AS total, count(*) AS num, avg(dur) AS mean,
           min(dur) AS mn, max(dur) AS mx, CAST(avg(dur) AS INTEGER) AS pivot
    FROM r GROUP BY category, name
),
dev AS (
    SELECT g.category, g.name, total(r.dur - g.pivot) AS s1,
           total((r.dur - g.pivot) * (r.dur - g.pivot)) AS s2
    FROM r JOIN g USING (category, name) GROUP BY g.category, g.name
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
       g.category AS category,
       g.name AS name
FROM g JOIN med USING (category, name) JOIN dev USING (category, name)
-- NVIDIA's SQL orders by Total only, over rows grouped by name.
ORDER BY g.total DESC, g.name, g.category;
