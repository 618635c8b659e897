"""The catalogue of fact paths: what each one means and how a user can supply it.

The paths themselves are in two halves joined here into ``FACTS``: those read from the
machine and the inputs (facts/schema_observed.py) and those computed from them
(facts/schema_computed.py). This module keeps, per area, how to supply a missing fact
(``SUPPLY_HINTS``), which modules write it (``WRITERS``) and what may be inferred
(``INFERABLE``), and the lookups the engine and the rule validator use.

Collectors write only these paths; rule conditions may only name these paths (the rule
validator rejects anything else). A trailing ``*`` stands for one free path segment
(``packages.*`` is ``packages.transformers``, ``env.*`` is ``env.VLLM_ATTENTION_BACKEND``).

Capabilities are integers as vLLM writes them (``major * 10 + minor``: 80, 89, 90, 100, 120).
Versions are strings (compare them with the ``version`` condition, never as numbers).
"""

from __future__ import annotations

import fnmatch
from functools import lru_cache

from vllm_doctor.facts.model import FactSpec
from vllm_doctor.facts.schema_computed import COMPUTED
from vllm_doctor.facts.schema_observed import OBSERVED

# How to supply the facts of an area when they are missing (shown with "cannot decide").
SUPPLY_HINTS: dict[str, str] = {
    "vllm": "run where vLLM is installed, pass --report collect-env.txt, or --vllm-version V",
    "torch": "run where torch is installed, pass --report collect-env.txt, or --torch-version V",
    "packages": "run in the serving environment, or pass --report collect-env.txt",
    "driver": "run on the GPU host, or pass --report collect-env.txt",
    "gpu": "run on the GPU host, or pass --report collect-env.txt",
    "topology": "run on the GPU host, or pass --report collect-env.txt (its GPU Topology block)",
    "model": "pass --model-config PATH (a config.json or model directory), a local model path "
    "to `vllm serve`, have the model in the Hugging Face cache, or let the doctor read it from "
    "the Hub (not --offline; HF_TOKEN for a gated model)",
    "serve": "pass the serve line: `vllm-doctor check -- vllm serve MODEL ...` or --serve '...'",
    "env": "set the variable in this shell, or pass --report collect-env.txt",
    "platform": "run on the host (or in the container) that serves, pass --report "
    "collect-env.txt (its Python platform line names the kernel), or state it: --platform wsl2 "
    "(linux, container, arbitrary-uid, kernel=RELEASE, glibcxx=VERSION, hami-core)",
    "container": "run `vllm-doctor check` (or `vllm-doctor serve`) inside the container, as "
    "the user it runs as",
    "log": "pass --log crash.txt",
    "deploy": "pass the deployment: --manifest FILE (a Kubernetes manifest, a docker-compose "
    "file or a Dockerfile)",
    "derived": "supply the facts it is computed from (model config, GPUs, serve line)",
    "memory": "pass the model's config (--model-config), the GPU (--gpu NAME, or run on the "
    "host) and the serve line",
    "host": "run on the node itself (`vllm-doctor facts` there, or `vllm-doctor fleet`)",
    "nccl": "run in the serving environment of the node (`vllm-doctor fleet` runs it there)",
    "fleet": "check the whole fleet: `vllm-doctor fleet --ray [ADDRESS] -- vllm serve ...`, or "
    "`vllm-doctor fleet --facts DIR` on every node's `vllm-doctor facts --format json`",
    "release": "give a vLLM version the knowledge covers (0.8.0-0.33.0): run where vLLM is "
    "installed, pass --report collect-env.txt, or --vllm-version V; plus the serve line / "
    "model config / packages the fact compares",
}


# every fact path, in the order `facts --schema` and docs/facts.md list them: those read from
# the machine and the inputs (facts/schema_observed.py), then those computed from them
# (facts/schema_computed.py)
FACTS: dict[str, FactSpec] = {**OBSERVED, **COMPUTED}


