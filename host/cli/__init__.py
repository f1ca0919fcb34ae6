"""host.cli: the ``dsh-code`` command (typer + rich, loaded only when the command runs)."""

from __future__ import annotations

__all__ = ("main",)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``dsh-code`` console script; exits with the command's code."""
    import sys

    from host.cli import _output, _signals

    stopper = _signals.install()  # first: a signal during the imports below is a message
    args = list(sys.argv[1:] if argv is None else argv)
    code = 1
    try:
        _output.claim_stdout()
        from host.cli._entry import run_command

        code = run_command(args, stopper)
    except _signals.Interrupted as exc:
        code = _output.interrupted(args, exc.signum)
    finally:
        stopper.in_loop = True  # from here on a signal is only recorded
        _output.finish(code)
