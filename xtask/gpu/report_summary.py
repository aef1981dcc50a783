"""The GPU check's look at one SQLite report (the agent's or nsys's): row counts of the GPU
tables, the devices, and the agent's CUPTI notes. Standard library only.

    python3 report_summary.py REPORT.sqlite
"""
import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
counts = []
for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
          "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS"):
    if t in tables:
        counts.append(f"{t.replace('CUPTI_ACTIVITY_KIND_', '')}={db.execute(f'SELECT count(*) FROM {t}').fetchone()[0]}")
print("  rows:", " ".join(counts))
if "TARGET_INFO_GPU" in tables:
    for row in db.execute("SELECT id, name, uuid, totalMemory, smCount, computeMajor, computeMinor FROM TARGET_INFO_GPU"):
        print("  gpu:", row)
if "META_DATA_EXPORT" in tables:
    for name, value in db.execute("SELECT name, value FROM META_DATA_EXPORT WHERE name LIKE 'NSIGHT_%'"):
        print(f"  {name}: {value}")
if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
    for row in db.execute(
        "SELECT s.value, count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN StringIds s ON s.id = k.shortName GROUP BY 1 ORDER BY 3 DESC LIMIT 4"
    ):
        print("  kernel:", row)
if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables and "NVTX_EVENTS" in tables:
    # The API rows' threads against the NVTX rows': the same thread ids when both are gettid's.
    api = {r[0] for r in db.execute("SELECT DISTINCT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME")}
    nvtx = {r[0] for r in db.execute("SELECT DISTINCT globalTid FROM NVTX_EVENTS")}
    print(f"  threads: api {len(api)}, nvtx {len(nvtx)}, shared {len(api & nvtx)}")
    first = db.execute("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    nfirst = db.execute("SELECT min(start) FROM NVTX_EVENTS").fetchone()[0]
    print(f"  first api call {first}, first nvtx event {nfirst}")
