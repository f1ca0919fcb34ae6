"""host.cli: the ``dsh-code`` command (typer + rich, loaded only when the command runs)."""

from __future__ import annotations

__all__ = ("main",)


def main() -> None:
    """Entry point of the ``dsh-code`` console script."""
    from host.cli._app import app

    app()
