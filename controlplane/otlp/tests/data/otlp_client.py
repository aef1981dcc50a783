"""A real OpenTelemetry SDK client for the converter's tests.

Records a deterministic set of spans with the OpenTelemetry Python SDK (explicit start and end
times, so durations are known), then sends them with the SDK's own OTLP exporter (http or grpc)
or sends the exporter's protobuf encoding as is (raw over HTTP, grpc-raw over gRPC, to see the
status and message).
Prints one JSON line: the export result, the number of spans, and what nvtx_sum must find
(`domain:name` -> [instances, total ns]).
"""

import argparse
import json
import urllib.error
import urllib.request

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

T0 = 1_780_000_000_000_000_000


def record(args):
    attrs = {"service.name": "trainer", "process.pid": args.pid, "k8s.pod.name": "pod-a"}
    if args.session:
        attrs["nsight.session"] = args.session
        attrs["nsight.collection"] = args.collection
    provider = TracerProvider(resource=Resource.create(attrs))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("nsight-otlp-test")
    tid = args.pid
    t = T0 + args.offset
    for e in range(args.epochs):
        epoch = tracer.start_span("epoch", start_time=t, attributes={"thread.id": tid})
        ctx = trace.set_span_in_context(epoch)
        s_t = t + 1_000
        for s in range(args.steps):
            step = tracer.start_span(
                "step",
                context=ctx,
                start_time=s_t,
                attributes={
                    "thread.id": tid,
                    "nvtx.domain": "train",
                    "nvtx.category": 2,
                    "nvtx.category.name": "compute",
                    "nvtx.color": "#00ff00",
                    "nvtx.payload": s,
                },
            )
            if s == 0:
                step.add_event("checkpoint", timestamp=s_t + 10)
            duration = 100_000 + 1_000 * s
            step.end(end_time=s_t + duration)
            s_t += duration + 500
        # Two overlapping asynchronous fetches on the same thread: the second breaks push/pop
        # nesting and becomes a start/end range; both count.
        fetch_a = tracer.start_span("fetch", context=ctx, start_time=s_t, attributes={"thread.id": tid})
        fetch_b = tracer.start_span("fetch", context=ctx, start_time=s_t + 100, attributes={"thread.id": tid})
        fetch_a.end(end_time=s_t + 5_000)
        fetch_b.end(end_time=s_t + 8_000)
        epoch.end(end_time=s_t + 10_000)
        # Work on another thread.
        io = tracer.start_span("io", start_time=t + 50, attributes={"thread.id": tid + 1, "thread.name": "loader"})
        io.end(end_time=t + 50 + 70_000)
        t = s_t + 20_000
    spans = memory.get_finished_spans()
    expected = {}
    for span in spans:
        key = "%s:%s" % (span.attributes.get("nvtx.domain", ""), span.name)
        n, total = expected.get(key, (0, 0))
        expected[key] = (n + 1, total + span.end_time - span.start_time)
    return spans, expected


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["http", "grpc", "raw", "grpc-raw"], default="http")
    p.add_argument("--endpoint", required=True)
    p.add_argument("--session", default="")
    p.add_argument("--collection", default="1")
    p.add_argument("--pid", type=int, default=4242)
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args()
    spans, expected = record(args)
    out = {"spans": len(spans), "expected": expected}
    if args.mode == "http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        out["result"] = OTLPSpanExporter(endpoint=args.endpoint, timeout=5).export(spans).name
    elif args.mode == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=args.endpoint, insecure=True, timeout=5)
        out["result"] = exporter.export(spans).name
    elif args.mode == "grpc-raw":
        import grpc
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

        stub = trace_service_pb2_grpc.TraceServiceStub(grpc.insecure_channel(args.endpoint))
        try:
            stub.Export(encode_spans(spans), timeout=5)
            out["code"], out["details"] = "OK", ""
        except grpc.RpcError as e:
            out["code"], out["details"] = e.code().name, e.details()
    else:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        body = encode_spans(spans).SerializeToString()
        req = urllib.request.Request(
            args.endpoint, data=body, headers={"Content-Type": "application/x-protobuf"}
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                out["status"], out["body"] = resp.status, ""
        except urllib.error.HTTPError as e:
            out["status"], out["body"] = e.code, e.read().decode("utf-8", "replace")
            out["retry_after"] = e.headers.get("Retry-After")
        out["bytes"] = len(body)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
