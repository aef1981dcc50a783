-- Oracle for um_sum, run in current SQLite (rusqlite's, tests/common), written independently
-- of the recipe: per virtual address (with a value; every address any of the three tables
-- names), the CPU page faults (rows), the GPU page faults (numberOfPageFaults summed), and the
-- Unified Memory migrations (copyKind 11 host to device, 12 device to host): bytes, and the
-- throughput (both sides' bytes) * (1000000000 / (both sides' time)) with an integer
-- division, NULL for a zero time. Sizes and throughput in MB (and MB/s) to three decimals.
WITH addrs(a) AS (
    SELECT address FROM CUDA_UM_CPU_PAGE_FAULT_EVENTS WHERE address IS NOT NULL
    UNION SELECT address FROM CUDA_UM_GPU_PAGE_FAULT_EVENTS WHERE address IS NOT NULL
    UNION SELECT virtualAddress FROM CUPTI_ACTIVITY_KIND_MEMCPY
          WHERE copyKind IN (11, 12) AND virtualAddress IS NOT NULL
),
per AS (
    SELECT a,
           NULLIF((SELECT count(*) FROM CUDA_UM_CPU_PAGE_FAULT_EVENTS WHERE address = a), 0)
               AS cpu,
           (SELECT sum(numberOfPageFaults) FROM CUDA_UM_GPU_PAGE_FAULT_EVENTS WHERE address = a)
               AS gpu,
           (SELECT sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY
             WHERE copyKind = 11 AND virtualAddress = a) AS hb,
           (SELECT sum("end" - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY
             WHERE copyKind = 11 AND virtualAddress = a) AS ht,
           (SELECT sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY
             WHERE copyKind = 12 AND virtualAddress = a) AS db,
           (SELECT sum("end" - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY
             WHERE copyKind = 12 AND virtualAddress = a) AS dt
    FROM addrs
),
tput AS (
    SELECT *,
           CASE WHEN hb IS NULL AND db IS NULL THEN NULL
                ELSE (coalesce(hb, 0) + coalesce(db, 0))
                     * (1000000000 / (coalesce(ht, 0) + coalesce(dt, 0)))
           END AS bps
    FROM per
)
SELECT a AS address, round(hb / 1e6, 3) AS htod_mb, round(db / 1e6, 3) AS dtoh_mb, cpu, gpu,
       round(bps / 1e6, 3) AS mbps
FROM tput
ORDER BY bps IS NULL, bps DESC, a;
