"""TelemetrySettings and configure: the opt-ins checked, the providers looked up once."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NoOpTracerProvider

from host.telemetry import CAPTURE_FIELDS, TelemetrySettings, configure, current_settings
from host.telemetry._settings import meter, tracer


def test_nothing_is_captured_by_default() -> None:
    settings = TelemetrySettings()
    assert settings.capture == frozenset()
    assert CAPTURE_FIELDS == ("program", "logs", "result", "tool_arguments", "tool_results")


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"capture": {"secrets"}}, ValueError, r"^capture: unknown 'secrets' \(known: program,"),
        ({"capture": "program"}, TypeError, "a set of names"),
        ({"max_captured_chars": 15}, ValueError, "at least 16"),
        ({"max_captured_chars": True}, ValueError, "at least 16"),
    ],
)
def test_bad_settings_say_what_is_wrong(options: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        TelemetrySettings(**options)


def test_configure_returns_the_settings_it_replaces() -> None:
    mine = TelemetrySettings(capture={"logs"})
    previous = configure(mine)
    try:
        assert current_settings() is mine
        assert mine.capture == frozenset({"logs"})
    finally:
        assert configure(previous) is mine
    with pytest.raises(TypeError, match="TelemetrySettings"):
        configure({"capture": ()})  # type: ignore[arg-type]


def test_an_api_only_or_disabled_provider_is_off_and_a_real_one_is_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    previous = current_settings()
    try:
        configure(TelemetrySettings(tracer_provider=NoOpTracerProvider()))
        assert tracer() is None
        real = TracerProvider()
        configure(TelemetrySettings(tracer_provider=real, meter_provider=MeterProvider()))
        found = tracer()
        assert found is not None and found is tracer()  # asked of the provider once
        assert meter() is not None
        monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
        configure(
            TelemetrySettings(tracer_provider=TracerProvider(), meter_provider=MeterProvider())
        )
        assert tracer() is None and meter() is None
    finally:
        configure(previous)


def test_switching_providers_asks_each_one_once() -> None:
    # asking a provider costs its metadata look-up (~2 ms): a process alternating two (a
    # benchmark, a test) must not pay it at each switch
    asked: list[object] = []

    class Counting(TracerProvider):
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            asked.append(self)
            return super().get_tracer(*args, **kwargs)

    first, second = Counting(), Counting()
    previous = current_settings()
    try:
        for _ in range(3):
            for provider in (first, second):
                configure(TelemetrySettings(tracer_provider=provider))
                assert tracer() is not None
    finally:
        configure(previous)
    assert asked == [first, second]
