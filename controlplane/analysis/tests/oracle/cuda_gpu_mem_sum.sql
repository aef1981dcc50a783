-- Oracle for cuda_gpu_mem_time_sum and cuda_gpu_mem_size_sum, run in current SQLite (rusqlite's, tests/common)
-- (tests/recipe_oracle.rs), written independently of the recipes: the statistics are computed
-- here in SQL. The test fills in three placeholders for the report at hand:
--   @LABELS@ rows (id, name): '[CUDA memcpy ' || ENUM_CUDA_MEMCPY_OPER.label || ']', or, for
--           exports without that table, CUPTI's numbers written out in the test (1 HtoD, ...);
--   @OPS@    rows (name, start, "end", bytes): memcpy rows joined to @LABELS@, UNION ALL memset
--           rows named '[CUDA memset]' (each part only when the report has its table);
--   @VALUE@  dur ("end" - start) for the time summary, bytes for the size summary.
-- Operations wholly inside [:lo, :hi]. pct10, avg10, med10, sd10: rounded values times ten;
-- *_mb: the size summary's values.
WITH labels(id, name) AS (@LABELS@),
ops(name, start, "end", bytes) AS (@OPS@),
r AS (
    SELECT name, @VALUE@ AS val
    FROM (SELECT name, "end" - start AS dur, bytes FROM ops
          WHERE start IS NOT NULL AND "end" IS NOT NULL AND bytes IS NOT NULL
            AND start >= :lo AND "end" <= :hi)
),
ranked AS (
    SELECT name, val,
           row_number() OVER (PARTITION BY name ORDER BY val) AS rn,
           count(*) OVER (PARTITION BY name) AS n
    FROM r
),
med AS (
    SELECT name, avg(val) AS med FROM ranked
    WHERE rn IN ((n + 1) / 2, (n + 2) / 2)
    GROUP BY name
),
g AS (
    SELECT name, sum(val) AS total, count(*) AS num, avg(val) AS mean,
           min(val) AS mn, max(val) AS mx, CAST(avg(val) AS INTEGER) AS pivot
    FROM r GROUP BY name
),
dev AS (
    SELECT g.name, total(r.val - g.pivot) AS s1,
           total((r.val - g.pivot) * (r.val - g.pivot)) AS s2
    FROM r JOIN g USING (name) GROUP BY g.name
),
grand AS (SELECT sum(total) AS t FROM g),
s AS (
    SELECT g.*, med.med AS med,
           CASE WHEN g.num < 2 THEN 0.0
                ELSE sqrt(max(dev.s2 - dev.s1 * dev.s1 / g.num, 0.0) / (g.num - 1))
           END AS sd
    FROM g JOIN med USING (name) JOIN dev USING (name)
)
SELECT CAST(round(round(total * 100.0 / (SELECT t FROM grand), 1) * 10) AS INTEGER) AS pct10,
       total,
       num,
       CAST(round(round(mean, 1) * 10) AS INTEGER) AS avg10,
       CAST(round(round(med, 1) * 10) AS INTEGER) AS med10,
       mn AS min,
       mx AS max,
       CAST(round(round(sd, 1) * 10) AS INTEGER) AS sd10,
       -- The size summary: each statistic in MB (1e6 bytes), rounded to three decimals.
       round(total / 1e6, 3) AS total_mb,
       round(mean / 1e6, 3) AS avg_mb,
       round(med / 1e6, 3) AS med_mb,
       round(mn / 1e6, 3) AS min_mb,
       round(mx / 1e6, 3) AS max_mb,
       round(sd / 1e6, 3) AS sd_mb,
       name
FROM s
-- NVIDIA's SQL orders by Total only, over rows grouped by name.
ORDER BY total DESC, name ASC;
