"""The `explain` command (placeholder until implemented)."""

import typer


def register(app: typer.Typer) -> None:
    @app.command("explain")
    def _cmd() -> None:
        """Not implemented yet."""
        raise typer.Exit(3)
