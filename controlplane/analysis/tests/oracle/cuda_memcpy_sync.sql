-- Oracle for cuda_memcpy_sync, run in current SQLite (rusqlite's, tests/common), written
-- independently of the recipe from NVIDIA's description of the rule: copies made by a runtime
-- call named LIKE 'cudaMemcpy%' but not LIKE '%Async%' (joined by correlationId; backtrace
-- rows, eventClass 67, left out), except device-to-device copies (copyKind 8) within one
-- device (source and destination device equal, the copy's device where one is NULL) and
-- host-to-device copies (copyKind 1) of 65,536 bytes or less. Copies wholly inside [:lo, :hi].
-- The test fills in @KINDS@ and @GREEN@ as for cuda_memcpy_async.sql.
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
WHERE s.value LIKE 'cudaMemcpy%' AND s.value NOT LIKE '%Async%'
  AND NOT (m.copyKind = 8
           AND coalesce(m.srcDeviceId, m.deviceId) = coalesce(m.dstDeviceId, m.deviceId))
  AND NOT (m.copyKind = 1 AND m.bytes <= 65536)
  AND r.eventClass IS NOT 67
  AND m.start >= :lo AND m."end" <= :hi
ORDER BY dur DESC, start, (m.globalPid >> 24) & 0xFFFFFF, m.deviceId, m.streamId, api;
