-- Oracle for osrt_sum, run in current SQLite (rusqlite's, tests/common) (tests/recipe_oracle.rs), written independently
-- of the recipe: the statistics are computed here in SQL.
-- OS runtime calls (OSRT_API rows of eventClass 27) wholly inside [:lo, :hi], grouped by
-- nameId and shown by name. pct10, avg10, med10, sd10: rounded values times ten.
WITH r AS (
    SELECT o."end" - o.start AS dur, o.nameId AS nid,
           coalesce((SELECT value FROM StringIds WHERE id = o.nameId), '') AS name
    FROM OSRT_API AS o
    WHERE o.eventClass = 27
      AND o.start IS NOT NULL AND o."end" IS NOT NULL AND o.nameId IS NOT NULL
      AND o.start >= :lo AND o."end" <= :hi
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
    SELECT nid, min(name) AS name, sum(dur) AS total, count(*) AS num, avg(dur) AS mean,
           min(dur) AS mn, max(dur) AS mx, CAST(avg(dur) AS INTEGER) AS pivot
    FROM r GROUP BY nid
),
dev AS (
    SELECT g.nid, total(r.dur - g.pivot) AS s1,
           total((r.dur - g.pivot) * (r.dur - g.pivot)) AS s2
    FROM r JOIN g USING (nid) GROUP BY g.nid
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
FROM g JOIN med USING (nid) JOIN dev USING (nid)
ORDER BY g.total DESC, g.nid ASC;
