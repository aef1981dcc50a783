-- Oracle for nvtx_sum, run in current SQLite (rusqlite's, tests/common) (tests/recipe_oracle.rs), written
-- independently of the recipe: the statistics are computed here in SQL.
-- Only events wholly inside [:lo, :hi] (the test sets both; the full range when unfiltered).
-- Ranges (event types 59/70 push-pop, 60/71 start-end) with an end, grouped by style and
-- "<domain>:<text>"; the domain name comes from the earliest NvtxDomainCreate (75) of the same
-- domainId in the same process, else ''. pct10, avg10, med10, sd10: rounded values times ten.
WITH dom AS (
    SELECT e.domainId AS did, e.globalTid / 16777216 % 16777216 AS pid,
           coalesce((SELECT value FROM StringIds WHERE id = e.textId), e.text) AS name,
           row_number() OVER (PARTITION BY e.domainId, e.globalTid / 16777216 % 16777216
                              ORDER BY e.start) AS rn
    FROM NVTX_EVENTS AS e
    WHERE e.eventType = 75
),
r AS (
    SELECT e."end" - e.start AS dur,
           CASE WHEN e.eventType IN (59, 70) THEN 'PushPop' ELSE 'StartEnd' END AS style,
           coalesce(d.name, '') || ':' ||
               coalesce((SELECT value FROM StringIds WHERE id = e.textId), e.text, '') AS name
    FROM NVTX_EVENTS AS e
    LEFT JOIN dom AS d
        ON d.did = coalesce(e.domainId, 0)
       AND d.pid = coalesce(e.globalTid, 0) / 16777216 % 16777216
       AND d.rn = 1
    WHERE e.eventType IN (59, 60, 70, 71) AND e.start IS NOT NULL AND e."end" IS NOT NULL
      AND e.start >= :lo AND e."end" <= :hi
),
ranked AS (
    SELECT style, name, dur,
           row_number() OVER (PARTITION BY style, name ORDER BY dur) AS rn,
           count(*) OVER (PARTITION BY style, name) AS n
    FROM r
),
med AS (
    SELECT style, name, avg(dur) AS med FROM ranked
    WHERE rn IN ((n + 1) / 2, (n + 2) / 2)
    GROUP BY style, name
),
g AS (
    SELECT style, name, sum(dur) AS total, count(*) AS num, avg(dur) AS mean,
           min(dur) AS mn, max(dur) AS mx, CAST(avg(dur) AS INTEGER) AS pivot
    FROM r GROUP BY style, name
),
dev AS (
    SELECT g.style, g.name, total(r.dur - g.pivot) AS s1,
           total((r.dur - g.pivot) * (r.dur - g.pivot)) AS s2
    FROM r JOIN g USING (style, name) GROUP BY g.style, g.name
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
       g.style AS style,
       g.name AS name
FROM g JOIN med USING (style, name) JOIN dev USING (style, name)
ORDER BY g.total DESC, g.num DESC, g.name ASC, g.style ASC;
