"""Real OTLP receivers for the tests: OTLP/HTTP (protobuf) and OTLP/gRPC, on loopback, decoding with
the opentelemetry-proto messages a collector uses. They keep what arrived and answer like a collector."""

from __future__ import annotations

import gzip
import threading
import zlib
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

REQUESTS = {
    "/v1/metrics": (metrics_service_pb2.ExportMetricsServiceRequest, metrics_service_pb2.ExportMetricsServiceResponse),
    "/v1/logs": (logs_service_pb2.ExportLogsServiceRequest, logs_service_pb2.ExportLogsServiceResponse),
    "/v1/traces": (trace_service_pb2.ExportTraceServiceRequest, trace_service_pb2.ExportTraceServiceResponse),
}


def any_value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return kv(v.kvlist_value.values)
    return getattr(v, kind) if kind else None


def kv(pairs: Any) -> dict[str, Any]:
    return {p.key: any_value(p.value) for p in pairs}


class Received:
    """Everything a receiver got, decoded; thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: dict[str, list[Any]] = {path: [] for path in REQUESTS}

    def add(self, path: str, message: Any) -> None:
        with self.lock:
            self.requests[path].append(message)

    def _all(self, path: str) -> list[Any]:
        with self.lock:
            return list(self.requests[path])

    def metric_points(self) -> list[dict[str, Any]]:
        """Every number data point, in arrival order: name, unit, type, temporality, attributes, value."""
        out = []
        for req in self._all("/v1/metrics"):
            for rm in req.resource_metrics:
                resource = kv(rm.resource.attributes)
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        kind = m.WhichOneof("data")
                        data = getattr(m, kind)
                        for dp in data.data_points:
                            out.append(
                                {
                                    "name": m.name,
                                    "unit": m.unit,
                                    "type": kind,
                                    "monotonic": getattr(data, "is_monotonic", None),
                                    "temporality": getattr(data, "aggregation_temporality", None),
                                    "resource": resource,
                                    "attributes": kv(dp.attributes),
                                    "value": dp.as_double if dp.HasField("as_double") else dp.as_int,
                                    "time": dp.time_unix_nano,
                                }
                            )
        return out

    def latest(self) -> dict[tuple[str, tuple], dict[str, Any]]:
        """The last data point of each (metric, attribute set): exports are cumulative, so this is the state."""
        out: dict[tuple[str, tuple], dict[str, Any]] = {}
        for point in self.metric_points():
            out[(point["name"], tuple(sorted(point["attributes"].items())))] = point
        return out

    def log_records(self) -> list[dict[str, Any]]:
        out = []
        for req in self._all("/v1/logs"):
            for rl in req.resource_logs:
                for sl in rl.scope_logs:
                    for r in sl.log_records:
                        out.append(
                            {
                                "event_name": r.event_name,
                                "severity": r.severity_text,
                                "time": r.time_unix_nano,
                                "body": any_value(r.body),
                                "attributes": kv(r.attributes),
                                "resource": kv(rl.resource.attributes),
                            }
                        )
        return out

    def spans(self) -> list[dict[str, Any]]:
        out = []
        for req in self._all("/v1/traces"):
            for rs in req.resource_spans:
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        out.append(
                            {
                                "name": s.name,
                                "trace_id": s.trace_id.hex(),
                                "span_id": s.span_id.hex(),
                                "parent": s.parent_span_id.hex(),
                                "start": s.start_time_unix_nano,
                                "end": s.end_time_unix_nano,
                                "attributes": kv(s.attributes),
                            }
                        )
        return out


class HttpReceiver:
    """OTLP/HTTP with protobuf bodies: POST /v1/metrics, /v1/logs, /v1/traces."""

    def __init__(self, port: int = 0) -> None:
        self.received = Received()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                types = REQUESTS.get(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if types is None:
                    self.send_error(404)
                    return
                encoding = self.headers.get("Content-Encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                request_type, response_type = types
                message = request_type()
                message.ParseFromString(body)
                received.add(self.path, message)
                payload = response_type().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="otlp-http-receiver", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


class GrpcReceiver:
    """OTLP/gRPC: the collector's MetricsService, LogsService and TraceService."""

    def __init__(self) -> None:
        self.received = Received()
        received = self.received

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's name
                received.add("/v1/metrics", request)
                return metrics_service_pb2.ExportMetricsServiceResponse()

        class Logs(logs_service_pb2_grpc.LogsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
                received.add("/v1/logs", request)
                return logs_service_pb2.ExportLogsServiceResponse()

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
                received.add("/v1/traces", request)
                return trace_service_pb2.ExportTraceServiceResponse()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), self.server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), self.server)
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.server.start()

    def stop(self) -> None:
        self.server.stop(grace=1).wait(5)
