"""The `facts` command: everything the doctor knows about this deployment, with sources.

    vllm-doctor facts [-- vllm serve MODEL ...] [--serve STR] [--serve-config F]
                      [--model-config P] [--report F] [--log F] [--format text|json] [-v]

JSON (``--format json``) is ``Facts.to_dict()``: ``schema_version``, ``facts`` (path → value,
source, detail), ``missing`` (path or area → reason) and ``notes``. The JSON path imports
neither rich nor pynvml unless a GPU driver is present.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command(
        "facts",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )
    def facts_cmd(
        ctx: typer.Context,
        serve: Optional[str] = typer.Option(
            None, "--serve", help="The serve line as one string: \"vllm serve MODEL ...\"."),
        serve_config: Optional[Path] = typer.Option(
            None, "--serve-config", help="A vLLM serve config file (YAML)."),
        model_config: Optional[Path] = typer.Option(
            None, "--model-config", help="The model's config.json or model directory."),
        report: Optional[Path] = typer.Option(
            None, "--report", help="A `vllm collect-env` report: its facts replace this "
                                   "machine's."),
        log: Optional[Path] = typer.Option(None, "--log", help="A crash log."),
        vllm_version: Optional[str] = typer.Option(
            None, "--vllm-version", help="What if vLLM were this version."),
        torch_version: Optional[str] = typer.Option(
            None, "--torch-version", help="What if torch were this version."),
        output_format: str = typer.Option(
            "text", "--format", help="Output format: text or json."),
        verbose: bool = typer.Option(
            False, "--verbose", "-v", help="Every fact with its source detail, and timings."),
    ) -> None:
        """Show the facts collected from this machine, the model and the serve line."""
        from vllm_doctor.errors import InputError
        from vllm_doctor.facts.collect import CollectOptions, collect_facts

        if output_format not in ("text", "json"):
            raise InputError("--format", f"unknown format {output_format!r} (text or json)")
        tokens = list(ctx.args)
        unknown = [t for t in tokens[:1] if t.startswith("-")]
        if unknown:
            raise InputError("facts", f"unknown option {unknown[0]}; put the serve line after "
                                      "`--`: vllm-doctor facts -- vllm serve MODEL ...")
        options = CollectOptions(
            serve_tokens=tokens or None, serve_string=serve, serve_config=serve_config,
            model_config=model_config, report=report, log=log,
            vllm_version=vllm_version, torch_version=torch_version,
        )
        timings: dict[str, float] = {}
        start = time.perf_counter()
        facts = collect_facts(options, timings)
        total = time.perf_counter() - start
        if output_format == "json":
            sys.stdout.write(facts.to_json() + "\n")
            return
        from rich.console import Console

        from vllm_doctor.report.facts_view import render_facts

        console = Console(highlight=False)
        render_facts(facts, console, verbose=verbose, timings=timings)
        if verbose:
            console.print(f"[dim]collected in {total * 1000:.0f} ms[/]")
