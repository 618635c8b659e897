"""The software stack a vLLM release brings, inferred from its pins where nothing observed it.

A vLLM release pins torch exactly and bounds transformers (``Requires-Dist``, in
``knowledge/data/pins.json``); ``pip install vllm==X`` installs those. So when the vLLM version
is known and torch or transformers is not, each is inferred (``Facts.infer``: marked
inferred, never over a collected value):

* ``torch.version``: the pinned version;
* ``torch.cuda_version``: the CUDA runtime of the torch wheel on PyPI, with every CUDA build
  torch publishes for that version left possible (``knowledge/data/cuda_compat.json``),
  restricted to the CUDA major vLLM's own compiled extensions link against (a torch of
  another major cannot load them). Where the table does not list the builds, every minor of
  that major stays possible;
* ``packages.transformers``: the release's requirement as the range of possible versions.

With ``--vllm-version`` (a what-if) this machine's torch describes another stack: installing
that vLLM brings its pin. This machine's torch facts are then set aside, with a note, unless
``--torch-version`` names the torch to judge.

A manifest and a collect-env report can describe two stacks: the manifest's image runs one
vLLM on the GPUs its pod asks for, the report was written beside another vLLM or on another
machine. ``manifest_report_conflicts`` finds where they disagree (the vLLM release; the GPU
model): the report's part of the other stack (its torch and packages; its driver and links)
is set aside with a note naming both sources, never mixed with the image's.
"""

from __future__ import annotations

from typing import Any

from vllm_doctor.facts.model import Facts, Source


def _releases(facts: Facts) -> list[str]:
    """The covered releases the vLLM version is judged by: one, or for a build between
    releases every one it may resemble (an inference holds only where they agree)."""
    from vllm_doctor import knowledge

    version = facts.value("vllm.version")
    if version is None:
        return []
    match = knowledge.match_release(str(version), tuple(knowledge.covered_releases()))
    return list(match.candidates) or ([match.release] if match.release else [])


def _same(values: list[Any]) -> Any:
    return values[0] if values and all(v == values[0] for v in values) else None


def infer_stack(facts: Facts) -> None:
    releases = _releases(facts)
    if not releases:
        return
    from vllm_doctor import knowledge

    pins = knowledge.load("pins")
    at = [pins.at(r) for r in releases]
    names = " and ".join(f"vLLM {r}" for r in releases)
    _set_aside_for_what_if(facts)
    torch_pin = _same([(p.get("torch") or {}).get("pin") for p in at])
    cuda_major = _same([(p.get("cuda") or {}).get("major") for p in at])
    if torch_pin and facts.infer(
        "torch.version", torch_pin, f"Requires-Dist of {names}: torch=={torch_pin}"
    ):
        _infer_torch_cuda(facts, str(torch_pin), cuda_major, names)
    spec = _same([(p.get("transformers") or {}).get("spec") for p in at])
    if spec and "packages.transformers" not in facts:
        facts.infer(
            "packages.transformers",
            spec,
            f"Requires-Dist of {names}: transformers{spec}",
            possible=spec,
        )


def _set_aside_for_what_if(facts: Facts) -> None:
    version = facts.get("vllm.version")
    torch = facts.get("torch.version")
    if (
        version is None
        or version.source != Source.USER
        or torch is None
        or torch.source in (Source.USER, Source.REPORT)
    ):
        return
    for path in ("torch.version", "torch.cuda_version", "torch.git_version", "packages.torch"):
        facts.values.pop(path, None)
        facts.missing.pop(path, None)
    facts.notes.append(
        f"torch {torch.value} of this machine is set aside: vLLM {version.value} "
        "(--vllm-version) brings the torch it pins (--torch-version V judges "
        "another)"
    )


def _infer_torch_cuda(facts: Facts, pin: str, cuda_major: int | None, names: str) -> None:
    from vllm_doctor.facts.hardware import _compat

    row = _compat()["torch_cuda"].get(pin)
    if row is None:
        facts.mark_missing(
            "torch.cuda_version",
            f"torch {pin} (pinned by {names}) is not in "
            "the CUDA build table (knowledge/data/cuda_compat.json)",
        )
        return
    basis = f"torch {pin} (pinned by {names}): its PyPI wheel requires {row['requirement']}"
    builds = row.get("builds")
    if builds:
        if cuda_major is not None:
            builds = [b for b in builds if int(b.split(".")[0]) == cuda_major] or builds
        basis += f"; CUDA builds of torch {pin}: {', '.join(row['builds'])}"
        possible: object = builds if len(builds) > 1 else None
        # one build left (the extensions' runtime picked it): that build, not PyPI's default
        value = builds[0] if len(builds) == 1 else row["cuda"]
    elif cuda_major is not None:
        possible = f">={cuda_major}.0,<{cuda_major + 1}.0"
        value = row["cuda"]
        basis += f"; other builds not in the table: any CUDA {cuda_major}.x"
    else:
        return
    if cuda_major is not None:
        basis += f" (vLLM's extensions link libcudart.so.{cuda_major})"
    facts.infer("torch.cuda_version", value, basis, possible)


def manifest_report_conflicts(
    report: Facts, stated: Facts, report_name: str
) -> list[tuple[tuple[str, ...], str]]:
    """(areas of the report to set aside, why) where a manifest's container (``stated``: the
    facts its file states) and a collect-env report describe different stacks."""
    from packaging.version import InvalidVersion, Version

    where = str(stated.value("deploy.file") or "the manifest")
    image = stated.value("deploy.image")
    conflicts: list[tuple[tuple[str, ...], str]] = []
    theirs, ours = report.value("vllm.version"), stated.value("vllm.version")
    if theirs is not None and ours is not None:
        try:
            differ = Version(str(theirs)).public != Version(str(ours)).public
        except InvalidVersion:
            differ = str(theirs) != str(ours)
        if differ:
            torch = report.value("torch.version")
            conflicts.append(
                (
                    ("torch", "packages"),
                    f"the report {report_name} is of vLLM {theirs}"
                    + (f" with torch {torch}" if torch else "")
                    + f", {where}'s image {image} runs vLLM {ours}: two stacks, so the "
                    "report's torch and packages are set aside (pass a report written in "
                    "that container)",
                )
            )
    machine = _gpu_model(report)
    target = _gpu_model(stated)
    if machine is not None and target is not None and machine[0] != target[0]:
        conflicts.append(
            (
                ("driver", "topology"),
                f"the report {report_name} is of {machine[1]}, {where} asks for "
                f"{target[1]}: another machine, so the report's driver and GPU links are "
                "set aside (pass a report written on a node of that pool)",
            )
        )
    return conflicts


def _gpu_model(facts: Facts) -> tuple[tuple[str, int | None], str] | None:
    """((GPU table family, memory GiB), "N × name") of one model of GPU, or None."""
    from vllm_doctor.knowledge.gpus import lookup

    names = [str(n) for n in facts.value("gpu.names") or []]
    if not names or len(set(names)) != 1:
        return None
    match = lookup(names[0])
    if match is None:
        return None
    count = facts.value("gpu.count")
    shown = f"{count if count is not None else '?'} × {names[0]}"
    return (match.family.name, match.memory_gib), shown
