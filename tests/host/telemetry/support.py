"""Helpers of the telemetry tests: in-memory spans and metrics, and a real OTLP/HTTP receiver."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from host.telemetry import RUN_SPAN, TelemetrySettings, configure


class Recorded:
    """Our spans and metrics in memory: ``host.telemetry`` points at them for the block."""

    def __init__(self, capture: Iterable[str] = (), max_captured_chars: int = 4096) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.settings = TelemetrySettings(
            capture=frozenset(capture),
            max_captured_chars=max_captured_chars,
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
        )
        self._previous: TelemetrySettings | None = None

    def __enter__(self) -> Recorded:
        self._previous = configure(self.settings)
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._previous is not None
        configure(self._previous)
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()

    def spans(self) -> list[ReadableSpan]:
        """Every ended span, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def runs(self) -> list[ReadableSpan]:
        """The run spans."""
        return [s for s in self.spans() if s.name == RUN_SPAN]

    def run(self) -> ReadableSpan:
        """The one run span."""
        (found,) = self.runs()
        return found

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        """The spans whose parent is ``parent``, in the order they started."""
        assert parent.context is not None
        found = [
            s
            for s in self.spans()
            if s.parent is not None and s.parent.span_id == parent.context.span_id
        ]
        return sorted(found, key=lambda s: s.start_time or 0)

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        """The data points of metric ``name``: (attributes, point)."""
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found += [(dict(p.attributes or {}), p) for p in metric.data.data_points]
        return found


def span_text(span: ReadableSpan) -> str:
    """Every attribute and event value of ``span`` as one text (to look for leaks)."""
    values = [str(v) for v in (span.attributes or {}).values()]
    for event in span.events:
        values += [str(v) for v in (event.attributes or {}).values()]
    if span.status.description:
        values.append(span.status.description)
    return "\n".join([span.name, *values])


@dataclass
class Received:
    """What an OTLP/HTTP receiver was sent: (path, body) per request."""

    requests: list[tuple[str, bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def spans(self) -> list[dict[str, Any]]:
        """The spans of every trace export: name, ids (hex), kind, attributes, events, scope."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        found: list[dict[str, Any]] = []
        with self.lock:
            bodies = [body for path, body in self.requests if path == "/v1/traces"]
        for body in bodies:
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                service = _attributes(resource.resource.attributes).get("service.name")
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        found.append(
                            {
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_id": span.parent_span_id.hex(),
                                "attributes": _attributes(span.attributes),
                                "events": [e.name for e in span.events],
                                "scope": scope.scope.name,
                                "service": service,
                            }
                        )
        return found

    def metric_names(self) -> set[str]:
        """The names of every metric exported."""
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceRequest,
        )

        names: set[str] = set()
        with self.lock:
            bodies = [body for path, body in self.requests if path == "/v1/metrics"]
        for body in bodies:
            request = ExportMetricsServiceRequest.FromString(body)
            for resource in request.resource_metrics:
                for scope in resource.scope_metrics:
                    names |= {m.name for m in scope.metrics}
        return names


def _attributes(pairs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        value = pair.value
        kind = value.WhichOneof("value")
        out[pair.key] = getattr(value, kind) if kind is not None else None
    return out


class OtlpReceiver:
    """A real OTLP/HTTP endpoint on loopback (a thread), keeping what it is sent."""

    def __init__(self) -> None:
        self.received = Received()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with received.lock:
                    received.requests.append((self.path, body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        """The base URL (``OTEL_EXPORTER_OTLP_ENDPOINT``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Received:
        self._thread.start()
        return self.received

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)


def otlp_receiver() -> Iterator[tuple[OtlpReceiver, Received]]:
    """A started receiver and what it receives (a generator for fixtures)."""
    receiver = OtlpReceiver()
    with receiver as received:
        yield receiver, received
