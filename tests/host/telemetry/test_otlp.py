"""OTLP/HTTP export: when the OTEL_* variables ask for it, and what a real receiver gets."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from opentelemetry import trace

from host.telemetry import TelemetrySetupError, environment_context, otlp_requested, setup_otlp
from tests.host.telemetry.support import OtlpReceiver

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "agent"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://collector/v1/metrics"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
        ({"OTEL_TRACES_EXPORTER": "console, OTLP"}, True),
        ({"OTEL_METRICS_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "TRUE"}, False),
    ],
)
def test_the_variables_alone_ask_for_export(environ: dict[str, str], wanted: bool) -> None:
    assert otlp_requested(environ) is wanted


def test_another_protocol_is_refused_before_anything_is_set() -> None:
    with pytest.raises(TelemetrySetupError, match="http/protobuf only"):
        setup_otlp(environ={"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"


def test_traceparent_in_the_environment_is_the_current_context() -> None:
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with environment_context({"TRACEPARENT": parent, "TRACESTATE": "k=v"}):
        context = trace.get_current_span().get_span_context()
        assert (context.trace_id, context.span_id) == (
            0x0AF7651916CD43DD8448EB211C80319C,
            0xB7AD6B7169203331,
        )
        assert context.is_remote and context.trace_state.get("k") == "v"
    assert not trace.get_current_span().get_span_context().is_valid
    with environment_context({}):
        assert not trace.get_current_span().get_span_context().is_valid


SCRIPT = """
import anyio
from host.sandbox import SubprocessRuntime
from host.telemetry import TelemetrySetupError, setup_otlp
from runtime import RunRequest

shutdown = setup_otlp(service_name="otlp-test")
try:
    setup_otlp()
except TelemetrySetupError as exc:
    print("again:", exc)

async def f(args):
    return 1

async def main():
    async with SubprocessRuntime(prefork=0) as rt:
        await rt.run(RunRequest(program="return await f()", bindings={"f": f}))
anyio.run(main)
shutdown()
"""


def test_a_process_exports_its_spans_and_metrics_to_a_real_receiver() -> None:
    receiver = OtlpReceiver()
    with receiver as received:
        env = dict(os.environ, PYTHONPATH=str(ROOT), OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
        out = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(SCRIPT)],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=True,
        )
        assert out.stdout == "again: this process has a tracer provider already\n"
    spans = received.spans()
    assert sorted(s["name"] for s in spans) == ["dsh_code.run", "execute_tool f"]
    assert {s["service"] for s in spans} == {"otlp-test"}
    assert {s["scope"] for s in spans} == {"dsh-code"}
    run = next(s for s in spans if s["name"] == "dsh_code.run")
    call = next(s for s in spans if s["name"] == "execute_tool f")
    assert call["parent_id"] == run["span_id"] and call["trace_id"] == run["trace_id"]
    assert run["attributes"]["dsh_code.run.outcome"] == "ok"
    assert {"dsh_code.runs", "dsh_code.run.duration", "dsh_code.tool_call.duration"} <= (
        received.metric_names()
    )
