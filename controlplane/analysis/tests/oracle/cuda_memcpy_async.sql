-- Oracle for cuda_memcpy_async, run in current SQLite (rusqlite's, tests/common), written
-- independently of the recipe: NVIDIA's rule query (memcpys with a pageable side, srcKind or
-- dstKind 0, joined by correlationId to a runtime call named LIKE 'cudaMemcpy%Async%'), CUDA
-- backtrace rows (eventClass 67) left out, copies wholly inside [:lo, :hi]. The test fills in
-- @KINDS@ (rows (id, label): ENUM_CUDA_MEM_KIND, or nsys's labels written out) and @GREEN@
-- (NULLIF(m.greenContextId, 0), or NULL for exports without the column).
WITH kinds(id, label) AS (@KINDS@)
SELECT m."end" - m.start AS dur,
       m.start AS start,
       src.label AS src,
       dst.label AS dst,
       round(m.bytes / 1e6, 3) AS mb,
       (m.globalPid >> 24) & 0xFFFFFF AS pid,
       m.deviceId AS device,
       m.contextId AS context,
       @GREEN@ AS green,
       m.streamId AS stream,
       s.value AS api
FROM CUPTI_ACTIVITY_KIND_MEMCPY AS m
JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.correlationId = m.correlationId
JOIN StringIds AS s ON s.id = r.nameId
LEFT JOIN kinds AS src ON src.id = m.srcKind
LEFT JOIN kinds AS dst ON dst.id = m.dstKind
WHERE (m.srcKind = 0 OR m.dstKind = 0)
  AND s.value LIKE 'cudaMemcpy%Async%'
  AND r.eventClass IS NOT 67
  AND m.start >= :lo AND m."end" <= :hi
-- NVIDIA's ORDER BY 1 DESC (duration); then start, PID, device, stream and API for ties.
ORDER BY dur DESC, start, (m.globalPid >> 24) & 0xFFFFFF, m.deviceId, m.streamId, api;
