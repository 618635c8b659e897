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
"""

from __future__ import annotations

from typing import Any

from vllm_doctor.facts.model import Facts, Source


def _releases(facts: Facts) -> list[str]:
    """The covered releases the vLLM version is judged by: one, or for a build between two
    releases both (an inference holds only where they agree)."""
    from vllm_doctor import knowledge

    version = facts.value("vllm.version")
    if version is None:
        return []
    match = knowledge.match_release(str(version), tuple(knowledge.covered_releases()))
    return [r for r in (match.release, match.upper) if r]


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
