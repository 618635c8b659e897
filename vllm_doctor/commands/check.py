"""The `check` command (placeholder until implemented)."""

import typer


def register(app: typer.Typer) -> None:
    @app.command("check")
    def _cmd() -> None:
        """Not implemented yet."""
        raise typer.Exit(3)
