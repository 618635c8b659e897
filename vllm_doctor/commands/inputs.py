"""The input options that `check`, `facts` and `probe` share, declared once."""

from __future__ import annotations

import typer

SERVE = typer.Option(None, "--serve", help='The serve line as one string: "vllm serve MODEL ...".')
SERVE_CONFIG = typer.Option(None, "--serve-config", help="A vLLM serve config file (YAML).")
MODEL_CONFIG = typer.Option(None, "--model-config", help="The model's config.json or model directory.")
REPORT = typer.Option(None, "--report", help="A `vllm collect-env` report: its facts replace this machine's.")
LOG = typer.Option(None, "--log", help="A crash log to match against the known failures.")
VLLM_VERSION = typer.Option(None, "--vllm-version", help="What if vLLM were this version.")
TORCH_VERSION = typer.Option(None, "--torch-version", help="What if torch were this version.")
VERBOSE = typer.Option(False, "--verbose", "-v", help="Sources of every fact, everything undecided, timings.")
