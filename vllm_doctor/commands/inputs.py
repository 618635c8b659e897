"""The input options that `check`, `facts` and `probe` share, declared once, and how their
comma-separated lists are read."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import typer

SERVE = typer.Option(None, "--serve", help='The serve line as one string: "vllm serve MODEL ...".')
SERVE_CONFIG = typer.Option(
    None,
    "--serve-config",
    help="A vLLM serve config file (YAML); a manifest given here is read as --manifest.",
)
MANIFEST = typer.Option(
    None,
    "--manifest",
    help="A Kubernetes manifest (multi-document YAML: helm template, kubectl "
    "-o yaml), docker-compose file or Dockerfile, or - for standard input: each container "
    "that runs vLLM is checked with the facts the file states.",
)
MODEL_CONFIG = typer.Option(
    None, "--model-config", help="The model's config.json or model directory."
)
REPORT = typer.Option(
    None, "--report", help="A `vllm collect-env` report: its facts replace this machine's."
)
LOG = typer.Option(None, "--log", help="A crash log to match against the known failures.")
VLLM_VERSION = typer.Option(None, "--vllm-version", help="What if vLLM were this version.")
TORCH_VERSION = typer.Option(None, "--torch-version", help="What if torch were this version.")
GPU = typer.Option(
    None,
    "--gpu",
    help='What if the GPUs were this model ("H100 80GB", '
    '"RTX 3090"; names from the GPU table): replaces this machine\'s GPUs.',
)
GPUS = typer.Option(
    None,
    "--gpus",
    help="How many GPUs the target has (with --gpu; without it, the GPUs here when they are the one named, else not known).",
)
DRIVER = typer.Option(None, "--driver", help="What if the NVIDIA driver were this version.")
CUDA = typer.Option(
    None, "--cuda", help="What if the driver's CUDA version (nvidia-smi) were this."
)
OFFLINE = typer.Option(
    False,
    "--offline",
    help="Never ask the Hugging Face Hub for a model's config.json (also HF_HUB_OFFLINE=1).",
)
VERBOSE = typer.Option(
    False, "--verbose", "-v", help="Sources of every fact, everything undecided, timings."
)


def split_commas(values: Iterable[str] | None) -> list[str] | None:
    """Repeatable comma-separated option values as one list (``--select A,B --select C``);
    None when nothing is named."""
    return [p.strip() for v in values or () for p in v.split(",") if p.strip()] or None


def check_version(option: str, value: str) -> None:
    """A what-if version must be a version (PEP 440, as pip and the wheels spell them)."""
    from packaging.version import InvalidVersion, Version

    from vllm_doctor.errors import InputError

    shown = value if len(value) <= 40 else value[:40] + "…"
    try:
        if len(value) > 128:
            raise InvalidVersion(value)
        Version(value.strip())
    except InvalidVersion:
        raise InputError(
            option,
            f"{shown!r} is not a version (like 0.11.0, 0.12.0rc1, "
            "0.13.0.dev5+g1a2b3c, 2.9.0+cu128)",
        ) from None


def collect_options(
    serve_tokens: list[str] | None,
    serve: str | None,
    serve_config: Path | None,
    model_config: Path | None,
    report: Path | None,
    log: Path | None,
    vllm_version: str | None,
    torch_version: str | None,
    gpu: str | None = None,
    gpus: int | None = None,
    driver: str | None = None,
    cuda: str | None = None,
    offline: bool = False,
):
    """The collector's options from the shared input options of `check` and `facts`."""
    from vllm_doctor.facts.collect import CollectOptions
    from vllm_doctor.facts.hardware import TargetHardware

    for option, value in (("--vllm-version", vllm_version), ("--torch-version", torch_version)):
        if value is not None:
            check_version(option, value)

    return CollectOptions(
        serve_tokens=list(serve_tokens) if serve_tokens else None,
        serve_string=serve,
        serve_config=serve_config,
        model_config=model_config,
        report=report,
        log=log,
        vllm_version=vllm_version,
        torch_version=torch_version,
        target=TargetHardware(gpu=gpu, count=gpus, driver=driver, cuda=cuda) or None,
        offline=offline,
    )
