"""The `facts` command: everything the doctor knows about this deployment, with sources.

JSON (``--format json``) is ``Facts.to_dict()``: ``schema_version``, ``facts`` (path → value,
source, detail), ``missing`` (path or area → reason) and ``notes``.

Speed: the options are read here from the command's extra arguments instead of being declared
as typer parameters. Current typer converts every declared non-flag option through a pydantic
``TypeAdapter``, and importing pydantic for that costs more than all of fact collection
(about 0.2 s of a 0.3 s budget; measured with ``python -X importtime``). ``--help`` shows the
docstring of ``facts_cmd``, which lists the options.
"""

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

USAGE = """\
Show the facts collected from this machine, the model and the serve line.

Usage: vllm-doctor facts [OPTIONS] [-- vllm serve MODEL ...]

Options (before the serve line):
  --serve TEXT           the serve line as one string: "vllm serve MODEL ..."
  --serve-config FILE    a vLLM serve config file (YAML)
  --model-config PATH    the model's config.json or model directory
  --report FILE          a `vllm collect-env` report: its facts replace this machine's
  --log FILE             a crash log
  --vllm-version V       what if vLLM were version V
  --torch-version V      what if torch were version V
  --format text|json     output format (default: text)
  -v, --verbose          every fact with its source detail, per-GPU records, timings
"""

_VALUED = {"--serve": "serve", "--serve-config": "serve_config", "--model-config": "model_config",
           "--report": "report", "--log": "log", "--vllm-version": "vllm_version",
           "--torch-version": "torch_version", "--format": "output_format"}
_PATHS = {"serve_config", "model_config", "report", "log"}


@dataclass
class FactsArgs:
    serve: str | None = None
    serve_config: Path | None = None
    model_config: Path | None = None
    report: Path | None = None
    log: Path | None = None
    vllm_version: str | None = None
    torch_version: str | None = None
    output_format: str = "text"
    verbose: bool = False
    serve_tokens: list[str] = field(default_factory=list)


def parse_facts_args(args: list[str]) -> FactsArgs:
    """Options first, then the serve line: the first token that is not an option of
    ``facts`` starts the serve line (``--`` may separate them; click removes it)."""
    from vllm_doctor.errors import InputError

    out = FactsArgs()
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            i += 1
            break
        if token in ("-v", "--verbose"):
            out.verbose = True
            i += 1
            continue
        name, eq, inline = token.partition("=")
        if name in _VALUED:
            if eq:
                value = inline
                i += 1
            else:
                if i + 1 >= len(args):
                    raise InputError(name, "expects a value")
                value = args[i + 1]
                i += 2
            attr = _VALUED[name]
            setattr(out, attr, Path(value) if attr in _PATHS else value)
            continue
        if token.startswith("-"):
            raise InputError("facts", f"unknown option {token}; the serve line goes last: "
                                      "vllm-doctor facts [OPTIONS] -- vllm serve MODEL ...")
        break
    out.serve_tokens = list(args[i:])
    if out.output_format not in ("text", "json"):
        raise InputError("--format", f"unknown format {out.output_format!r} (text or json)")
    return out


def run_facts(args: FactsArgs) -> None:
    from vllm_doctor.facts.collect import CollectOptions, collect_facts

    options = CollectOptions(
        serve_tokens=args.serve_tokens or None, serve_string=args.serve,
        serve_config=args.serve_config, model_config=args.model_config, report=args.report,
        log=args.log, vllm_version=args.vllm_version, torch_version=args.torch_version,
    )
    timings: dict[str, float] = {}
    start = time.perf_counter()
    facts = collect_facts(options, timings)
    total = time.perf_counter() - start
    if args.output_format == "json":
        sys.stdout.write(facts.to_json() + "\n")
        return
    from rich.console import Console

    from vllm_doctor.report.facts_view import render_facts

    console = Console(highlight=False)
    render_facts(facts, console, verbose=args.verbose, timings=timings)
    if args.verbose:
        console.print(f"[dim]collected in {total * 1000:.0f} ms[/]")


def fast_main(argv: list[str]) -> int:
    """Run ``facts`` without going through typer (the CLI's fast path for this command).

    Errors are reported like the CLI does: one line on stderr, exit code 2 for bad input,
    3 when the doctor could not finish.
    """
    from vllm_doctor.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, DoctorError, InputError

    if any(a in ("-h", "--help") for a in argv[: argv.index("--") if "--" in argv else None]):
        sys.stdout.write(USAGE)
        return 0
    try:
        run_facts(parse_facts_args(list(argv)))
    except InputError as err:
        print(f"vllm-doctor: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except DoctorError as err:
        print(f"vllm-doctor: could not finish: {err}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        print("vllm-doctor: interrupted", file=sys.stderr)
        return 130
    return 0


def register(app) -> None:  # app: typer.Typer (typer is imported only when the CLI is built)
    import typer

    @app.command(
        "facts",
        help=USAGE,
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )
    def facts_cmd(ctx: typer.Context) -> None:
        run_facts(parse_facts_args(list(ctx.args)))


if __name__ == "__main__":
    sys.exit(fast_main(sys.argv[1:]))
