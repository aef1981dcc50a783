-- Oracle for nvtx_kern_sum, run in current SQLite (rusqlite's, tests/common), written
-- independently of the recipe: NVIDIA's joins (kernel ⟕ launch call ⟕ every NVTX range on the
-- call's thread around the call) and the statistics in SQL. The test puts the kernel name
-- column in place of NAME_COLUMN. Event types as NVIDIA's report hard-codes them (59/70
-- push/pop, 60/71 start/end, 75 domain create); ranges ending on another thread left out; a
-- range without an end lasts until the latest start or end of any range; a domain's name is
-- its earliest create event's text in the process. CUDA backtrace rows (eventClass 67) are no
-- launch calls. Kernels wholly inside [:lo, :hi]. avg10, med10, sd10: rounded values times ten.
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
ranges AS (
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
combo AS (
    SELECT rg.name AS name, rg.style AS style, rg.rid AS nvtxid, k.rowid AS kernid,
           k."end" - k.start AS dur,
           (r.globalTid >> 24) & 0xFFFFFF AS pid, r.globalTid & 0xFFFFFF AS tid,
           coalesce((SELECT value FROM StringIds WHERE id = coalesce(k.NAME_COLUMN, k.demangledName)),
                    '') AS kern
    FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
    LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
      ON k.correlationId = r.correlationId
     AND k.globalPid = (r.globalTid & 0xFFFFFFFFFF000000)
     AND r.eventClass IS NOT 67
    LEFT JOIN ranges AS rg
      ON rg.gtid = r.globalTid AND rg.rs <= r.start AND rg.re >= r."end"
    WHERE k.start >= :lo AND k."end" <= :hi
),
-- NULL keys (no range, no call) group together: a dense rank names each group.
c AS (
    SELECT *, dense_rank() OVER (ORDER BY pid, tid, name, style, kern) AS grp FROM combo
),
ranked AS (
    SELECT grp, dur,
           row_number() OVER (PARTITION BY grp ORDER BY dur) AS rn,
           count(*) OVER (PARTITION BY grp) AS n
    FROM c
),
med AS (
    SELECT grp, avg(dur) AS med FROM ranked WHERE rn IN ((n + 1) / 2, (n + 2) / 2) GROUP BY grp
),
g AS (
    SELECT grp, min(name) AS name, min(style) AS style, min(pid) AS pid, min(tid) AS tid,
           min(kern) AS kern, count(DISTINCT nvtxid) AS nvtx_inst,
           count(DISTINCT kernid) AS kern_inst, sum(dur) AS total, count(*) AS num,
           avg(dur) AS mean, min(dur) AS mn, max(dur) AS mx, CAST(avg(dur) AS INTEGER) AS pivot
    FROM c GROUP BY grp
),
deviations AS (
    SELECT g.grp, total(c.dur - g.pivot) AS s1, total((c.dur - g.pivot) * (c.dur - g.pivot)) AS s2
    FROM c JOIN g USING (grp) GROUP BY g.grp
)
SELECT g.name, g.style, g.pid, g.tid, g.nvtx_inst, g.kern_inst, g.total,
       CAST(round(round(g.mean, 1) * 10) AS INTEGER) AS avg10,
       CAST(round(round(med.med, 1) * 10) AS INTEGER) AS med10,
       g.mn AS min, g.mx AS max,
       CAST(round(round(CASE WHEN g.num < 2 THEN 0.0
                             ELSE sqrt(max(d.s2 - d.s1 * d.s1 / g.num, 0.0) / (g.num - 1))
                        END, 1) * 10) AS INTEGER) AS sd10,
       g.kern
FROM g JOIN med USING (grp) JOIN deviations AS d USING (grp)
-- NVIDIA's ORDER BY 1, 3, 4, 7 DESC (range, PID, TID, total), then style and kernel.
ORDER BY g.name, g.pid, g.tid, g.total DESC, g.style, g.kern;
