-- Oracle for cuda_gpu_trace, run in current SQLite (rusqlite's, tests/common), written
-- independently of the recipe: NVIDIA's union of kernels, memcpys and memsets in SQL. The test
-- fills in @EVENTS@ (one SELECT per table the report has, NULL for columns it lacks), @COPY@
-- (rows (id, name): '[CUDA memcpy ' || ENUM_CUDA_MEMCPY_OPER.label || ']', or the older names
-- written out), @KINDS@ (rows (id, label): ENUM_CUDA_MEM_KIND or nsys's labels written out) and
-- @GPUS@ (rows (id, name): TARGET_INFO_GPU's first row per id, or none). Events wholly inside
-- [:lo, :hi].
WITH copy(id, name) AS (@COPY@),
kinds(id, label) AS (@KINDS@),
gpus(id, name) AS (@GPUS@),
events(src, rid, start, dur, corr, gx, gy, gz, bx, by, bz, regs, ssmem, dsmem, bytes,
       srckind, dstkind, dev, ctx, green, strm, name) AS (@EVENTS@)
SELECT start, dur, corr, gx, gy, gz, bx, by, bz, regs,
       round(ssmem / 1e6, 3) AS ssmem_mb,
       round(dsmem / 1e6, 3) AS dsmem_mb,
       round(bytes / 1e6, 3) AS bytes_mb,
       CASE WHEN bytes IS NULL OR dur = 0 THEN NULL
            ELSE round(bytes * (1000000000 / dur) / 1e6, 3)
       END AS mbps,
       (SELECT label FROM kinds WHERE id = srckind) AS srckind,
       (SELECT label FROM kinds WHERE id = dstkind) AS dstkind,
       printf('%s (%d)', (SELECT name FROM gpus WHERE id = dev), dev) AS device,
       ctx, NULLIF(green, 0) AS green, strm, name
FROM events
WHERE start >= :lo AND start + dur <= :hi
-- NVIDIA's ORDER BY start; ties in union order (kernels, memcpys, memsets), then rowid.
ORDER BY start, src, rid;