# The modules (under vllm_doctor/) that write each area's facts, the longest prefix first
# taken: `facts --schema` and docs/facts.md name them, tests/test_fact_schema.py checks that
# every fact's name is in one of its writers.
WRITERS: dict[str, tuple[str, ...]] = {
    "vllm": ("facts/packages.py", "facts/report.py", "facts/release.py"),
    "torch": ("facts/packages.py", "facts/report.py", "facts/stack.py"),
    "packages": ("facts/packages.py", "facts/report_packages.py", "facts/stack.py"),
    "driver": ("facts/gpus.py", "facts/report.py", "facts/hardware.py"),
    "gpu": ("facts/gpus.py", "facts/report_gpus.py", "facts/hardware.py"),
    "topology": ("facts/gpus.py", "facts/report_gpus.py"),
    "topology.acs_redirect": ("facts/pcie_acs.py", "facts/report_gpus.py"),
    "model": ("facts/model_config.py", "facts/model_source.py"),
    "serve": ("serveline/line.py",),
    "env": (
        "facts/environment.py",
        "facts/report_packages.py",
        "serveline/line.py",
        "serveline/target.py",
    ),
    "deploy": ("serveline/target.py",),
    "log": ("facts/collect.py",),
    "derived": ("facts/derived.py",),
    "memory": ("memory/facts.py",),
    "host": ("facts/host.py",),
    "nccl": ("facts/host.py",),
    "fleet": ("fleet/fleetfacts.py",),
    "release": (
        "facts/release.py",
        "facts/release_options.py",
        "facts/release_model.py",
        "facts/release_pins.py",
        "facts/release_startup.py",
    ),
    "release.env": ("facts/release_env.py",),
    "release.env_unknown": ("facts/release_env.py",),
    "release.env_invalid": ("facts/release_env.py",),
    "release.model_runner_v2": ("facts/release_env.py",),
    "release.deep_gemm": ("facts/release_env.py",),
    "release.deep_gemm_arch": ("facts/release_env.py",),
    "release.quant": ("facts/release_kernels.py",),
    "release.aiter": ("facts/release_env.py",),
    "release.uma_free_memory": ("facts/release_memory.py",),
    "release.aiter_moe_refused": ("facts/release_aiter_moe.py",),
    "release.moe_backend": ("facts/release_moe_backend.py",),
    "derived.aiter_moe_untuned": ("facts/aiter_tuned.py",),
    "platform": ("facts/platform.py",),
    "platform.glibcxx": ("facts/platform.py", "facts/distro.py"),
    "platform.cuda_interposer": ("facts/platform.py", "serveline/target.py"),
    "container": ("facts/platform.py",),
    "gpu.gfx_targets": ("facts/platform.py",),
    "gpu.unified_memory": ("facts/platform.py",),
    "release.attention": ("facts/release_kernels.py",),
    "release.stack": ("facts/release_stack.py",),
    **{
        f"release.stack.{name}": ("facts/release_partner.py",)
        for name in ("partner_imports_missing", "partner_imports_at_risk", "partner_imports_fix")
    },
    **{
        f"release.stack.{name}": ("facts/release_transformers.py",)
        for name in (
            "model_type_unknown",
            "model_type_fix",
            "transformers_refuses",
            "transformers_refuses_fix",
        )
    },
    "release.api": ("facts/release_api.py",),
    "stack.requirements": ("facts/installed_requires.py",),
    "release.kernels": ("facts/release_stack.py",),
    "release.flashinfer_sampler_jit": ("facts/flashinfer_jit.py",),
    **{
        f"release.flashinfer_attention_{name}": ("facts/flashinfer_attention_jit.py",)
        for name in ("jit", "modules", "alternatives")
    },
    "release.attention.kv_cache_backends": ("facts/kv_cache_backends.py",),
    "release.attention.kv_cache_triton_only": ("facts/kv_cache_backends.py",),
    "release.kernels.triton_ptxas": ("facts/triton_ptxas.py",),
    "release.kernels.triton_ptxas_lacks_gpu": ("facts/triton_ptxas.py",),
    "release.kernels.torch_toolkit": ("facts/torch_toolkit.py",),
    "release.kernels.torch_toolkit_no_image": ("facts/torch_toolkit.py",),
    "release.kernels.torch_toolkit_ptx_only": ("facts/torch_toolkit.py",),
    "platform.nvcc_found": ("facts/toolkit.py",),
    **{
        f"release.kernels.{name}": ("facts/cuda_build.py",)
        for name in (
            "published_cuda",
            "cuda12_build_family_only",
            "cuda12_build_lacks_image",
            "exact_arch_guard",
            "exact_arch_guard_runs",
            "ptx_beyond_driver",
            "ptx_beyond_driver_any",
        )
    },
}

# Facts a collector may infer when they were not observed (Facts.infer: from the GPU table, a
# release's pins, NVIDIA's driver table; Source.INFERRED: from the model's name). An inferred
# value is marked as such in every report; tests/test_fact_schema.py reads the collectors'
# source for the facts they infer and compares with this list.
INFERABLE: frozenset[str] = frozenset(
    {
        "gpu.capabilities",
        "gpu.min_capability",
        "gpu.max_capability",
        "gpu.memory_total_mib",
        "gpu.memory_free_mib",
        "gpu.gfx_targets",
        "gpu.unified_memory",
        "driver.cuda_version",
        "torch.version",
        "torch.cuda_version",
        "packages.*",
        "release.flashinfer_version",
        "model.quant_scheme",
        "model.quant_method",
        "model.family",
        "model.inferred",
        "platform.glibcxx",
    }
)


def writers(path: str) -> tuple[str, ...]:
    """The modules that write ``path`` (the entry of its longest area prefix)."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        found = WRITERS.get(".".join(parts[:end]))
        if found:
            return found
    return ()


def spec_for(path: str) -> FactSpec | None:
    """The spec of a fact path, matching ``*`` patterns segment by segment."""
    spec = FACTS.get(path)
    if spec is not None:
        return spec
    for pattern, pattern_spec in FACTS.items():
        if (
            "*" in pattern
            and pattern.count(".") == path.count(".")
            and fnmatch.fnmatchcase(path, pattern)
        ):
            return pattern_spec
    return None


def is_known_path(path: str) -> bool:
    return spec_for(path) is not None


@lru_cache(maxsize=2048)
def absent_is_unknown(path: str) -> bool:
    """A fact that every real input has: not being there means it could not be read."""
    spec = spec_for(path)
    return spec is not None and spec.never_absent


def supply_hint(path: str) -> str:
    return SUPPLY_HINTS.get(path.split(".", 1)[0], "supply the missing input")
