"""The input options that `check`, `facts` and `probe` share, declared once, and how their
comma-separated lists are read."""

from __future__ import annotations

from typing import Iterable

from pathlib import Path

import typer

SERVE = typer.Option(None, "--serve", help='The serve line as one string: "vllm serve MODEL ...".')
SERVE_CONFIG = typer.Option(None, "--serve-config", help="A vLLM serve config file (YAML).")
MODEL_CONFIG = typer.Option(None, "--model-config", help="The model's config.json or model directory.")
REPORT = typer.Option(None, "--report", help="A `vllm collect-env` report: its facts replace this machine's.")
LOG = typer.Option(None, "--log", help="A crash log to match against the known failures.")
VLLM_VERSION = typer.Option(None, "--vllm-version", help="What if vLLM were this version.")
TORCH_VERSION = typer.Option(None, "--torch-version", help="What if torch were this version.")
VERBOSE = typer.Option(False, "--verbose", "-v", help="Sources of every fact, everything undecided, timings.")


def split_commas(values: Iterable[str] | None) -> list[str] | None:
    """Repeatable comma-separated option values as one list (``--select A,B --select C``);
    None when nothing is named."""
    return [p.strip() for v in values or () for p in v.split(",") if p.strip()] or None


def collect_options(serve_tokens: list[str] | None, serve: str | None, serve_config: Path | None,
                    model_config: Path | None, report: Path | None, log: Path | None,
                    vllm_version: str | None, torch_version: str | None):
    """The collector's options from the shared input options of `check` and `facts`."""
    from vllm_doctor.facts.collect import CollectOptions

    return CollectOptions(
        serve_tokens=list(serve_tokens) if serve_tokens else None, serve_string=serve,
        serve_config=serve_config, model_config=model_config, report=report, log=log,
        vllm_version=vllm_version, torch_version=torch_version,
    )
