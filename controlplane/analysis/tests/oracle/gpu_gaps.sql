-- Oracle for gpu_gaps, run in current SQLite (rusqlite's, tests/common) (tests/oracle/timeline.rs), written
-- independently of the recipe: the gaps are found here with a window function.
-- The test puts the GPU operations the report has in place of @OPS@ (rows of globalPid,
-- deviceId, start, end from the kernel, memcpy and memset tables).
-- Parameters: :lo/:hi (only operations wholly inside), :gap (milliseconds).
-- A gap: an operation that starts after the latest end of the operations before it (by start,
-- then end) of the same (PID, device); longer than :gap ms. Longest first.
WITH ops(globalPid, deviceId, start, "end") AS (@OPS@),
o AS (
    SELECT globalPid / 16777216 % 16777216 AS pid, deviceId AS dev, start AS s, "end" AS e
    FROM ops
    WHERE start IS NOT NULL AND "end" IS NOT NULL AND deviceId IS NOT NULL
      AND globalPid IS NOT NULL AND start >= :lo AND "end" <= :hi
),
w AS (
    SELECT pid, dev, s,
           max(e) OVER (PARTITION BY pid, dev ORDER BY s, e
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev
    FROM o
)
SELECT pid, dev AS device, prev AS start, s AS "end", s - prev AS dur
FROM w
WHERE prev IS NOT NULL AND s > prev AND s - prev > :gap * 1000000.0
ORDER BY dur DESC, pid, dev, prev;
