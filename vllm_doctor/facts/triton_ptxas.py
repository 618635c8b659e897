"""Whether the ptxas Triton bundles can compile for the GPU (``release.kernels.triton_ptxas*``).

Triton compiles every kernel (vLLM's, FlashInfer's, torch.compile's) to PTX and then to machine
code with the ptxas it bundles, passing ``--gpu-name=sm_XYa`` (``sm_XY`` below compute
capability 9.0; ``sm_arch_from_capability`` in ``triton/backends/nvidia/compiler.py``). Wheels
that bundle a second ``ptxas-blackwell`` use it for capability 10.0 and above (``get_ptxas``,
Triton 3.3 on). Which CUDA release each binary comes from and which GPU names it accepts is read
from the wheels (``tools/stack_readers.py``'s ``ptxas``, the ``ptxas:<path>`` keys of
``knowledge/data/stack/triton.json``); a GPU name it lacks ends every Triton compile with
``ptxas fatal : Value 'sm_121a' is not defined for option 'gpu-name'``. ``TRITON_PTXAS_PATH``
(``TRITON_PTXAS_BLACKWELL_PATH`` for the second binary) points Triton at another ptxas.
"""

from __future__ import annotations

from collections.abc import Callable

from vllm_doctor.facts.model import Facts

SOURCE = "release knowledge"
PATHS = ("release.kernels.triton_ptxas", "release.kernels.triton_ptxas_lacks_gpu")
BUNDLED = "triton/backends/nvidia/bin/ptxas"
BLACKWELL = "triton/backends/nvidia/bin/ptxas-blackwell"


def gpu_name(capability: int) -> str:
    """The ``--gpu-name`` Triton passes for a compute capability (120 → ``sm_120a``)."""
    return f"sm_{capability}" + ("a" if capability >= 90 else "")


def collect_triton_ptxas(
    facts: Facts, installed: Callable[..., tuple[str | None, str | None]]
) -> None:
    from vllm_doctor.knowledge import stack

    version, why = installed(facts, "triton", inferred=False)
    if version is None:
        reason = (why or "triton is not installed here") + (
            " (name the serving environment's: --package triton==X, or a report's pip list)"
        )
        for path in PATHS:
            facts.mark_missing(path, reason)
        return
    keys = stack.at("triton", version)
    binaries = {
        key.partition(":")[2]: value
        for key, value in (keys or {}).items()
        if key.startswith("ptxas:") and isinstance(value, dict)
    }
    if not binaries:
        for path in PATHS:
            facts.mark_missing(path, f"the ptxas triton {version} bundles was not read")
        return
    capabilities = facts.value("gpu.capabilities")
    if not isinstance(capabilities, list) or not capabilities:
        reason = (
            facts.why_missing("gpu.capabilities") or "the GPU's compute capability is not known"
        )
        for path in PATHS:
            facts.mark_missing(path, reason)
        return
    said: list[str] = []
    lacking: list[str] = []
    overridden: list[str] = []
    for capability in sorted({int(c) for c in capabilities if isinstance(c, int)}):
        path, variable = (
            (BLACKWELL, "TRITON_PTXAS_BLACKWELL_PATH")
            if capability >= 100 and BLACKWELL in binaries
            else (BUNDLED, "TRITON_PTXAS_PATH")
        )
        tool = binaries.get(path)
        if tool is None:
            continue
        name = gpu_name(capability)
        known = name in (tool.get("gpu_names") or [])
        said.append(
            f"triton {version} compiles for {name} with its bundled {path.rsplit('/', 1)[-1]} "
            f"(CUDA {tool.get('cuda') or 'unknown'}), which "
            + ("accepts it" if known else f"does not know {name}")
        )
        if known:
            continue
        override = facts.value(f"env.{variable}")
        if override:
            overridden.append(f"{variable}={override} points Triton at another ptxas")
        else:
            lacking.append(
                f"{name}: triton {version}'s bundled ptxas is CUDA {tool.get('cuda')} "
                f"(set {variable} to a CUDA toolkit's ptxas that knows {name})"
            )
    if not said:
        for path in PATHS:
            facts.mark_missing(path, f"triton {version}'s ptxas readings name no binary")
        return
    facts.set(
        "release.kernels.triton_ptxas",
        "; ".join(said + overridden),
        SOURCE,
        "knowledge/data/stack/triton.json (the ptxas binaries read from the triton wheel)",
    )
    facts.set(
        "release.kernels.triton_ptxas_lacks_gpu",
        "; ".join(lacking),
        SOURCE,
        "; ".join(said + overridden),
    )
