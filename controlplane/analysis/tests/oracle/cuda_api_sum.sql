-- Oracle for cuda_api_sum, run in current SQLite (rusqlite's, tests/common) (tests/recipe_oracle.rs), written
-- independently of the recipe: the statistics are computed here in SQL.
-- Only events wholly inside [:lo, :hi] (the test sets both; the full range when unfiltered).
-- Calls grouped by nameId, CUDA backtrace rows (eventClass 67) excluded, the name shown
-- without a trailing `_v` and exactly four characters (NVIDIA's rule). Ties: Total, then nameId
-- (NVIDIA's SQL groups by nameId and orders by Total only). pct10, avg10, med10, sd10: rounded
-- values times ten.
WITH r AS (
    SELECT r."end" - r.start AS dur, r.nameId AS nid,
           coalesce((SELECT value FROM StringIds WHERE id = r.nameId), '') AS raw
    FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r
    WHERE r.eventClass IS NOT 67
      AND r.start IS NOT NULL AND r."end" IS NOT NULL AND r.nameId IS NOT NULL
      AND r.start >= :lo AND r."end" <= :hi
),
ranked AS (
    SELECT nid, dur,
           row_number() OVER (PARTITION BY nid ORDER BY dur) AS rn,
           count(*) OVER (PARTITION BY nid) AS n
    FROM r
),
med AS (
    SELECT nid, avg(dur) AS med FROM ranked
    WHERE rn IN ((n + 1) / 2, (n + 2) / 2)
    GROUP BY nid
),
g AS (
    SELECT nid, min(raw) AS raw, sum(dur) AS total, count(*) AS num, avg(dur) AS mean,
           min(dur) AS mn, max(dur) AS mx, CAST(avg(dur) AS INTEGER) AS pivot
    FROM r GROUP BY nid
),
named AS (
    SELECT g.*,
           CASE WHEN length(raw) >= 6 AND substr(raw, -6, 2) = '_v'
                THEN substr(raw, 1, length(raw) - 6)
                ELSE raw
           END AS name
    FROM g
),
dev AS (
    SELECT g.nid, total(r.dur - g.pivot) AS s1,
           total((r.dur - g.pivot) * (r.dur - g.pivot)) AS s2
    FROM r JOIN g USING (nid) GROUP BY g.nid
),
grand AS (SELECT sum(total) AS t FROM g)
SELECT CAST(round(round(n.total * 100.0 / (SELECT t FROM grand), 1) * 10) AS INTEGER) AS pct10,
       n.total AS total,
       n.num AS num,
       CAST(round(round(n.mean, 1) * 10) AS INTEGER) AS avg10,
       CAST(round(round(med.med, 1) * 10) AS INTEGER) AS med10,
       n.mn AS min,
       n.mx AS max,
       CAST(round(round(CASE WHEN n.num < 2 THEN 0.0
                             ELSE sqrt(max(dev.s2 - dev.s1 * dev.s1 / n.num, 0.0) / (n.num - 1))
                        END, 1) * 10) AS INTEGER) AS sd10,
       n.name AS name
FROM named AS n JOIN med USING (nid) JOIN dev USING (nid)
ORDER BY n.total DESC, n.nid ASC;
