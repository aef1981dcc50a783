"""Reads a Perfetto trace with Perfetto's own schema (PyPI `perfetto`) and prints what it holds.

Used by tests/timeline_perfetto.rs as an oracle independent of our encoder: every packet is
parsed by `perfetto_trace_pb2.Trace`, slices are replayed per track (an END must close a
BEGIN on the same track, nothing may stay open), interned names are resolved, and flows are
matched. Prints one JSON object: tracks (uuid -> name, parent, slice count, slices as
[ts, dur, name] when asked), flows (ids seen on a launch and on the GPU work), errors.
"""

import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb


def main(path, keep_slices):
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    te = pb.TrackEvent
    tracks, names, open_, errors = {}, {}, {}, []
    flow_api, flow_gpu = {}, {}
    last_ts = 0
    for packet in trace.packet:
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            tracks[d.uuid] = {
                "name": d.name,
                "parent": d.parent_uuid if d.HasField("parent_uuid") else None,
                "slices": 0,
                "list": [],
            }
        for n in packet.interned_data.event_names:
            names[n.iid] = n.name
        if not packet.HasField("track_event"):
            continue
        e = packet.track_event
        ts = packet.timestamp
        if ts < last_ts:
            errors.append(f"timestamps go back: {ts} after {last_ts}")
        last_ts = ts
        if e.track_uuid not in tracks:
            errors.append(f"event on undeclared track {e.track_uuid}")
            continue
        stack = open_.setdefault(e.track_uuid, [])
        if e.type == te.TYPE_SLICE_BEGIN:
            if e.name_iid not in names:
                errors.append(f"name iid {e.name_iid} used before it was interned")
            stack.append((ts, names.get(e.name_iid, "")))
            for f in e.flow_ids:
                flow_api[f] = flow_api.get(f, 0) + 1
            for f in e.terminating_flow_ids:
                flow_gpu[f] = flow_gpu.get(f, 0) + 1
        elif e.type == te.TYPE_SLICE_END:
            if not stack:
                errors.append(f"END without BEGIN on track {e.track_uuid} at {ts}")
                continue
            begin, name = stack.pop()
            t = tracks[e.track_uuid]
            t["slices"] += 1
            if keep_slices:
                t["list"].append([begin, ts - begin, name])
        else:
            errors.append(f"unexpected event type {e.type}")
    for uuid, stack in open_.items():
        if stack:
            errors.append(f"{len(stack)} slices left open on track {uuid}")
    linked = sum(1 for f in flow_api if f in flow_gpu)
    print(json.dumps({
        "tracks": {str(k): v for k, v in tracks.items()},
        "flows": linked,
        "one_sided_flows": len(set(flow_api) ^ set(flow_gpu)),
        "errors": errors[:20],
    }))


if __name__ == "__main__":
    main(sys.argv[1], len(sys.argv) > 2 and sys.argv[2] == "slices")
