"""What is traced and where it goes: the opt-in settings, and the tracer and meter in use.

Nothing here imports OpenTelemetry until something asks for a tracer and OpenTelemetry is
already in use: a provider can only have been set by a program that imported it, so while
``opentelemetry.trace`` is not imported (and no provider was configured here), tracing is
off at the cost of a dictionary look-up.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import threading
import typing
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Tracer, TracerProvider

__all__ = (
    "CAPTURE_FIELDS",
    "CaptureField",
    "TelemetrySettings",
    "configure",
    "current_settings",
)

#: What a caller may opt in to record (each may hold secrets): the program's text, its logs,
#: its result (and a failure's message), the binding calls' arguments and results.
CaptureField = Literal["program", "logs", "result", "tool_arguments", "tool_results"]
CAPTURE_FIELDS: tuple[str, ...] = typing.get_args(CaptureField)

#: The name (and version) our tracer and meter carry.
SCOPE = "dsh-code"
_TRACER_ENV = "OTEL_PYTHON_TRACER_PROVIDER"
_METER_ENV = "OTEL_PYTHON_METER_PROVIDER"


@dataclass(frozen=True, kw_only=True)
class TelemetrySettings:
    """Opt-ins and providers for dsh-code's spans and metrics (``configure`` sets them)."""

    capture: Collection[str] = frozenset()
    """Opt-ins from ``CAPTURE_FIELDS`` (kept as a frozenset); nothing that may hold secrets is
    recorded by default."""
    max_captured_chars: int = 4096
    """The most characters of each captured text (longer ones are cut, and say so)."""
    tracer_provider: TracerProvider | None = field(default=None, repr=False)
    """None: OpenTelemetry's global tracer provider."""
    meter_provider: MeterProvider | None = field(default=None, repr=False)
    """None: OpenTelemetry's global meter provider."""

    def __post_init__(self) -> None:
        if isinstance(self.capture, str) or not isinstance(self.capture, frozenset | set | tuple):
            raise TypeError(f"capture must be a set of names, not {self.capture!r}")
        unknown = sorted(set(self.capture) - set(CAPTURE_FIELDS))
        if unknown:
            raise ValueError(
                f"capture: unknown {', '.join(map(repr, unknown))} "
                f"(known: {', '.join(CAPTURE_FIELDS)})"
            )
        object.__setattr__(self, "capture", frozenset(self.capture))
        if type(self.max_captured_chars) is not int or self.max_captured_chars < 16:
            raise ValueError(
                f"max_captured_chars must be an int of at least 16, got {self.max_captured_chars!r}"
            )


_settings = TelemetrySettings()
#: Each provider's tracer (None: tracing off) and instruments: a provider is asked once.
_tracers: dict[Any, Tracer | None] = {}
_meters: dict[Any, Any] = {}
#: Providers remembered at most (a program switching providers keeps the latest few).
_KEPT = 8
_remembering = threading.Lock()


def configure(settings: TelemetrySettings) -> TelemetrySettings:
    """Use ``settings`` from now on (for runs that start later); returns the previous ones."""
    global _settings
    if not isinstance(settings, TelemetrySettings):
        raise TypeError(f"configure() takes TelemetrySettings, not {type(settings).__name__}")
    previous, _settings = _settings, settings
    return previous


def current_settings() -> TelemetrySettings:
    """The settings in use."""
    return _settings


@functools.cache
def _version() -> str:
    """dsh-code's version (looked up once: reading the installed metadata takes ~2 ms)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dsh-code")
    except PackageNotFoundError:
        return "0"


def _api_only(provider: object, package: str) -> bool:
    """True for the API's own providers (the proxy before one is set, the no-op one)."""
    return type(provider).__module__.startswith(package)


def tracer() -> Tracer | None:
    """The tracer for our spans; None while tracing is off (no provider anywhere)."""
    provider: Any = _settings.tracer_provider
    if provider is None:
        api: Any = sys.modules.get("opentelemetry.trace")
        if api is None:
            if _TRACER_ENV not in os.environ:
                return None
            api = importlib.import_module("opentelemetry.trace")
        provider = api.get_tracer_provider()
    try:
        return _tracers[provider]
    except KeyError:
        pass
    found: Tracer | None = None
    if not _api_only(provider, "opentelemetry.trace"):
        from opentelemetry.trace import NoOpTracer

        found = provider.get_tracer(SCOPE, _version())
        if isinstance(found, NoOpTracer):  # an SDK switched off (OTEL_SDK_DISABLED)
            found = None
    _remember(_tracers, provider, found)
    return found


def meter() -> Any:
    """Our instruments (``_metrics.Instruments``); None while metrics are off."""
    provider: Any = _settings.meter_provider
    if provider is None:
        api: Any = sys.modules.get("opentelemetry.metrics")
        if api is None:
            if _METER_ENV not in os.environ:
                return None
            api = importlib.import_module("opentelemetry.metrics")
        provider = api.get_meter_provider()
    try:
        return _meters[provider]
    except KeyError:
        pass
    found = None
    if not _api_only(provider, "opentelemetry.metrics"):
        from opentelemetry.metrics import NoOpMeter

        from host.telemetry._metrics import Instruments

        made = provider.get_meter(SCOPE, _version())
        if not isinstance(made, NoOpMeter):  # an SDK switched off (OTEL_SDK_DISABLED)
            found = Instruments(made)
    _remember(_meters, provider, found)
    return found


def _remember(cache: dict[Any, Any], provider: Any, value: Any) -> None:
    with _remembering:  # runs on several threads' loops may look a provider up at once
        if len(cache) >= _KEPT:
            del cache[next(iter(cache))]  # the oldest
        cache[provider] = value
