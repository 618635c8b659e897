"""Environment variables that change how vLLM, NCCL, CUDA, torch, the HF hub and vLLM's
companion packages behave: the one list of the variables the doctor collects.

A variable is collected when its name starts with one of ``PREFIXES`` or is one of ``NAMES``
(``is_collected``). The live collector (``collect_environment``), the collect-env report
parser (facts/report.py: the variables it reads outside the report's own environment
section) and ``rules validate`` (a rule naming a variable outside the list is an error: on a
live host the rule would never see it) read this one list. Each collected variable becomes
``env.<NAME>``; a name outside the list cannot be known from this machine's environment
(``environment_listing``).

Values of variables whose names look like secrets (``vllm_doctor.redact.is_secret_name``) are
replaced by ``<redacted>``: the fact that they are set stays visible, their value never reaches
a report; other values lose any credentials (``https://user:PASS@host``) and token-looking
words. The report parser and the serve line use the same module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from vllm_doctor.facts.model import Facts, Listing, Source
from vllm_doctor.redact import REDACTED, is_secret_name, redact_text

# vLLM, torch and its compiler, NCCL/RCCL and the other collectives, CUDA and its libraries,
# ROCm, the Hugging Face hub and transformers, and vLLM's companion packages
PREFIXES = (
    "VLLM_",
    "TORCH",
    "PYTORCH_",
    "NCCL_",
    "GLOO_",
    "CUDA_",
    "CUBLAS",
    "CUDNN",
    "NVIDIA_",
    "OMP_",
    "MKL_",
    "HF_",
    "TRANSFORMERS_",
    "TRITON_",
    "ROCM_",
    "HIP_",
    "HSA_",
    "RCCL_",
    "FLASHINFER_",
    "UCX_",
    "LMCACHE_",
    # Ray's switches that keep it from rewriting the devices a worker sees
    "RAY_EXPERIMENTAL_NOSET_",
)
# names outside the prefixes: the Hub's legacy token variable, the loader's search path, the
# C and C++ compilers Triton and Inductor build with (CC, CXX), where openai-harmony (gpt-oss) finds its
# vocabulary files offline (TIKTOKEN_*), Ray's memory monitor that kills workers when the node's
# memory runs low (RAY_memory_*)
NAMES = (
    "HUGGING_FACE_HUB_TOKEN",
    "LD_LIBRARY_PATH",
    "CC",
    "CXX",
    "TIKTOKEN_ENCODINGS_BASE",
    "TIKTOKEN_RS_CACHE_DIR",
    "RAY_memory_usage_threshold",
    "RAY_memory_monitor_refresh_ms",
)
is_secret = is_secret_name  # the name other modules know it by


def is_collected(name: str) -> bool:
    """The doctor collects this variable (from this machine, or a report's loose lines)."""
    return name.startswith(PREFIXES) or name in NAMES


def environment_listing() -> Listing:
    """What the live collector lists of ``env``: a variable outside the list cannot be known."""
    return Listing(
        "env",
        "{name} is not one of the variables the doctor collects from the environment "
        "(facts/environment.py: names starting with "
        + ", ".join(p.rstrip("_") + "*" for p in PREFIXES)
        + f", and {', '.join(NAMES)})",
        prefixes=PREFIXES,
        names=NAMES,
    )


def relevant_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of interest, secrets redacted, sorted by name (a secret's value is
    remembered: hidden wherever else it turns up)."""
    from vllm_doctor.redact import remember_secret

    for name, value in environ.items():
        if is_collected(name) and is_secret(name):
            remember_secret(value)
    return {
        name: (REDACTED if is_secret(name) else redact_text(value))
        for name, value in sorted(environ.items())
        if is_collected(name)
    }


def collect_environment(facts: Facts, environ: Mapping[str, str] | None = None) -> None:
    env = os.environ if environ is None else environ
    facts.set_listing(environment_listing())
    for name, value in relevant_environment(env).items():
        facts.set(f"env.{name}", value, Source.ENV)
