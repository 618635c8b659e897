"""The `probe` command (placeholder until implemented)."""

import typer


def register(app: typer.Typer) -> None:
    @app.command("probe")
    def _cmd() -> None:
        """Not implemented yet."""
        raise typer.Exit(3)
