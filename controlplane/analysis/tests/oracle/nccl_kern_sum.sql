-- Oracle for nccl_sum's table of NCCL kernels (nccl_kern_sum), run in current SQLite
-- (rusqlite's, tests/common) by tests/oracle/nccl.rs, written independently of the recipe.
-- Kernels wholly inside [:lo, :hi] whose short name (StringIds[shortName], else the demangled
-- name) starts with 'nccl' (case-sensitive), grouped by the name column the test puts in place
-- of NAME_COLUMN (the demangled name where it is NULL). pct10, avg10, med10, sd10: rounded
-- values times ten. Rows by total descending, then count ascending, then name.
WITH k AS (
    SELECT k."end" - k.start AS dur,
           coalesce((SELECT value FROM StringIds WHERE id = k.NAME_COLUMN),
                    (SELECT value FROM StringIds WHERE id = k.demangledName),
                    '') AS name
    FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
    WHERE k.start IS NOT NULL AND k."end" IS NOT NULL
      AND k.start >= :lo AND k."end" <= :hi
      AND substr(coalesce((SELECT value FROM StringIds WHERE id = k.shortName),
                          (SELECT value FROM StringIds WHERE id = k.demangledName)), 1, 4) = 'nccl'
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
SELECT CASE WHEN (SELECT t FROM grand) = 0 THEN NULL
            ELSE CAST(round(round(g.total * 100.0 / (SELECT t FROM grand), 1) * 10) AS INTEGER)
       END AS pct10,
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
ORDER BY g.total DESC, g.num ASC, g.name ASC;
