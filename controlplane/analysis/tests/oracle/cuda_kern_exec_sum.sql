-- Oracle for cuda_kern_exec_sum, run in current SQLite (rusqlite's, tests/common), written
-- independently of the recipe: the launches are joined and the statistics computed here in
-- SQL. The test puts the kernel name column (demangledName, shortName or mangledName) in place
-- of NAME_COLUMN. A launch is a kernel and the CUDA API call with its correlationId in the same
-- process (NVIDIA's join), CUDA backtrace rows (eventClass 67) left out, both wholly inside
-- [:lo, :hi]. Phases: T = call start to the later end, A = the call, Q = call end to kernel start
-- (only where >= 0), K = the kernel. *_avg10, *_med10, *_sd10: rounded values times ten.
WITH l AS (
    SELECT (r.globalTid >> 24) & 0xFFFFFF AS pid,
           r.globalTid & 0xFFFFFF AS tid,
           k.deviceId AS dev,
           CASE WHEN length(rn.value) >= 6 AND substr(rn.value, -6, 2) = '_v'
                THEN substr(rn.value, 1, length(rn.value) - 6)
                ELSE coalesce(rn.value, '')
           END AS api,
           coalesce((SELECT value FROM StringIds WHERE id = k.NAME_COLUMN),
                    (SELECT value FROM StringIds WHERE id = k.demangledName),
                    '') AS kern,
           r.start AS rs, r."end" AS re, k.start AS ks, k."end" AS ke
    FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
    JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
      ON k.correlationId = r.correlationId
     AND k.globalPid = (r.globalTid & 0xFFFFFFFFFF000000)
    LEFT JOIN StringIds AS rn ON rn.id = r.nameId
    WHERE r.eventClass IS NOT 67
      AND k.start >= :lo AND k."end" <= :hi AND r.start >= :lo AND r."end" <= :hi
),
v AS (
    SELECT pid, tid, dev, api, kern, 'T' AS phase, max(re, ke) - rs AS val FROM l
    UNION ALL SELECT pid, tid, dev, api, kern, 'A', re - rs FROM l
    UNION ALL SELECT pid, tid, dev, api, kern, 'Q', ks - re FROM l WHERE ks - re >= 0
    UNION ALL SELECT pid, tid, dev, api, kern, 'K', ke - ks FROM l
),
ranked AS (
    SELECT pid, tid, dev, api, kern, phase, val,
           row_number() OVER (PARTITION BY pid, tid, dev, api, kern, phase ORDER BY val) AS rn,
           count(*) OVER (PARTITION BY pid, tid, dev, api, kern, phase) AS n
    FROM v
),
med AS (
    SELECT pid, tid, dev, api, kern, phase, avg(val) AS med FROM ranked
    WHERE rn IN ((n + 1) / 2, (n + 2) / 2)
    GROUP BY pid, tid, dev, api, kern, phase
),
g AS (
    SELECT pid, tid, dev, api, kern, phase, count(*) AS num, avg(val) AS mean, min(val) AS mn, max(val) AS mx,
           CAST(avg(val) AS INTEGER) AS pivot
    FROM v GROUP BY pid, tid, dev, api, kern, phase
),
deviations AS (
    SELECT pid, tid, dev, api, kern, phase, total(v.val - g.pivot) AS s1,
           total((v.val - g.pivot) * (v.val - g.pivot)) AS s2
    FROM v JOIN g USING (pid, tid, dev, api, kern, phase) GROUP BY pid, tid, dev, api, kern, phase
),
s AS (
    SELECT g.*, med.med AS med,
           CASE WHEN num < 2 THEN 0.0
                ELSE sqrt(max(s2 - s1 * s1 / num, 0.0) / (num - 1))
           END AS sd
    FROM g JOIN med USING (pid, tid, dev, api, kern, phase) JOIN deviations USING (pid, tid, dev, api, kern, phase)
)
SELECT pid, tid, dev,
       max(CASE WHEN phase = 'T' THEN num END) AS count,
       coalesce(max(CASE WHEN phase = 'Q' THEN num END), 0) AS qcount,
       max(CASE WHEN phase = 'T' THEN CAST(round(round(mean, 1) * 10) AS INTEGER) END) AS t_avg10,
       max(CASE WHEN phase = 'T' THEN CAST(round(round(med, 1) * 10) AS INTEGER) END) AS t_med10,
       max(CASE WHEN phase = 'T' THEN mn END) AS t_min,
       max(CASE WHEN phase = 'T' THEN mx END) AS t_max,
       max(CASE WHEN phase = 'T' THEN CAST(round(round(sd, 1) * 10) AS INTEGER) END) AS t_sd10,
       max(CASE WHEN phase = 'A' THEN CAST(round(round(mean, 1) * 10) AS INTEGER) END) AS a_avg10,
       max(CASE WHEN phase = 'A' THEN CAST(round(round(med, 1) * 10) AS INTEGER) END) AS a_med10,
       max(CASE WHEN phase = 'A' THEN mn END) AS a_min,
       max(CASE WHEN phase = 'A' THEN mx END) AS a_max,
       max(CASE WHEN phase = 'A' THEN CAST(round(round(sd, 1) * 10) AS INTEGER) END) AS a_sd10,
       max(CASE WHEN phase = 'Q' THEN CAST(round(round(mean, 1) * 10) AS INTEGER) END) AS q_avg10,
       max(CASE WHEN phase = 'Q' THEN CAST(round(round(med, 1) * 10) AS INTEGER) END) AS q_med10,
       max(CASE WHEN phase = 'Q' THEN mn END) AS q_min,
       max(CASE WHEN phase = 'Q' THEN mx END) AS q_max,
       max(CASE WHEN phase = 'Q' THEN CAST(round(round(sd, 1) * 10) AS INTEGER) END) AS q_sd10,
       max(CASE WHEN phase = 'K' THEN CAST(round(round(mean, 1) * 10) AS INTEGER) END) AS k_avg10,
       max(CASE WHEN phase = 'K' THEN CAST(round(round(med, 1) * 10) AS INTEGER) END) AS k_med10,
       max(CASE WHEN phase = 'K' THEN mn END) AS k_min,
       max(CASE WHEN phase = 'K' THEN mx END) AS k_max,
       max(CASE WHEN phase = 'K' THEN CAST(round(round(sd, 1) * 10) AS INTEGER) END) AS k_sd10,
       api, kern
FROM s
GROUP BY pid, tid, dev, api, kern
-- NVIDIA's ORDER BY 6 DESC (the rounded TAvg) over rows grouped by these columns.
ORDER BY t_avg10 DESC, pid, tid, dev, api, kern;
