"""The request check every backend makes: the caller's mistakes, named."""

from __future__ import annotations

from typing import Any

import pytest

from runtime import RunRequest, RuntimeUsageError
from runtime.lowlevel import check_request
from runtime.testing import InProcessRuntime

pytestmark = pytest.mark.anyio


async def _echo(args: Any) -> Any:
    return args


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ("return 1", "takes a RunRequest"),
        (RunRequest(program="1", bindings={"no good": _echo}), "not a dotted identifier"),
        (RunRequest(program="1", bindings={"tools.x": 3}), "is not callable"),  # type: ignore[dict-item]
        (RunRequest(program="1", inputs={"1x": 1}), "not an identifier"),
        (RunRequest(program="1", inputs={"x": (1, 2)}), "not lossless JSON"),
        (RunRequest(program="1", call_style="threads"), "call_style"),  # type: ignore[arg-type]
    ],
)
def test_a_mistake_is_a_usage_error_naming_it(request_: Any, message: str) -> None:
    with pytest.raises(RuntimeUsageError, match=message):
        check_request(request_)


def test_a_good_request_passes() -> None:
    check_request(RunRequest(program="1", bindings={"tools.x": _echo}, inputs={"n": [1, 2.5]}))


async def test_the_in_process_fake_rejects_what_the_real_runtimes_reject() -> None:
    async with InProcessRuntime() as rt:
        with pytest.raises(RuntimeUsageError, match="not a dotted identifier"):
            await rt.run(RunRequest(program="1", bindings={"no good": _echo}))
