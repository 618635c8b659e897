"""Whether the CUDA release a torch build was compiled with can have built code for the GPU
(``release.kernels.torch_toolkit*``).

A CUDA build of torch (``torch 2.7.1+cu126``, ``CUDA used to build PyTorch: 12.6``) holds, in
the fat binaries of its CUDA libraries, machine code (``sm_XY``) and PTX (``compute_XY``) only
for architectures that CUDA release's compiler knows: ``knowledge/data/cuda_toolkits.json``,
read from NVIDIA's ``nvidia-cuda-nvcc`` wheels (``tools/cuda_toolkits.py``). That decides two
cases for any torch version and any CUDA variant (cu118 ... cu130), also one no fat binary was
read from (the PyPI wheel is one CUDA variant per torch version; the others live on PyTorch's
own index):

* **no image at all** (``torch_toolkit_no_image``): the GPU is older than every architecture
  the release builds for (a V100, sm_70, under CUDA 13.0, which starts at compute_75): no
  machine code, and PTX runs only on its own architecture and newer ones. torch warns that
  ``sm_70 is not compatible with the current PyTorch installation`` and the first kernel fails
  with ``no kernel image is available for execution on the device``.
* **PTX at best** (``torch_toolkit_ptx_only``): the release knows no architecture whose machine
  code runs on the GPU (an RTX 5090, sm_120, under CUDA 12.6, which ends at sm_90a): only PTX of
  an older architecture, compiled by the driver, could run, and PyTorch's builds of the version
  carry none where they were read (the PyPI wheels' fat binaries: ``stack/torch.json``). A
  warning: the variant's own fat binary was not read.

The CUDA release comes from the torch in hand (``torch.cuda_version``: a report's
``CUDA used to build PyTorch``, the ``+cuXYZ`` label of a version, ``--torch-version``, this
machine's torch); one inferred from a vLLM release's pin decides only the warning, where every
build it leaves possible agrees, and nothing on a Jetson module (NVIDIA's own torch builds run
there).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from vllm_doctor.facts.model import EACH_RELEASE, Facts

SOURCE = "release knowledge"
PATHS = (
    "release.kernels.torch_toolkit",
    "release.kernels.torch_toolkit_no_image",
    "release.kernels.torch_toolkit_ptx_only",
)
TABLE = "knowledge/data/cuda_toolkits.json (the architectures of each CUDA release's ptxas)"


def collect_torch_toolkit(facts: Facts) -> None:
    cuda = facts.get("torch.cuda_version")
    if cuda is None:
        reason = facts.why_missing("torch.cuda_version") or "torch's CUDA build is not known"
        _missing(facts, reason + " (name it: --torch-version 2.7.1+cu126, or a report)")
        return
    vllm = facts.get("vllm.version")
    if cuda.inferred and vllm is not None and vllm.detail == EACH_RELEASE:
        # each covered release tried in turn for an unknown vLLM version: the torch each one
        # pins is a what-if, not the build in hand (as for vLLM's own kernels)
        _missing(facts, "the vLLM version is not known: which torch build it brings is not known")
        return
    if cuda.inferred:
        from vllm_doctor.knowledge.gpus import embedded_family

        embedded = embedded_family(facts.value("gpu.names") or [])
        if embedded:
            # a Jetson module runs NVIDIA's own torch builds (JetPack, jetson-containers), not
            # the PyPI build a vLLM release's pin names
            _missing(
                facts,
                f"torch's CUDA build is inferred ({cuda.detail}), and a {embedded} runs "
                "NVIDIA's own torch builds: name the build (--torch-version X+cuXYZ, a report)",
            )
            return
    releases = toolkit_releases()
    builds = sorted({_minor(str(b)) for b in _builds(cuda, releases)}, key=Version)
    capabilities = facts.value("gpu.capabilities")
    if not isinstance(capabilities, list) or not capabilities:
        _missing(
            facts,
            facts.why_missing("gpu.capabilities") or "the GPU's compute capability is not known",
        )
        return
    unread = [b for b in builds if b not in releases]
    if unread:
        _missing(facts, f"the compiler of CUDA {', '.join(unread)} was not read ({TABLE})")
        return
    torch = facts.get("torch.version")  # the torch judged (--torch-version wins over this host's)
    version = str(torch.value) if torch is not None else None
    said: list[str] = []
    no_image: list[str] = []
    ptx_only: list[str] = []
    for capability in sorted({int(c) for c in capabilities if isinstance(c, int)}):
        verdicts = {build: _verdict(releases[build]["archs"], capability) for build in builds}
        for build, verdict in verdicts.items():
            said.append(f"sm_{capability} under CUDA {build}: {_SAID[verdict]}")
        agreed = set(verdicts.values())
        if len(agreed) != 1:
            continue
        verdict = agreed.pop()
        built = _built_with(version, builds, releases, cuda.inferred)
        if verdict == "none":
            entry = (
                f"sm_{capability}: {built}: no machine code or PTX built by it runs on "
                f"sm_{capability}"
            )
            # an inferred build decides only the warning
            (ptx_only if cuda.inferred else no_image).append(entry)
        elif verdict == "ptx":
            ptx_only.append(
                f"sm_{capability}: {built}: no machine code for sm_{capability}, only PTX of an "
                f"older architecture could run; {_ptx_in_builds_read(version)}"
            )
    evidence = "; ".join(said)
    facts.set("release.kernels.torch_toolkit", evidence, SOURCE, TABLE)
    facts.set("release.kernels.torch_toolkit_no_image", no_image, SOURCE, evidence)
    facts.set("release.kernels.torch_toolkit_ptx_only", ptx_only, SOURCE, evidence)


@cache
def toolkit_releases() -> dict[str, dict[str, Any]]:
    """CUDA ``X.Y`` → ``ptxas``, ``wheel``, ``archs`` (the generated table)."""
    from vllm_doctor.knowledge import DATA_DIR

    path = DATA_DIR / "cuda_toolkits.json"
    releases: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["releases"]
    return releases


def _missing(facts: Facts, reason: str) -> None:
    for path in PATHS:
        facts.mark_missing(path, reason)


def _builds(cuda: Any, releases: dict[str, Any]) -> list[str]:
    """The CUDA releases torch's build may be: the one known, or every one an inferred value
    leaves possible (a list, or a range such as ``>=13.0,<14.0``: the releases read in it)."""
    if not cuda.inferred or not cuda.possible:
        return [str(cuda.value)]
    if isinstance(cuda.possible, list):
        return [str(v) for v in cuda.possible]
    spec = SpecifierSet(str(cuda.possible))
    return [release for release in releases if spec.contains(release)] or [str(cuda.value)]


def _minor(cuda: str) -> str:
    """``12.6.3`` → ``12.6`` (the table is per minor release)."""
    return ".".join(cuda.split(".")[:2])


_SAID = {
    "sass": "machine code can be built",
    "ptx": "only PTX of an older architecture can run",
    "none": "nothing can be built that runs",
}


def _verdict(archs: list[str], capability: int) -> str:
    """``sass`` when the release builds machine code that runs on the GPU, ``ptx`` when only
    PTX of an older architecture would, ``none`` when nothing it builds runs there."""
    from vllm_doctor.knowledge import cuda_images

    sass = [a.replace("compute_", "sm_", 1) for a in archs]
    return cuda_images.best([*sass, *archs], capability)


def _built_with(
    version: str | None, builds: list[str], releases: dict[str, Any], inferred: bool
) -> str:
    """``torch 2.7.1+cu126 is built with CUDA 12.6, whose compiler builds for compute_50 …
    compute_90a``, every possible build named where it is inferred."""
    name = f"torch {version}" if version else "torch"
    spans = " or ".join(f"CUDA {b} (compute_{_first_last(releases[b]['archs'])})" for b in builds)
    if inferred:
        return f"{name} is built with {spans} (its CUDA build inferred, not known)"
    return f"{name} is built with {spans}, the architectures its compiler builds for"


def _first_last(archs: list[str]) -> str:
    return f"{archs[0].removeprefix('compute_')} … {archs[-1].removeprefix('compute_')}"


def _ptx_in_builds_read(version: str | None) -> str:
    """What the PyPI builds of this torch version read say about PTX."""
    from vllm_doctor.knowledge import stack

    keys: dict[str, Any] | None = stack.at("torch", version) if version else None
    if not keys:
        return "whether this build carries PTX is not known (its fat binaries were not read)"
    images = {
        image
        for key, value in keys.items()
        if key.startswith("images:") and isinstance(value, dict)
        for group in value.get("groups", ())
        for image in group.get("images", ())
    }
    ptx = sorted(i for i in images if i.startswith("compute_"))
    built = (keys.get("cuda") or {}).get("version")
    if ptx:
        return f"PyTorch's PyPI build of {version} (CUDA {built}) carries PTX {', '.join(ptx)}"
    return (
        f"PyTorch's PyPI build of {version} (CUDA {built}) carries no PTX at all, so neither "
        f"will this one unless built with it (TORCH_CUDA_ARCH_LIST ending in +PTX)"
    )
