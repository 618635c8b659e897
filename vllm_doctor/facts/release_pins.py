"""The judged release's pins (its wheels' CUDA major, transformers requirement and torch pin)
against what is installed, and what a what-if release (``--vllm-version``) leaves open: a
package installed here says nothing about the stack that release would bring, and a build
not from vLLM's own wheels need not carry its release's torch pin."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.packages import satisfies
from vllm_doctor.facts.release_options import SOURCE


def _pins(facts: Facts, release: str) -> None:
    from vllm_doctor import knowledge

    table = knowledge.load("pins")
    pins = table.at(release)
    cuda = pins.get("cuda")
    if cuda:
        facts.set("release.cuda_major", cuda["major"], SOURCE, f"vLLM {release}: {cuda['from']}")
    trf = pins.get("transformers")
    if trf and trf.get("spec"):
        facts.set(
            "release.transformers_requirement",
            trf["spec"],
            SOURCE,
            f"Requires-Dist of vLLM {release}",
        )
        installed = facts.value("packages.transformers")
        if why := what_if_without(facts, "packages.transformers"):
            facts.mark_missing("release.transformers_in_range", why)
        elif installed is not None:
            inside = satisfies(str(installed), trf["spec"])
            if inside is not None:
                facts.set(
                    "release.transformers_in_range",
                    inside,
                    SOURCE,
                    f"transformers {installed} against {trf['spec']}",
                )
    torch = pins.get("torch")
    if torch and torch.get("pin"):
        facts.set("release.torch_pin", torch["pin"], SOURCE, f"Requires-Dist of vLLM {release}")
        installed = facts.value("torch.version")
        # the installed vLLM's own metadata (ENV002) wins over the table
        from_installed = "torch.matches_vllm_pin" in facts
        facts.set(
            "release.torch_pin_from",
            "installed metadata" if from_installed else "release table",
            SOURCE,
        )
        if why := what_if_without(facts, "torch.version"):
            facts.mark_missing("release.torch_matches_pin", why)
        elif installed is not None:
            inside = satisfies(str(installed).split("+")[0], f"=={torch['pin']}")
            built = _built_elsewhere(str(facts.value("vllm.version") or ""))
            if inside is False and built is not None:
                # the table holds the pin of the release's own wheels; this build's ops were
                # compiled against another torch, which only its own metadata names
                facts.mark_missing(
                    "release.torch_matches_pin",
                    f"{built}; torch {installed} differs from the pin of vLLM {release}'s "
                    f"wheels ({torch['pin']}), which this build need not have (`pip show vllm` "
                    "there names its requirement)",
                )
            elif inside is not None:
                facts.set(
                    "release.torch_matches_pin",
                    inside,
                    SOURCE,
                    f"torch {installed} against =={torch['pin']}",
                )
    _flashinfer_version(facts, release)


def _flashinfer_version(facts: Facts, release: str) -> None:
    """The flashinfer-python vLLM runs with: the installed or reported one; where that
    cannot be read (a what-if release, a report that lists no packages), the judged
    release's pin (Requires-Dist ==X), inferred: what installing that release brings. A
    package list that does not have it leaves the fact absent (no FlashInfer to run)."""
    from vllm_doctor import knowledge

    path = "packages.flashinfer-python"
    why = what_if_without(facts, path)
    installed = None if why else facts.get(path)
    if installed is not None:
        facts.set(
            "release.flashinfer_version",
            installed.value,
            installed.source,
            f"flashinfer-python {installed.value} ({installed.describe_source()})",
        )
        return
    if not why and facts.why_missing(path) is None:
        return  # read, and not installed
    requirement = knowledge.load("dependencies").get("flashinfer-python", release)
    value = requirement.value if requirement is not None else None
    spec = str(value.get("spec") or "") if value and not value.get("extra") else ""
    if spec.startswith("==") and "," not in spec:
        facts.infer(
            "release.flashinfer_version",
            spec[2:],
            f"Requires-Dist of vLLM {release}: flashinfer-python{spec}, what installing that "
            f"release brings ({why or facts.why_missing(path)})",
        )
    else:
        facts.mark_missing(
            "release.flashinfer_version",
            f"flashinfer-python is not known ({why or facts.why_missing(path)}) and vLLM "
            f"{release} pins no version of it (pass --package flashinfer-python==V)",
        )


# local labels of vLLM's own wheels: the CUDA/ROCm/CPU variants on its release page, and
# the git sha of a nightly (whose pin is judged as a dev build below)
_WHEEL_LABEL = re.compile(r"cu\d+|cpu|rocm[\d.]*|xpu|g[0-9a-f]{6,40}")


def _built_elsewhere(version: str) -> str | None:
    """Why a vLLM build need not carry the torch pin of its release's wheels, or None for a
    release wheel (PyPI's, or a +cuXXX variant from vLLM's release page).

    * a local label vLLM's wheels never carry (NVIDIA's containers: ``+<sha>.nv25.09``;
      a distribution's own build): vLLM was compiled against the torch of that image;
    * a ``.dYYYYMMDD`` label: setuptools-scm's mark of a build from a modified checkout, a
      source build compiled against the torch installed then;
    * a dev build or release candidate: a nightly wheel pins main's torch at its commit, a
      source build the torch installed — the release table holds neither."""
    try:
        parsed = Version(version)
    except InvalidVersion:
        return None
    label = version.split("+", 1)[1] if "+" in version else ""  # as written (nv25.09)
    parts = label.split(".") if label else []
    if any(re.fullmatch(r"d\d{8}", part) for part in parts):
        return (
            f"vLLM {version} is a source build (.d{parts[-1][1:]}: a modified checkout), "
            "compiled against the torch installed when it was built"
        )
    foreign = [part for part in parts if not _WHEEL_LABEL.fullmatch(part)]
    if foreign:
        return (
            f"vLLM {version} carries the local label +{label}, which vLLM's own wheels never "
            "do (theirs: +cuNNN, +cpu, +rocm..., a nightly's +g<sha>): a vendor or source "
            "build (NVIDIA's containers build vLLM against their own torch), compiled against "
            "the torch installed then"
        )
    if parsed.is_devrelease or parsed.is_prerelease:
        return (
            f"vLLM {version} is a build between releases: a nightly wheel pins main's torch at "
            "its commit, a source build compiles against the torch installed"
        )
    return None


def what_if_without(facts: Facts, package_path: str) -> str | None:
    """Why a package of this machine cannot be judged against a what-if release: installing
    the vLLM named by --vllm-version brings its own pins, so the package installed here says
    nothing about that stack (unless it is given as a what-if too, or read from a report)."""
    version = facts.get("vllm.version")
    package = facts.get(package_path)
    if version is None or version.source != Source.USER:
        return None
    if package is not None and package.source in (Source.USER, Source.REPORT):
        return None
    if package_path.startswith("torch"):
        flag = "--torch-version V judges a torch you keep"
    else:
        flag = f"--package {package_path.split('.', 1)[1]}==V judges one you would install"
    return (
        f"vLLM {version.value} {WHAT_IF_MARK}: installing it brings the versions it "
        f"requires, so the one installed here says nothing about that stack ({flag})"
    )


WHAT_IF_MARK = "is a what-if (--vllm-version)"
_WHAT_IF_FLAG = re.compile(r"\((--(?:torch-version|package) \S+) judges [^)]*\)$")


def what_if_hint(reason: str) -> str | None:
    """How to supply a package a what-if release leaves open (the reason
    ``_what_if_without`` gave): name its version beside the release, or run where that release
    is installed; None for any other reason."""
    if WHAT_IF_MARK not in reason:
        return None
    flag = _WHAT_IF_FLAG.search(reason)
    named = f"pass {flag.group(1)} (the version beside that release), or " if flag else ""
    return f"{named}run where that vLLM release is installed"
