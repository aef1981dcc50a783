-- Oracle for nccl_sum's table of NCCL functions, run in current SQLite (rusqlite's,
-- tests/common) by tests/oracle/nccl.rs, written independently of the recipe: the statistics
-- are computed here in SQL. Only ranges wholly inside [:lo, :hi] (the full clock unfiltered).
-- NCCL's NVTX ranges: push/pop or start/end ranges (event types 59/70, 60/71) with an end, in
-- a domain whose name (the text of the earliest NvtxDomainCreate, type 75, of that domainId in
-- that process) is 'NCCL', or, in a non-default domain with no such event, whose text starts
-- with 'nccl' (case-sensitive). Grouped by text. pct10, avg10, med10, sd10: rounded values
-- times ten. Rows by total descending, then count ascending, then name.
WITH dom AS (
    SELECT e.domainId AS did, e.globalTid / 16777216 % 16777216 AS pid,
           coalesce((SELECT value FROM StringIds WHERE id = e.textId), e.text) AS dname,
           row_number() OVER (PARTITION BY e.domainId, e.globalTid / 16777216 % 16777216
                              ORDER BY e.start) AS rn
    FROM NVTX_EVENTS AS e
    WHERE e.eventType = 75
),
named AS (
    SELECT e."end" - e.start AS dur, coalesce(e.domainId, 0) AS did, d.dname,
           coalesce((SELECT value FROM StringIds WHERE id = e.textId), e.text, '') AS name
    FROM NVTX_EVENTS AS e
    LEFT JOIN dom AS d
        ON d.did = coalesce(e.domainId, 0)
       AND d.pid = coalesce(e.globalTid, 0) / 16777216 % 16777216
       AND d.rn = 1
    WHERE e.eventType IN (59, 60, 70, 71) AND e.start IS NOT NULL AND e."end" IS NOT NULL
      AND e.start >= :lo AND e."end" <= :hi
),
r AS (
    SELECT dur, name FROM named
    WHERE dname = 'NCCL' OR (dname IS NULL AND did <> 0 AND substr(name, 1, 4) = 'nccl')
),
ranked AS (
    SELECT name, dur,
           row_number() OVER (PARTITION BY name ORDER BY dur) AS rn,
           count(*) OVER (PARTITION BY name) AS n
    FROM r
),
med AS (
    SELECT name, avg(dur) AS med FROM ranked
    WHERE rn IN ((n + 1) / 2, (n + 2) / 2)
    GROUP BY name
),
g AS (
    SELECT name, sum(dur) AS total, count(*) AS num, avg(dur) AS mean,
           min(dur) AS mn, max(dur) AS mx, CAST(avg(dur) AS INTEGER) AS pivot
    FROM r GROUP BY name
),
dev AS (
    SELECT g.name, total(r.dur - g.pivot) AS s1,
           total((r.dur - g.pivot) * (r.dur - g.pivot)) AS s2
    FROM r JOIN g USING (name) GROUP BY g.name
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
