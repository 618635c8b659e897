"""Which CUDA release built the judged vLLM wheel, and what a build of the same release with
another CUDA major carries instead (facts ``release.kernels.published_cuda``,
``release.kernels.cuda12_build_family_only``, ``release.kernels.cuda12_build_lacks_image``).

The kernel tables (``kernel_images``) read the wheels on PyPI, one CUDA build per release:
its CUDA release shows in the PTX its fat binaries carry (PTX ISA 8.x is written by CUDA 12,
9.x by CUDA 13: NVIDIA's PTX ISA release notes). vLLM also publishes builds of the same
release for CUDA 12.9 (the ``+cu129`` wheels, the ``vllm/vllm-openai:*-cu129`` images), and a
source build takes the CUDA of the machine; each installs or needs the torch built for that
CUDA, so torch's CUDA says which one runs.

vLLM's CMakeLists.txt compiles its Blackwell CUTLASS kernels (FP8 scaled-mm and block-scaled
GEMM, NVFP4, the MoE grouped GEMMs) for the family target (``12.0f``) only when the compiler
is CUDA 13, else for the architecture-specific one (``12.0a``). A family image runs on every
member (12.0 and 12.1); ``sm_120a`` runs on 12.0 alone. So on a GB10 (12.1) a CUDA 12 build
of a release whose PyPI wheel is a CUDA 13 build has no image for the objects that wheel runs
there through ``sm_120f`` only (vLLM issue 43367: the cu129 images fail in the block-scaled
FP8 GEMM, the CUDA 13 build of the same code runs). Whether CUDA 12 builds use family targets
for a family at all is read, not assumed: from the newest covered release whose published
wheel for the machine is a CUDA 12 build (0.19.1: ``sm_100f`` beside ``sm_100a``, but no
``sm_120f`` and no ``sm_121a``), so a family they do build family images for is left out.

The kernel names the tables keep also show vLLM's exact-architecture wrapper
``enable_sm120_only`` (``__CUDA_ARCH__ == 1200``, else a trap) around the per-tensor FP8
CUTLASS GEMMs of 0.16.0-0.21.0 (0.22.0 wraps them in ``enable_sm120_family``, vLLM pull
request 41215): in images that run on a 12.1 GPU (the sm_120f of the CUDA 13 builds) the GEMM
traps there (``release.kernels.exact_arch_guard``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from vllm_doctor.facts.model import Facts

SOURCE = "release knowledge"
PATHS = (
    "release.kernels.published_cuda",
    "release.kernels.cuda12_build_family_only",
    "release.kernels.cuda12_build_lacks_image",
    "release.kernels.exact_arch_guard",
    "release.kernels.exact_arch_guard_runs",
    "release.kernels.ptx_beyond_driver",
    "release.kernels.ptx_beyond_driver_any",
)
# the CUDA release that introduced each PTX ISA version (NVIDIA's PTX ISA document, "Release
# Notes" / "PTX ISA Version" table): a driver JIT-compiles PTX up to the ISA of the CUDA
# release it supports. Only the versions vLLM's wheels carry and their neighbours.
_ISA_CUDA = {
    "8.0": "12.0",
    "8.1": "12.1",
    "8.2": "12.2",
    "8.3": "12.3",
    "8.4": "12.4",
    "8.5": "12.5",
    "8.7": "12.8",
    "8.8": "12.9",
    "9.0": "13.0",
}
# vLLM's CUTLASS wrappers that compile a kernel's body for one architecture only and trap
# elsewhere (csrc/cutlass_extensions: enable_sm120_only checks __CUDA_ARCH__ == 1200); the
# kernel tables keep each object's kernel names, where the wrapper shows as
# cutlass::device_kernel<enable_sm120_only>
_EXACT_GUARD = re.compile(r"\benable_sm(\d{2,3})_only\b")
# the PTX ISA major each CUDA major writes (PTX ISA 7.x: CUDA 11, 8.x: CUDA 12, 9.x: CUDA 13)
_ISA_TO_CUDA = 4


def cuda_major_of_isa(isa: str) -> int | None:
    """``"8.8"`` → 12, ``"9.0"`` → 13; None for anything else."""
    head = isa.split(".", 1)[0]
    return int(head) + _ISA_TO_CUDA if head.isdigit() else None


def published_cuda(readings: dict[str, Any], machine: str) -> int | None:
    """The CUDA major of a release's published wheel for the machine: the newest PTX ISA its
    extensions carry (None when none carries PTX)."""
    majors = [
        cuda_major_of_isa(group["ptx_isa"])
        for key, value in readings.items()
        if key.endswith(f"@{machine}") and isinstance(value, dict)
        for group in value.get("groups", ())
        if group.get("ptx_isa")
    ]
    known = [m for m in majors if m is not None]
    return max(known) if known else None


@lru_cache(maxsize=4)
def cuda12_images(machine: str) -> tuple[str, tuple[str, ...]] | None:
    """The images of the newest covered release whose published wheel for the machine is a
    CUDA 12 build: (release, images), what vLLM's CMake compiles under CUDA 12."""
    from packaging.version import Version

    from vllm_doctor import knowledge

    table = knowledge.load("kernel_images")
    for release in sorted(table.releases, key=Version, reverse=True):
        readings = table.at(release)
        if published_cuda(readings, machine) != 12:
            continue
        images = {
            image
            for key, value in readings.items()
            if key.endswith(f"@{machine}") and isinstance(value, dict)
            for group in value.get("groups", ())
            for image in group["images"]
        }
        return release, tuple(sorted(images))
    return None


