"""OTLP/HTTP export for a process of ours (the CLI, the MCP server, a Ray node's actor).

The standard ``OTEL_*`` variables configure it (endpoint, headers, timeout, service name,
resource attributes); this sets the global tracer and meter providers, so the MCP SDK's and
the frameworks' spans go the same way as ours.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping

__all__ = ("TelemetrySetupError", "environment_context", "otlp_requested", "setup_otlp")

#: The longest a shutdown waits for the last spans and metrics to be sent.
FLUSH_S = 5.0
INSTALL_HINT = "OTLP export needs the otel extra: pip install 'dsh-code[otel]'"
_ENDPOINTS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)


class TelemetrySetupError(Exception):
    """OTLP export cannot start: the otel extra is missing, or the variables ask for what
    it does not do (a protocol other than http/protobuf). Nothing was set up."""


def _names(value: str | None) -> list[str]:
    return [part.strip().lower() for part in (value or "").split(",") if part.strip()]


def otlp_requested(environ: Mapping[str, str] = os.environ) -> bool:
    """True when the ``OTEL_*`` variables alone ask for OTLP export: an OTLP endpoint, or
    ``otlp`` among ``OTEL_TRACES_EXPORTER``/``OTEL_METRICS_EXPORTER`` (never with
    ``OTEL_SDK_DISABLED=true``)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if any(environ.get(name, "").strip() for name in _ENDPOINTS):
        return True
    return any(
        "otlp" in _names(environ.get(name))
        for name in ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER")
    )


def setup_otlp(
    *, service_name: str = "dsh-code", environ: Mapping[str, str] = os.environ
) -> Callable[[], None]:
    """Make the global tracer and meter providers export over OTLP/HTTP; returns the
    shutdown that flushes what is left (call it before the process exits; it waits at most
    ``FLUSH_S`` seconds). Raises ``TelemetrySetupError``."""
    for name in ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        protocol = environ.get(name, "").strip()
        if protocol and protocol != "http/protobuf":
            raise TelemetrySetupError(f"{name}={protocol}: dsh-code exports http/protobuf only")
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise TelemetrySetupError(INSTALL_HINT) from exc
    if not type(trace.get_tracer_provider()).__module__.startswith("opentelemetry.trace"):
        raise TelemetrySetupError("this process has a tracer provider already")
    named = environ.get("OTEL_SERVICE_NAME", "").strip() or any(
        item.strip().startswith(SERVICE_NAME + "=")
        for item in environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(",")
    )
    resource = Resource.create({} if named else {SERVICE_NAME: service_name})
    # Shut down by the caller, within a bound (not at exit: an unreachable collector would
    # hold the process for the exporters' retries, ~13 s).
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    if "none" not in _names(environ.get("OTEL_TRACES_EXPORTER")):
        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    readers = []
    if "none" not in _names(environ.get("OTEL_METRICS_EXPORTER")):
        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    meter_provider = MeterProvider(
        resource=resource, metric_readers=readers, shutdown_on_exit=False
    )
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)

    def flush() -> None:
        tracer_provider.shutdown()
        meter_provider.shutdown()

    def shutdown() -> None:
        worker = threading.Thread(target=flush, name="dsh-code otlp flush", daemon=True)
        worker.start()
        worker.join(FLUSH_S)

    return shutdown


@contextlib.contextmanager
def environment_context(environ: Mapping[str, str] = os.environ) -> Iterator[None]:
    """Within: the trace context of the ``TRACEPARENT`` (and ``TRACESTATE``) variables, when
    a parent process passed one, is the current one (the CLI's runs join its trace)."""
    parent = environ.get("TRACEPARENT", "").strip()
    if not parent:
        yield
        return
    from opentelemetry import context
    from opentelemetry.propagate import extract

    carrier = {"traceparent": parent}
    state = environ.get("TRACESTATE", "").strip()
    if state:
        carrier["tracestate"] = state
    token = context.attach(extract(carrier))
    try:
        yield
    finally:
        context.detach(token)
