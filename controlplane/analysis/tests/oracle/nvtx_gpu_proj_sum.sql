-- Oracle for nvtx_gpu_proj_sum, run in current SQLite (rusqlite's, tests/common), written
-- independently of the recipe from NVIDIA's documented definition: a GPU operation belongs to
-- every NVTX range (ending on its own thread) on the thread of the CUDA API call that launched
-- it with start <= call start and end >= call end; a range's projection runs from its first
-- operation's start to its last one's end. Ranges as in nvtx_kern_sum.sql (an open range lasts
-- until the latest start or end of any range). Level: how many other ranges of the thread
-- contain the range (of two equal intervals the lower rowid contains the other); children: the
-- ranges it contains one level down. The test fills in @OPS@: rows (start, "end",
-- correlationId, globalPid) of the kernel, memcpy and memset tables the report has. Operations
-- wholly inside [:lo, :hi]. avg10, med10, sd10: rounded values times ten.
WITH mm AS (
    SELECT max(max(start), max("end")) AS mx FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71)
),
created AS (
    SELECT domainId AS id, (globalTid >> 24) & 0xFFFFFF AS pid,
           coalesce((SELECT value FROM StringIds WHERE id = textId), text) AS name,
           row_number() OVER (PARTITION BY domainId, (globalTid >> 24) & 0xFFFFFF
                              ORDER BY start) AS rn
    FROM NVTX_EVENTS WHERE eventType = 75
),
ranges AS MATERIALIZED (
    SELECT e.rowid AS rid, e.start AS rs, coalesce(e."end", (SELECT mx FROM mm)) AS re,
           e.globalTid AS gtid,
           coalesce(d.name, '') || ':'
               || coalesce((SELECT value FROM StringIds WHERE id = e.textId), e.text, '') AS name,
           CASE WHEN e.eventType IN (59, 70) THEN 'PushPop' ELSE 'StartEnd' END AS style
    FROM NVTX_EVENTS AS e
    LEFT JOIN created AS d
      ON d.rn = 1 AND d.id = e.domainId AND d.pid = (e.globalTid >> 24) & 0xFFFFFF
    WHERE e.eventType IN (59, 60, 70, 71) AND e.endGlobalTid IS NULL
),
ops(start, "end", correlationId, globalPid) AS (@OPS@),
calls AS MATERIALIZED (
    SELECT r.globalTid AS gtid, r.start AS cs, r."end" AS ce, o.start AS os, o."end" AS oe
    FROM ops AS o
    JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
      ON o.correlationId = r.correlationId
     AND o.globalPid = (r.globalTid & 0xFFFFFFFFFF000000)
     AND r.eventClass IS NOT 67
    WHERE o.start >= :lo AND o."end" <= :hi
),
proj AS (
    SELECT rg.rid, min(c.os) AS ps, max(c.oe) AS pe, count(*) AS ops
    FROM ranges AS rg
    JOIN calls AS c ON c.gtid = rg.gtid AND rg.rs <= c.cs AND rg.re >= c.ce
    GROUP BY rg.rid
),
contains AS MATERIALIZED (
    SELECT p.rid AS parent, c.rid AS child
    FROM ranges AS p JOIN ranges AS c
      ON c.gtid = p.gtid AND c.rid <> p.rid AND p.rs <= c.rs AND p.re >= c.re
     AND NOT (p.rs = c.rs AND p.re = c.re AND p.rid > c.rid)
),
lvl AS (
    SELECT r.rid, (SELECT count(*) FROM contains WHERE child = r.rid) AS lvl FROM ranges AS r
),
kids AS (
    SELECT r.rid,
           (SELECT count(*) FROM contains AS x
              JOIN lvl AS lc ON lc.rid = x.child
             WHERE x.parent = r.rid AND lc.lvl = l.lvl + 1) AS kids
    FROM ranges AS r JOIN lvl AS l USING (rid)
),
pr AS (
    SELECT rg.name, rg.style, p.pe - p.ps AS dur, rg.re - rg.rs AS rdur, p.ops, l.lvl, k.kids
    FROM proj AS p JOIN ranges AS rg USING (rid) JOIN lvl AS l USING (rid) JOIN kids AS k USING (rid)
),
ranked AS (
    SELECT name, style, dur,
           row_number() OVER (PARTITION BY name, style ORDER BY dur) AS rn,
           count(*) OVER (PARTITION BY name, style) AS n
    FROM pr
),
med AS (
    SELECT name, style, avg(dur) AS med FROM ranked
    WHERE rn IN ((n + 1) / 2, (n + 2) / 2) GROUP BY name, style
),
g AS (
    SELECT name, style, sum(dur) AS total, sum(rdur) AS rtotal, count(*) AS num,
           avg(dur) AS mean, min(dur) AS mn, max(dur) AS mx, CAST(avg(dur) AS INTEGER) AS pivot,
           sum(ops) AS ops, sum(lvl) AS lvls, sum(kids) AS kids
    FROM pr GROUP BY name, style
),
deviations AS (
    SELECT g.name, g.style, total(pr.dur - g.pivot) AS s1,
           total((pr.dur - g.pivot) * (pr.dur - g.pivot)) AS s2
    FROM pr JOIN g USING (name, style) GROUP BY g.name, g.style
)
SELECT g.name, g.style, g.total, g.rtotal, g.num,
       CAST(round(round(g.mean, 1) * 10) AS INTEGER) AS avg10,
       CAST(round(round(med.med, 1) * 10) AS INTEGER) AS med10,
       g.mn AS min, g.mx AS max,
       CAST(round(round(CASE WHEN g.num < 2 THEN 0.0
                             ELSE sqrt(max(d.s2 - d.s1 * d.s1 / g.num, 0.0) / (g.num - 1))
                        END, 1) * 10) AS INTEGER) AS sd10,
       g.ops,
       round(g.ops * 1.0 / g.num, 1) AS avg_ops,
       round(g.lvls * 1.0 / g.num, 1) AS avg_lvl,
       round(g.kids * 1.0 / g.num, 1) AS avg_kids
FROM g JOIN med USING (name, style) JOIN deviations AS d USING (name, style)
ORDER BY g.total DESC, g.name, g.style;
