"""The GPU check's user: waits for one agent, runs COLLECTIONS START/STOP collections of SECONDS
each through the coordinator's REST API, and prints each collection's per-agent outcome and the
agent's diagnostics. Standard library only (the GPU machine has no nsight-cloud CLI).

    python3 coordinate.py http://127.0.0.1:18080 COLLECTIONS SECONDS [FIRST_DELAY]

FIRST_DELAY: seconds to wait after the agent registers (the program's start-up, e.g. importing
PyTorch and initialising CUDA) before the first START.
"""
import json
import sys
import time
import urllib.request

base, collections, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
first_delay = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0


def call(path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


deadline = time.time() + 60
agents = []
while time.time() < deadline:
    agents = [a for a in call("/v1/status").get("agents", []) if a.get("connected")]
    if agents:
        break
    time.sleep(0.2)
if not agents:
    sys.exit("no agent registered in 60 s")
print("agent:", json.dumps(agents[0].get("info", {}).get("backend")), "diagnostics:",
      json.dumps(agents[0].get("info", {}).get("diagnostics", agents[0].get("diagnostics"))))
time.sleep(first_delay)
session = None
for n in range(1, collections + 1):
    started = call("/v1/start", {"tag": "default"})
    session = started.get("session", session)
    time.sleep(seconds)
    call("/v1/stop", {"tag": "default"})
    outcome = None
    end = time.time() + 90
    while time.time() < end:
        s = call(f"/v1/sessions/{session}")
        col = next((c for c in s.get("collections", []) if c.get("id") == n), None)
        agents_out = list((col or {}).get("agents", {}).values())
        if agents_out and agents_out[0].get("state") not in ("pending", "started", "stopSent", "stop_sent"):
            outcome = agents_out[0]
            break
        time.sleep(0.3)
    print(f"collection {n}:", json.dumps(outcome), flush=True)
