"""The `facts` command: everything the doctor knows about this deployment, with sources.

    vllm-doctor facts [OPTIONS] [-- vllm serve MODEL ...]

JSON (``--format json``) is ``Facts.to_dict()``: ``schema_version``, ``facts`` (path → value,
source, detail), ``missing`` (path or area → reason) and ``notes``. The JSON path imports
neither rich nor pynvml (pynvml only where the NVIDIA driver library exists); torch and vLLM
are never imported.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from vllm_doctor.commands import inputs

if TYPE_CHECKING:
    from vllm_doctor.facts.collect import CollectOptions

FORMATS = ("text", "json")


def print_schema(output_format: str) -> None:
    """`facts --schema`: every fact path, nothing collected."""
    from vllm_doctor.errors import InputError
    from vllm_doctor.facts import schema_doc
    from vllm_doctor.report.output import dump_json, write_stdout

    render = {
        "text": schema_doc.schema_text,
        "markdown": schema_doc.schema_markdown,
        "json": lambda: dump_json(schema_doc.schema_rows()),
    }.get(output_format)
    if render is None:
        raise InputError(
            "--format", f"unknown format {output_format!r} for --schema (text, json or markdown)"
        )
    write_stdout(render().rstrip("\n") + "\n")


def run_facts(options: CollectOptions, output_format: str = "text", verbose: bool = False) -> int:
    """Print the facts; 0, or 3 when a collector crashed (the facts shown are incomplete)."""
    from vllm_doctor.errors import InputError
    from vllm_doctor.facts.collect import collect_facts

    if output_format not in FORMATS:
        raise InputError("--format", f"unknown format {output_format!r} (text or json)")
    tokens = options.serve_tokens
    if tokens and tokens[0].startswith("-"):
        raise InputError(
            "facts",
            f"unknown option {tokens[0]}; the serve line goes "
            "last: vllm-doctor facts [OPTIONS] -- vllm serve MODEL ...",
        )
    from vllm_doctor.commands.check import manifest_targets

    targets = manifest_targets(options)
    if targets:
        return _run_targets(options, targets, output_format, verbose)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    facts = collect_facts(options, timings)
    total = time.perf_counter() - start
    from vllm_doctor.report.output import dump_json, print_rich, write_stdout

    if output_format == "json":
        write_stdout(dump_json(facts.to_dict()))
        return _crash_exit(facts)
    from vllm_doctor.report.facts_view import render_facts

    def render(console) -> None:
        render_facts(facts, console, verbose=verbose, timings=timings)
        if verbose:
            console.print(f"[dim]collected in {total * 1000:.0f} ms[/]")

    print_rich(render)
    return _crash_exit(facts)


def _run_targets(options: CollectOptions, targets: list, output_format: str, verbose: bool) -> int:
    """The facts of each container of a manifest, each under its name and place."""
    import dataclasses

    from vllm_doctor.facts.collect import collect_facts
    from vllm_doctor.report.output import dump_json, print_rich, write_stdout

    each = [
        (
            target,
            collect_facts(
                dataclasses.replace(
                    options,
                    serve_config=None,
                    manifest=None,
                    manifest_target=target,
                    probe_machine=False,
                )
            ),
        )
        for target in targets
    ]
    if output_format == "json":
        write_stdout(
            dump_json(
                {
                    "targets": [
                        {"target": t.name, "where": t.where, **facts.to_dict()} for t, facts in each
                    ]
                }
            )
        )
    else:
        from vllm_doctor.report.facts_view import render_facts

        def render(console) -> None:
            for target, facts in each:
                console.print(f"[bold]── {target.name} ({target.where}) ──[/]")
                render_facts(facts, console, verbose=verbose, timings={})

        print_rich(render)
    crashes = [crash for _, facts in each for crash in facts.crashes]
    if crashes:
        from vllm_doctor.commands.check import crashed

        return crashed(crashes)
    return 0


def _crash_exit(facts) -> int:
    if facts.crashes:
        from vllm_doctor.commands.check import crashed

        return crashed(facts.crashes)
    return 0


def register(app: typer.Typer) -> None:
    @app.command(
        "facts",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )
    def facts_cmd(
        ctx: typer.Context,
        serve: str | None = inputs.SERVE,
        serve_config: Path | None = inputs.SERVE_CONFIG,
        manifest: str | None = inputs.MANIFEST,
        model_config: Path | None = inputs.MODEL_CONFIG,
        report: Path | None = inputs.REPORT,
        log: Path | None = inputs.LOG,
        vllm_version: str | None = inputs.VLLM_VERSION,
        torch_version: str | None = inputs.TORCH_VERSION,
        package: list[str] | None = inputs.PACKAGE,
        gpu: str | None = inputs.GPU,
        gpus: int | None = inputs.GPUS,
        offline: bool = inputs.OFFLINE,
        driver: str | None = inputs.DRIVER,
        cuda: str | None = inputs.CUDA,
        platform: list[str] | None = inputs.PLATFORM,
        output_format: str = typer.Option(
            "text", "--format", help="text or json (with --schema also markdown)."
        ),
        verbose: bool = inputs.VERBOSE,
        schema: bool = typer.Option(
            False,
            "--schema",
            help="List every fact a rule may name: "
            "type, description, the module that writes it, whether it "
            "can be inferred (nothing is collected).",
        ),
    ) -> None:
        """Show the facts collected from this machine, the model and the serve line.

        The serve line goes last, after `--`: vllm-doctor facts -- vllm serve MODEL -tp 2
        """
        if schema:
            print_schema(output_format)
            return
        options = inputs.collect_options(
            list(ctx.args),
            serve,
            serve_config,
            model_config,
            report,
            log,
            vllm_version,
            torch_version,
            gpu,
            gpus,
            driver,
            cuda,
            offline,
            package,
            platform,
        )
        options.manifest = manifest
        raise typer.Exit(run_facts(options, output_format, verbose))