def collect_cuda_build(
    facts: Facts,
    release: str,
    readings: dict[str, Any],
    machines: list[str],
    capabilities: list[int],
    describe: Any,
) -> None:
    """Write the three facts for the judged release (``readings``: its kernel_images entries)
    on the machines judged (one, or both where the machine is not known: decided where they
    agree); ``describe`` is release_stack's describer of a group of objects."""
    published = {m: published_cuda(readings, m) for m in machines}
    known = sorted({m for m in published.values() if m is not None})
    if len(known) == 1:
        facts.set(
            "release.kernels.published_cuda",
            known[0],
            SOURCE,
            f"the PTX ISA of vLLM {release}'s published wheel ({', '.join(machines)})",
        )
    else:
        facts.mark_missing(
            "release.kernels.published_cuda",
            f"vLLM {release}'s published wheels carry no PTX to read their CUDA from"
            if not known
            else f"vLLM {release}'s x86_64 and aarch64 wheels were built with other CUDA "
            "releases and the machine is not known",
        )
    torch_cuda, whence = build_cuda(facts)
    major = _major(torch_cuda)
    if major is None:
        for path in PATHS[1:]:
            facts.mark_missing(path, whence)
        return
    _guards(facts, release, readings, machines, capabilities, published, major, describe)
    _ptx_beyond_driver(facts, release, readings, machines, capabilities, describe)
    answers: dict[str, list[str]] = {}
    for machine in machines:
        built = published[machine]
        if built is None:
            continue
        if major >= built:
            answers[machine] = []  # the installed build's CUDA is the published wheel's
            continue
        answers[machine] = _lacking(readings, machine, capabilities, describe)
    if not answers:
        for path in PATHS[1:]:
            facts.mark_missing(path, f"vLLM {release}'s published CUDA build is not known")
        return
    verdicts = {bool(found) for found in answers.values()}
    if len(verdicts) != 1:
        for path in PATHS[1:]:
            facts.mark_missing(
                path,
                "the x86_64 and aarch64 builds differ here and the machine is not known",
            )
        return
    found = next(iter(answers.values()))
    c12 = cuda12_images(next(iter(answers)))
    detail = (
        f"{whence}: a CUDA {major} build of vLLM {release}, whose published "
        f"wheel is a CUDA {known[-1] if known else '?'} build"
        + (f"; CUDA 12 builds read from vLLM {c12[0]}'s wheel" if c12 else "")
    )
    facts.set("release.kernels.cuda12_build_family_only", found, SOURCE, detail)
    facts.set(
        "release.kernels.cuda12_build_lacks_image", bool(found), SOURCE, _listed(detail, found)
    )


