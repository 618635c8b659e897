"""Reader: a serve config YAML file as vLLM's ``--config`` reads it."""

from __future__ import annotations

from pathlib import Path

from vllm_doctor.errors import InputError
from vllm_doctor.serveline.line import ServeLine
from vllm_doctor.serveline.parser import parse_serve_argv


def load_serve_config(path: Path) -> ServeLine:
    """A YAML file like vLLM's ``--config`` (``model:`` gives the model)."""
    from vllm_doctor.bounds import expand_path

    path = expand_path(path, "--serve-config").resolve()
    try:
        return parse_serve_argv(["serve", "--config", str(path)])
    except InputError as err:  # read as vLLM's --config, but the user gave --serve-config
        if err.source != "--config":
            raise
        raise InputError("--serve-config", err.problem) from None
