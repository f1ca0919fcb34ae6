"""Running the typer app: every way a command can end becomes an exit code and a message.

Exit codes: 0 success, 1 the program failed, 2 a usage error, 128 + N ended by signal N
(130 SIGINT, 143 SIGTERM, 129 SIGHUP). A usage error is one line on stderr (and, for
``run --json``, ``{"error": {"kind": "usage", "message": ...}}`` on stdout); a bug of ours
is one line too, with its traceback only when ``DSH_CODE_DEBUG`` is set.
"""

from __future__ import annotations

import os
import sys
import traceback

import typer
from typer.exceptions import TyperException

from host.cli._app import STOPPER, app
from host.cli._errors import EXIT_FAILED, EXIT_USAGE, UsageFailure
from host.cli._output import report_usage, wants_json, write_json
from host.cli._signals import Interrupted, Stopper

__all__ = ("run_command",)


def _usage(args: list[str], message: str, detail: str | None = None) -> int:
    report_usage(message, json_output=wants_json(args), detail=detail)
    return EXIT_USAGE


def _parse_error(args: list[str], exc: TyperException) -> int:
    message = exc.format_message()
    ctx = getattr(exc, "ctx", None)
    if type(exc).__name__ == "NoArgsIsHelpError":  # bare ``dsh-code`` or ``dsh-code run``
        sys.stderr.write(message + "\n")
        return EXIT_USAGE
    hint = ""
    if ctx is not None:
        hint = f"{ctx.get_usage()}\nTry '{ctx.command_path} -h' for help.\n\n"
    code = _usage(args, message, f"{hint}Error: {message}")
    return code if exc.exit_code == EXIT_USAGE else int(exc.exit_code)


def run_command(args: list[str], stopper: Stopper) -> int:
    """Run ``dsh-code ARGS``; the exit code."""
    STOPPER[:] = [stopper]
    try:
        code = app(args, prog_name="dsh-code", standalone_mode=False)
    except UsageFailure as exc:
        return _usage(args, exc.message)
    except TyperException as exc:  # click's (vendored by typer) usage errors, bad parameters
        return _parse_error(args, exc)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        sys.stderr.write("\ndsh-code: aborted\n")
        return EXIT_FAILED
    except SystemExit as exc:  # typer's completion scripts exit this way
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Interrupted:
        raise
    except OSError as exc:  # e.g. a closed stderr or stdout: nothing of ours to show
        return _internal(args, exc)
    except Exception as exc:
        return _internal(args, exc)
    return int(code) if isinstance(code, int) else 0


def _internal(args: list[str], exc: BaseException) -> int:
    if os.environ.get("DSH_CODE_DEBUG"):
        traceback.print_exception(exc)
    message = f"internal error: {type(exc).__name__}: {exc}"
    sys.stderr.write(
        f"dsh-code: {message} (set DSH_CODE_DEBUG=1 for the traceback, and please report it)\n"
    )
    if wants_json(args):
        write_json({"error": {"kind": "internal", "message": message}})
    return EXIT_FAILED