_CUDA_LABEL = re.compile(r"(?:^|[.+])cu(\d{2})(\d)(?:$|\.)")


def build_cuda(facts: Facts) -> tuple[str | None, str]:
    """The CUDA release the installed vLLM was built with: the ``+cu129`` label of its version
    (vLLM's variant wheels and images), else torch's (a vLLM build follows the torch it was
    built against); (None, why) where neither is known."""
    version = str(facts.value("vllm.version") or "")
    local = version.partition("+")[2]
    label = _CUDA_LABEL.search(local) if local else None
    if label:
        return f"{int(label.group(1))}.{label.group(2)}", f"vLLM {version}'s label"
    torch_cuda = facts.value("torch.cuda_version")
    if torch_cuda is None:
        return None, (
            facts.why_missing("torch.cuda_version")
            or "torch's CUDA release is not known (the CUDA of vLLM's own build follows it)"
        )
    return ".".join(str(torch_cuda).split(".")[:2]), f"torch CUDA {torch_cuda}"


def _major(version: Any) -> int | None:
    head = str(version).split(".", 1)[0] if version is not None else ""
    return int(head) if head.isdigit() else None


def _lacking(
    readings: dict[str, Any], machine: str, capabilities: list[int], describe: Any
) -> list[str]:
    """The objects of the published (CUDA 13) wheel that run on the GPU only through a family
    image of another member, for a family whose images a CUDA 12 build makes
    architecture-specific and for a GPU whose own architecture a CUDA 12 build does not target."""
    from vllm_doctor.knowledge import cuda_images

    c12 = cuda12_images(machine)
    if c12 is None:
        return []
    built = [cuda_images.parse(i) for i in c12[1]]
    out: list[str] = []
    for capability in capabilities:
        family = capability // 10
        if any(i and i.variant == "f" and i.arch // 10 == family for i in built):
            continue  # CUDA 12 builds carry family images for this family too
        if any(i and i.kind == cuda_images.SASS and i.arch == capability for i in built):
            continue  # CUDA 12 builds target this GPU's own architecture
        for key in sorted(readings):
            if not key.endswith(f"@{machine}") or not isinstance(readings[key], dict):
                continue
            module = key.rpartition("@")[0]
            for group in readings[key]["groups"]:
                if _through_family_only(group["images"], capability):
                    out.append(
                        describe(module, [group], [capability], lambda g: True, objects=True)
                    )
    return out


def _through_family_only(images: list[str], capability: int) -> bool:
    """The GPU runs the group only through a family image of another member (sm_120f on a
    12.1 GPU): nothing else in it runs there."""
    from vllm_doctor.knowledge import cuda_images

    family = [
        text
        for text in images
        if (image := cuda_images.parse(text)) is not None
        and image.variant == "f"
        and image.arch != capability
        and cuda_images.runs_on(image, capability)
    ]
    others = [text for text in images if text not in family]
    return bool(family) and cuda_images.best(others, capability) == cuda_images.NONE


def _guards(
    facts: Facts,
    release: str,
    readings: dict[str, Any],
    machines: list[str],
    capabilities: list[int],
    published: dict[str, int | None],
    major: int,
    describe: Any,
) -> None:
    """``release.kernels.exact_arch_guard``: the objects whose kernels carry an exact-architecture
    wrapper for another member of the GPU's family (enable_sm120_only on a 12.1 GB10) in images
    that run on the GPU in the installed build: the published wheel's, or for a CUDA 13 build
    of a release published as a CUDA 12 build, the family image vLLM's CMake compiles instead
    of the member-specific one (sm_120f for sm_120a). The names are those the tables keep (the
    most frequent of up to 8 objects of a group), so an empty list is no proof of absence."""
    from vllm_doctor.knowledge import cuda_images

    answers: dict[str, list[str]] = {}
    for machine in machines:
        built = published[machine]
        if built is None:
            continue
        widen = major > built  # a CUDA 13 build of a CUDA 12 wheel
        found: list[str] = []
        for capability in capabilities:
            for key in sorted(readings):
                if not key.endswith(f"@{machine}") or not isinstance(readings[key], dict):
                    continue
                for group in readings[key]["groups"]:
                    guarded = {
                        int(arch)
                        for name in group.get("names", ())
                        for arch in _EXACT_GUARD.findall(name)
                    }
                    other = [a for a in guarded if a != capability and a // 10 == capability // 10]
                    if other and _runs(group["images"], capability, widen):
                        module = key.rpartition("@")[0]
                        note = (
                            ""
                            if cuda_images.best(group["images"], capability) != cuda_images.NONE
                            else f"; a CUDA {major} build compiles the family image instead"
                        )
                        found.append(
                            describe(module, [group], [capability], lambda g: True, objects=True)
                            + f" [wrapped in enable_sm{other[0]}_only{note}]"
                        )
        answers[machine] = found
    verdicts = {bool(found) for found in answers.values()}
    if len(verdicts) != 1:
        why = (
            "the x86_64 and aarch64 builds differ here and the machine is not known"
            if answers
            else f"vLLM {release}'s published CUDA build is not known"
        )
        for path in ("release.kernels.exact_arch_guard", "release.kernels.exact_arch_guard_runs"):
            facts.mark_missing(path, why)
        return
    found = next(iter(answers.values()))
    detail = f"kernel names in vLLM {release}'s fat binaries, for a CUDA {major} build"
    facts.set("release.kernels.exact_arch_guard", found, SOURCE, detail)
    facts.set("release.kernels.exact_arch_guard_runs", bool(found), SOURCE, _listed(detail, found))


def _runs(images: list[str], capability: int, widen: bool) -> bool:
    """The group has an image that runs on the GPU in the installed build."""
    from vllm_doctor.knowledge import cuda_images

    return cuda_images.best(installed_images(images, widen), capability) != cuda_images.NONE


def installed_images(images: list[str], widen: bool) -> list[str]:
    """A group's images as the installed build carries them; ``widen``: a CUDA 13 build of a
    release published as a CUDA 12 build, whose CMake compiles the Blackwell families'
    member-specific targets as family targets (sm_120a as sm_120f; sm_90a stays)."""
    from vllm_doctor.knowledge import cuda_images

    if not widen:
        return list(images)
    out = []
    for text in images:
        image = cuda_images.parse(text)
        blackwell = image is not None and image.variant == "a" and image.arch >= 100
        if image is not None and blackwell and image.kind == cuda_images.SASS:
            out.append(f"sm_{image.arch}f")
        else:
            out.append(text)
    return out


def widens(facts: Facts, readings: dict[str, Any], machine: str) -> bool:
    """torch's CUDA says the installed vLLM is a CUDA 13 (or newer) build of a release whose
    published wheel for the machine is a CUDA 12 build (torch +cu130 beside vLLM 0.19.1)."""
    major = _major(build_cuda(facts)[0])
    published = published_cuda(readings, machine)
    return major is not None and published is not None and major > published


def _ptx_beyond_driver(
    facts: Facts,
    release: str,
    readings: dict[str, Any],
    machines: list[str],
    capabilities: list[int],
    describe: Any,
) -> None:
    """``release.kernels.ptx_beyond_driver``: the objects that reach the GPU only as PTX, whose
    PTX the installed build's CUDA wrote and the driver's CUDA is too old to compile. torch runs
    on an older driver of its major (CUDA's minor-version compatibility); JIT-compiling PTX
    does not. The installed build's CUDA is the published wheel's (its PTX ISA) unless torch's
    stated CUDA names another release of it (a variant wheel, a source build)."""
    from packaging.version import InvalidVersion, Version

    from vllm_doctor.knowledge import cuda_images

    paths = ("release.kernels.ptx_beyond_driver", "release.kernels.ptx_beyond_driver_any")
    driver = facts.value("driver.cuda_version")
    try:
        driver_cuda = Version(str(driver)) if driver is not None else None
    except InvalidVersion:
        driver_cuda = None
    if driver_cuda is None:
        reason = (
            facts.why_missing("driver.cuda_version") or "the driver's CUDA version is not known"
        )
        for path in paths:
            facts.mark_missing(path, reason)
        return
    version = str(facts.value("vllm.version") or "")
    label = _CUDA_LABEL.search(version.partition("+")[2]) if "+" in version else None
    labelled = f"{int(label.group(1))}.{label.group(2)}" if label else None
    torch_fact = facts.get("torch.cuda_version")
    stated = None if torch_fact is None or torch_fact.inferred else str(torch_fact.value)
    stated = ".".join(stated.split(".")[:2]) if stated else None
    answers: dict[str, list[str]] = {}
    open_: list[str] = []
    for machine in machines:
        found: list[str] = []
        for key in sorted(readings):
            if not key.endswith(f"@{machine}") or not isinstance(readings[key], dict):
                continue
            module = key.rpartition("@")[0]
            for group in readings[key]["groups"]:
                if not group.get("names"):
                    continue  # no kernel in it (host code): nothing for the driver to compile
                if not any(
                    cuda_images.best(group["images"], c) == cuda_images.PTX for c in capabilities
                ):
                    continue
                wrote = _ISA_CUDA.get(str(group.get("ptx_isa")))
                if wrote is None:
                    continue
                # a +cuXYZ label names the build; else torch stated with another CUDA: the
                # installed vLLM is the published wheel (which runs beside an older torch) or
                # one built for torch's CUDA (a variant wheel or image, a source build),
                # decided where both answer alike
                builds = {labelled} if labelled else {wrote, stated or wrote}
                beyond = {Version(w) > driver_cuda for w in builds}
                shown = describe(module, [group], capabilities, lambda g: True, objects=True)
                if beyond == {True}:
                    found.append(
                        shown
                        + f" [PTX written by CUDA {min(builds, key=Version)}; the driver "
                        + f"supports CUDA {driver}]"
                    )
                elif len(beyond) > 1:
                    open_.append(f"{shown} [PTX of CUDA {wrote}, or {stated} for torch's build]")
        answers[machine] = found
    if len({bool(found) for found in answers.values()}) != 1:
        for path in paths:
            facts.mark_missing(
                path, "the x86_64 and aarch64 builds differ here and the machine is not known"
            )
        return
    found = next(iter(answers.values()))
    if not found and open_:
        for path in paths:
            facts.mark_missing(
                path,
                f"torch is a CUDA {stated} build and vLLM {release}'s wheel carries PTX of "
                f"another CUDA release: whether the installed vLLM is that wheel or a build for "
                f"torch's CUDA decides against the driver's CUDA {driver} ({open_[0]})",
            )
        return
    detail = f"PTX ISA of vLLM {release}'s objects against the driver's CUDA {driver}"
    facts.set(paths[0], found, SOURCE, detail)
    facts.set(paths[1], bool(found), SOURCE, _listed(detail, found))


def _listed(detail: str, found: list[str]) -> str:
    """The boolean fact's detail with the objects it stands for (a nightly judged across
    releases keeps the boolean only: this says which objects the judged release has)."""
    if not found:
        return detail
    shown = "; ".join(found[:3]) + (f"; and {len(found) - 3} more" if len(found) > 3 else "")
    return f"{detail}: {shown}"
