"""The stack around the judged vLLM release: companion packages against the release's and
each other's requirements, pairs a package checks at import time, and which compiled GPU code
of the stack runs on this GPU (facts ``release.stack.*`` and ``release.kernels.*``).

Read from the generated knowledge: ``dependencies`` (each vLLM release's Requires-Dist),
``kernel_images`` (the images in the fat binaries of vLLM's own extensions, per release and
machine) and ``stack/<distribution>`` (each companion version's Requires-Dist, its import-time
version checks and its images; ``tools/gen_stack_knowledge.py``). A package whose version is
unknown (a collect-env report lists only some) or whose version the knowledge did not read is
never judged; a finding needs the versions in hand.

Which image runs on which GPU follows NVIDIA's compatibility rules (``knowledge/cuda_images``):
for each compiled extension the facts say whether every object has machine code for the GPU
(``sass``), some only PTX the driver must compile (``ptx``), some none (``partial``) or none
at all (``none``). An object with no image for the GPU is a failure only when vLLM runs one of
its kernels there; vLLM picks most of them by capability, so the rules use the two cases that
are failures by themselves: the core extension (``vllm._C``) with no image at all, and kernels
built for the GPU's own family only as another member's architecture-specific image
(``sm_120a`` objects on a 12.1 GB10, ``sm_100a`` on a 10.3 B300).
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from typing import Any

from vllm_doctor.facts.cuda_build import PATHS as CUDA_BUILD_PATHS
from vllm_doctor.facts.cuda_build import collect_cuda_build, installed_images, widens
from vllm_doctor.facts.model import EACH_RELEASE, Facts, Source

SOURCE = "release knowledge"  # every release.* fact names the release knowledge
STACK_PATHS = (
    "release.stack.judged_release",
    "release.stack.unmet_requirements",
    "release.stack.pair_mismatches",
    "release.stack.pair_fix",
)
KERNEL_PATHS = (
    "release.kernels.judged_release",
    "release.kernels.machine",
    "release.kernels.capabilities",
    "release.kernels.extensions",
    "release.kernels.without_image",
    "release.kernels.core_without_image",
    "release.kernels.published_core_without_image",
    "release.kernels.family_only",
    "release.kernels.older_only",
    "release.kernels.ptx_only",
    "release.kernels.companions",
    "release.kernels.companions_without_image",
    "release.kernels.files",
    *CUDA_BUILD_PATHS,
)
# judged by their own rules (ENV002/ENV101 torch, ENV100 transformers)
_OWN_RULES = {"torch", "torchvision", "torchaudio", "transformers", "python"}
_MACHINES = ("x86_64", "aarch64")


def collect_release_stack(facts: Facts) -> None:
    from vllm_doctor.facts.release_api import collect_release_api
    from vllm_doctor.facts.release_partner import collect_partner_imports
    from vllm_doctor.facts.release_transformers import (
        collect_model_type,
        collect_transformers_checks,
    )
    from vllm_doctor.facts.torch_toolkit import collect_torch_toolkit
    from vllm_doctor.facts.triton_ptxas import collect_triton_ptxas

    collect_triton_ptxas(facts, _installed)  # Triton's own ptxas, whatever the vLLM release
    collect_torch_toolkit(facts)  # torch's CUDA build, whatever the vLLM release
    release, reason = _judged(facts)
    _installed_requirements(facts, release)
    lacking_api = collect_release_api(facts, release, reason, _installed)
    collect_partner_imports(facts, release, reason, _installed)
    collect_model_type(facts, release, reason, _installed)
    collect_transformers_checks(facts, _installed)
    if release is None:
        for path in (*STACK_PATHS, *KERNEL_PATHS):
            facts.mark_missing(path, reason)
        return
    _stack(facts, release, lacking_api)
    _kernels(facts, release)


def _installed_requirements(facts: Facts, release: str | None) -> None:
    """What pip check would say of the packages around vLLM, leaving out what vLLM's own
    requirements say (facts/installed_requires.py)."""
    from vllm_doctor import knowledge
    from vllm_doctor.facts.installed_requires import collect_installed_requirements

    own = knowledge.load("dependencies").at(release) if release is not None else None
    collect_installed_requirements(facts, own)


def _judged(facts: Facts) -> tuple[str | None, str]:
    from vllm_doctor import knowledge

    version = facts.value("vllm.version")
    if version is None:
        return None, facts.why_missing("vllm.version") or "the vLLM version is not known"
    match = knowledge.match_release(str(version), tuple(knowledge.covered_releases()))
    if match.release is None:
        return None, f"vLLM {version}: {match.note}"
    return match.release, ""


# -- packages ----------------------------------------------------------------------------------


def _installed(facts: Facts, dist: str, inferred: bool = True) -> tuple[str | None, str | None]:
    """(version, None) when known; (None, why) when unknown; (None, None) when not installed.
    An inferred version (torch from the release's pin) counts only with ``inferred``, and
    never when it leaves several values possible."""
    path = f"packages.{dist}"
    fact = facts.get(path)
    if dist == "torch" and fact is None:
        path = "torch.version"
        fact = facts.get(path)
    if fact is not None:
        if fact.inferred and (fact.possible is not None or not inferred):
            return None, f"{path} is inferred ({fact.detail}), not known"
        return str(fact.value), None
    return None, facts.why_missing(path)


def _machine(facts: Facts) -> str | None:
    """The CPU architecture of the serving environment, when the facts describe one host:
    this machine's is set aside when the GPUs are a what-if target (--gpu GB10 is an aarch64
    system whatever runs the doctor)."""
    machine = facts.get("vllm.machine")
    if machine is None:
        return _machine_of_gpus(facts)
    gpus = facts.get("gpu.capabilities")
    if machine.source == Source.MACHINE and gpus is not None and gpus.source != Source.NVML:
        return _machine_of_gpus(facts)
    return str(machine.value)


def _machine_of_gpus(facts: Facts) -> str | None:
    """The host CPU architecture the named GPUs come only with (a GB10 or a Jetson module is
    an aarch64 system: the GPU table's ``machine``), else None."""
    from vllm_doctor.knowledge.gpus import lookup

    names = facts.value("gpu.names") or []
    machines = {getattr(lookup(str(n)), "family", None) for n in names}
    found = {family.machine if family else None for family in machines}
    return found.pop() if len(found) == 1 and None not in found else None


def _marker_holds(marker: str | None, machine: str | None) -> bool | None:
    if not marker:
        return True
    from vllm_doctor.version_specs import marker_holds

    if machine is None and "platform_machine" in marker:
        return None
    env = {"platform_system": "Linux", "sys_platform": "linux", "os_name": "posix"}
    if machine:
        env["platform_machine"] = machine
    return marker_holds(marker, tuple(env.items()))


def _outside(spec: str | None, version: str) -> bool | None:
    if not spec:
        return False
    from vllm_doctor.version_specs import admits

    admitted = admits(spec, version)
    return None if admitted is None else not admitted


def _stack(facts: Facts, release: str, lacking_api: Set[str] = frozenset()) -> None:
    from vllm_doctor import knowledge
    from vllm_doctor.knowledge import stack

    facts.set("release.stack.judged_release", release, SOURCE)
    machine = _machine(facts)
    vllm_deps: dict[str, Any] = knowledge.load("dependencies").at(release)
    unmet: list[str] = []
    judged = 0
    # vLLM's own requirements on the packages around it; a nightly or release candidate pins
    # what its commit pinned, which neither neighbouring release need show, and a what-if
    # version (--vllm-version, or each release in turn when it is unknown) brings its own
    # pins with it: the packages of this machine belong to another install, those named with
    # it (--package NAME==VERSION) or read from a report do not (release_pins.what_if_without)
    from vllm_doctor.facts.release_pins import what_if_without

    # (a dev build judged as each release it may be keeps vllm.is_dev: its pins stay its own)
    build = _is_build(facts.value("vllm.version")) or facts.value("vllm.is_dev") is True
    what_if = getattr(facts.get("vllm.version"), "source", None) == Source.USER
    for dist, req in sorted(vllm_deps.items()):
        if build or dist in _OWN_RULES or not isinstance(req, dict):
            continue
        if what_if_without(facts, f"packages.{dist}"):
            continue
        version, _why = _installed(facts, dist, inferred=False)
        if version is None or _marker_holds(req.get("marker"), machine) is not True:
            continue
        judged += 1
        if _outside(req.get("spec"), version):
            extra = f" (extra {req['extra']})" if req.get("extra") else ""
            unmet.append(f"{dist} {version}: vLLM {release} requires {dist}{req['spec']}{extra}")
    # the companions' requirements on each other (quack-kernels on nvidia-cutlass-dsl, LMCache
    # on torch), and the version checks they make at import time
    mismatches: list[str] = []
    fixes: list[str] = []
    refused: set[str] = set()
    unknown: list[str] = []  # a checked partner whose version is not known: "why"
    for dist in stack.distributions():
        version, _why = _installed(facts, dist, inferred=False)
        if version is None:
            continue
        keys = stack.at(dist, version)
        if keys is None or (dist == "torch" and not _same_torch_build(facts, keys, "x86_64")):
            continue  # (another torch build than the wheel read may pin other packages)
        for key, value in sorted(keys.items()):
            kind, _, other = key.partition(":")
            if kind == "requires" and other in stack.distributions() and other != "vllm":
                if value.get("extra") or _marker_holds(value.get("marker"), machine) is not True:
                    continue
                other_version, _ = _installed(facts, other, inferred=False)
                if other_version is None:
                    continue
                judged += 1
                if _outside(value.get("spec"), other_version):
                    unmet.append(
                        f"{other} {other_version}: {dist} {version} requires {other}{value['spec']}"
                    )
            elif kind == "check":
                if value.get("fatal") is False:
                    continue  # the package logs the mismatch and goes on (FlashInfer 0.7)
                if any(facts.value(f"env.{v}") for v in value.get("bypass") or ()):
                    continue  # the user turned the check off
                _partner, why = _installed(facts, other)
                if why is not None:
                    unknown.append(f"{dist} {version} checks {other} at import: {why}")
                found = _pair(facts, release, vllm_deps, dist, version, other, value)
                if found is not None:
                    mismatches.append(found[0])
                    fixes.append(found[1])
                    refused.add(other)
    # a partner the companion refuses at import is that finding (ENV103), a companion that
    # lacks a name vLLM calls is that one (release.api.missing), not a second one
    unmet = [line for line in unmet if line.split(" ", 1)[0] not in refused | lacking_api]
    if judged or unmet:
        facts.set(
            "release.stack.unmet_requirements",
            unmet,
            SOURCE,
            f"Requires-Dist of vLLM {release} and of the companion versions the knowledge read",
        )
    else:
        facts.mark_missing(
            "release.stack.unmet_requirements",
            f"vLLM {facts.value('vllm.version')} is a build between releases: its own pins "
            "are not in the knowledge, and no companion requirement could be judged"
            if build
            else f"vLLM {facts.value('vllm.version')} is a what-if version: installing it "
            "brings the versions it requires, and no companion requirement could be judged "
            "(--package NAME==VERSION names a companion's version to judge)"
            if what_if
            else "no package that vLLM or a companion requires has a known version here",
        )
    _set_pairs(facts, mismatches, fixes, unknown)


def _is_build(version: Any) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        parsed = Version(str(version))
    except InvalidVersion:
        return False
    return parsed.is_devrelease or parsed.is_prerelease


def _pair(
    facts: Facts,
    release: str,
    vllm_deps: dict[str, Any],
    dist: str,
    version: str,
    partner: str,
    check: dict[str, Any],
) -> tuple[str, str] | None:
    """A partner the package refuses at import: (what, the fix), else None."""
    partner_version, _why = _installed(facts, partner)
    if partner_version is None:
        return None
    if check.get("match") == "prefix":
        refused = not partner_version.startswith(version)
    else:
        from packaging.version import InvalidVersion, Version

        try:
            refused = Version(partner_version) != Version(version)
        except InvalidVersion:
            refused = partner_version != version
    if not refused:
        return None
    pins = [
        f"{d}{vllm_deps[d]['spec']}"
        for d in (dist, partner)
        if isinstance(vllm_deps.get(d), dict) and vllm_deps[d].get("spec")
    ]
    pinned = _pinned(vllm_deps.get(partner))
    target = pinned if pinned is not None and not _outside(f"=={pinned}", version) else version
    said = (
        f"{partner} {partner_version} with {dist} {version}: {dist} {version} refuses it at "
        f"import ({check.get('file')}: {check.get('exception', 'error')} "
        f'"{check.get("message", "")}")'
    )
    said += f"; vLLM {release} pins {', '.join(pins)}" if pins else ""
    return said, f"pip install '{partner}=={target}'" + (
        f" (or set {check['bypass'][0]}=1 to skip the check)" if check.get("bypass") else ""
    )


def _pinned(req: Any) -> str | None:
    if not isinstance(req, dict) or not req.get("spec"):
        return None
    spec = str(req["spec"])
    return spec[2:] if spec.startswith("==") and "," not in spec else None


def _set_pairs(facts: Facts, mismatches: list[str], fixes: list[str], unknown: list[str]) -> None:
    """A mismatch found is proof; none found is proof only when every checked partner's
    version (or its absence) is known."""
    if not mismatches and unknown:
        for path in ("release.stack.pair_mismatches", "release.stack.pair_fix"):
            facts.mark_missing(path, "; ".join(unknown))
        return
    facts.set(
        "release.stack.pair_mismatches",
        mismatches,
        SOURCE,
        "the import-time version checks of the companion versions the knowledge read",
    )
    if fixes:
        facts.set("release.stack.pair_fix", "; ".join(fixes), SOURCE)


# -- compiled kernels --------------------------------------------------------------------------------


def _capabilities(facts: Facts) -> list[int] | None:
    caps = facts.value("gpu.capabilities")
    if isinstance(caps, list) and caps:
        return sorted({int(c) for c in caps if isinstance(c, int)})
    single = facts.value("gpu.min_capability")
    return [int(single)] if isinstance(single, int) else None


def _kernels(facts: Facts, release: str) -> None:
    from vllm_doctor import knowledge

    version = facts.get("vllm.version")
    if version is not None and version.detail == EACH_RELEASE:
        # the version is unknown: a build older than the covered releases, or a source build,
        # carries other kernels, so no covered release's images stand for it
        for path in KERNEL_PATHS:
            facts.mark_missing(
                path,
                "the vLLM version is not known: which kernels its build carries is not known",
            )
        return
    capabilities = _capabilities(facts)
    if not capabilities:
        reason = (
            facts.why_missing("gpu.capabilities") or "the GPU's compute capability is not known"
        )
        for path in KERNEL_PATHS:
            facts.mark_missing(path, reason)
        return
    table = knowledge.load("kernel_images")
    if release not in table.releases:
        for path in KERNEL_PATHS:
            facts.mark_missing(path, f"the kernel images of vLLM {release} were not read")
        return
    machine = _machine(facts)
    machines = [machine] if machine in _MACHINES else list(_MACHINES)
    at = table.at(release)
    facts.set("release.kernels.judged_release", release, SOURCE)
    facts.set("release.kernels.capabilities", capabilities, SOURCE)
    facts.set(
        "release.kernels.machine",
        machine if machine in _MACHINES else "unknown",
        SOURCE,
        None if machine in _MACHINES else "judged where the x86_64 and aarch64 builds agree",
    )
    modules = sorted({key.rpartition("@")[0] for key in at})
    coverage: dict[str, str] = {}
    files: dict[str, str] = {}
    older: list[str] = []
    without: list[str] = []
    family: list[str] = []
    ptx: list[str] = []
    for module in modules:
        readings = {m: at.get(f"{module}@{m}") for m in machines}
        states = {
            m: _module_state(v["groups"], capabilities) if isinstance(v, dict) else "absent"
            for m, v in readings.items()
        }
        agreed = set(states.values())
        if len(agreed) != 1:
            coverage[module] = "unknown (" + ", ".join(f"{m}: {s}" for m, s in states.items()) + ")"
            continue
        state = agreed.pop()
        if state == "absent":
            continue
        coverage[module] = state
        value = next(v for v in readings.values() if isinstance(v, dict))
        files[str(value.get("file", module))] = state
        groups = value["groups"]
        if state == "none":
            without.append(_describe(module, groups, capabilities, lambda g: True))
            if _older_only(groups, capabilities):
                older.append(without[-1])
        # a CUDA 13 build of a release published for CUDA 12 carries family images instead
        wider = [m for m in machines if widens(facts, at, m)]
        family.extend(_family_only(module, groups, capabilities, widen=bool(wider)))
        if state == "ptx":
            ptx.append(
                _describe(module, groups, capabilities, lambda g: _state(g, capabilities) == "ptx")
            )
    facts.set("release.kernels.extensions", coverage, SOURCE, f"kernel_images of vLLM {release}")
    facts.set("release.kernels.without_image", without, SOURCE, f"kernel_images of vLLM {release}")
    facts.set("release.kernels.family_only", family, SOURCE, f"kernel_images of vLLM {release}")
    facts.set("release.kernels.older_only", older, SOURCE, f"kernel_images of vLLM {release}")
    facts.set("release.kernels.ptx_only", ptx, SOURCE, f"kernel_images of vLLM {release}")
    _core(facts, at, machines, capabilities)
    collect_cuda_build(facts, release, at, machines, capabilities, _describe)
    _companions(facts, capabilities, machines, files)
    facts.set(
        "release.kernels.files",
        files,
        SOURCE,
        "each shared object by its path under site-packages (the kernels probe's inventory)",
    )


def _core(facts: Facts, at: dict[str, Any], machines: list[str], capabilities: list[int]) -> None:
    """Whether the objects of vLLM's core extension built for every GPU generation (the group
    with the widest architecture list: rms_norm, activations, the KV-cache writes) have no
    image for the GPU."""
    answers: dict[str, tuple[bool, str]] = {}
    for machine in machines:
        found = [
            (key.rpartition("@")[0], value)
            for key, value in at.items()
            if key.endswith(f"@{machine}") and _is_core(key.rpartition("@")[0])
        ]
        if not found:
            continue
        module, value = found[0]
        groups = value["groups"]
        # the generic kernels are built for the release's whole architecture list: the group
        # with the most plain (not a/f) machine-code architectures, then the most objects
        main = max(groups, key=lambda g: (_plain_archs(g), int(g.get("objects", 0))))
        total = sum(int(g.get("objects", 0)) for g in groups)
        missing = _state(main, capabilities) == "none"
        answers[machine] = (
            missing,
            _describe(module, [main], capabilities, lambda g: True)
            + f" ({main.get('objects')} of its {total} objects, the generic kernels)",
        )
    if not answers:
        for path in (
            "release.kernels.core_without_image",
            "release.kernels.published_core_without_image",
        ):
            facts.mark_missing(path, "the release has no core extension read")
        return
    if len({missing for missing, _ in answers.values()}) != 1:
        for path in (
            "release.kernels.core_without_image",
            "release.kernels.published_core_without_image",
        ):
            facts.mark_missing(
                path,
                "the x86_64 and aarch64 builds differ here and the machine is not known: "
                + "; ".join(f"{m}: {detail}" for m, (_, detail) in answers.items()),
            )
        return
    from vllm_doctor.knowledge.gpus import embedded_family

    missing, detail = next(iter(answers.values()))
    embedded = embedded_family(facts.value("gpu.names") or [])
    # what the published wheels (pip install vllm, the vllm/vllm-openai images) carry is
    # known even where another build may be installed: said on its own for a Jetson module
    facts.set(
        "release.kernels.published_core_without_image",
        [f"the published wheels for the {embedded}: {detail}"] if missing and embedded else [],
        SOURCE,
        detail,
    )
    if missing and embedded:
        facts.mark_missing(
            "release.kernels.core_without_image",
            f"the published wheels have no image for the {embedded}'s architecture ({detail}), "
            "and Jetson modules also run NVIDIA's own vLLM builds for the device (the Jetson AI "
            "Lab images, jetson-containers) that carry it: which build is installed is not "
            "known (the kernels probe on the device reads its images: vllm-doctor probe kernels)",
        )
        return
    facts.set("release.kernels.core_without_image", missing, SOURCE, detail)


def _older_only(groups: list[dict[str, Any]], capabilities: list[int]) -> bool:
    """Every image targets an architecture older than the GPU's: code built for the GPUs
    before it, which a capability test such as ``>= 10.0`` still sends it to (an extension
    built only for newer GPUs is gated away from this one)."""
    from vllm_doctor.knowledge import cuda_images

    archs = [
        image.arch
        for g in groups
        for image in map(cuda_images.parse, g["images"])
        if image is not None
    ]
    return bool(archs) and max(archs) < min(capabilities)


def _plain_archs(group: dict[str, Any]) -> int:
    from vllm_doctor.knowledge import cuda_images

    parsed = [cuda_images.parse(i) for i in group["images"]]
    return len({p.arch for p in parsed if p and p.kind == cuda_images.SASS and not p.variant})


def _is_core(module: str) -> bool:
    name = module.rsplit(".", 1)[-1]
    return module.count(".") == 1 and (name == "_C" or name.startswith("_C_"))


def _state(group: dict[str, Any], capabilities: Iterable[int]) -> str:
    from vllm_doctor.knowledge import cuda_images

    worst = "sass"
    for capability in capabilities:
        found = cuda_images.best(group["images"], capability)
        if found == cuda_images.NONE:
            return "none"
        if found == cuda_images.PTX:
            worst = "ptx"
    return worst


def _module_state(groups: list[dict[str, Any]], capabilities: list[int]) -> str:
    states = {_state(g, capabilities) for g in groups}
    if states == {"none"}:
        return "none"
    if "none" in states:
        return "partial"
    return "ptx" if "ptx" in states else "sass"


def _family_only(
    module: str, groups: list[dict[str, Any]], capabilities: list[int], widen: bool = False
) -> list[str]:
    """Objects with images for the GPU's major version, none of which runs on this member of
    the family (architecture-specific images of another minor); ``widen``: the installed build
    is a CUDA 13 build of a release published for CUDA 12, whose family images do run."""
    from vllm_doctor.knowledge import cuda_images

    out = []
    for capability in capabilities:
        major = capability // 10
        hits = [
            g
            for g in groups
            if cuda_images.best(installed_images(g["images"], widen), capability)
            == cuda_images.NONE
            and any(
                (image := cuda_images.parse(i)) is not None
                and image.arch // 10 == major
                and image.variant == "a"  # sm_89 beside an sm_80 GPU is another GPU's code
                for i in g["images"]
            )
        ]
        for group in sorted(hits, key=lambda g: -int(g.get("objects", 0))):
            out.append(_describe(module, [group], [capability], lambda g: True, objects=True))
    return out


def _describe(
    module: str,
    groups: list[dict[str, Any]],
    capabilities: list[int],
    keep: Any,
    objects: bool = False,
) -> str:
    """``module (N objects; images sm_90a + sm_100f, none for sm_121): kernel / kernel`` —
    one list item, so its parts are not joined by commas."""
    chosen = [g for g in groups if keep(g)]
    images = sorted({i for g in chosen for i in g["images"]}, key=_image_order)
    names = sorted({n for g in chosen for n in g.get("names", ())})
    count = sum(g.get("objects", 0) for g in chosen)
    gpus = " / ".join(f"sm_{c}" for c in capabilities)
    isa = sorted({g["ptx_isa"] for g in chosen if g.get("ptx_isa")})
    inside = (f"{count} objects; " if objects else "") + "images " + " + ".join(images)
    inside += f" (PTX ISA {' / '.join(isa)})" if isa else ""
    inside += f"; judged for {gpus}"
    shown = " / ".join(names[:6]) + (" / …" if len(names) > 6 else "")
    return f"{module} ({inside})" + (f": {shown}" if shown else "")


def _image_order(image: str) -> tuple[int, str]:
    from vllm_doctor.knowledge import cuda_images

    parsed = cuda_images.parse(image)
    return (parsed.arch if parsed else 0, image)


def _companions(
    facts: Facts, capabilities: list[int], machines: list[str], files: dict[str, str]
) -> None:
    from vllm_doctor.knowledge import stack

    coverage: dict[str, str] = {}
    without: list[str] = []
    for dist in stack.distributions():
        version, _why = _installed(facts, dist, inferred=False)
        if version is None:
            continue
        keys = stack.at(dist, version)
        if keys is None:
            continue
        # object → machine → its images (a shared object is built per CPU architecture; raw
        # cubins are the same files in every wheel: FlashInfer's cubin package is one
        # pure-Python wheel)
        found: dict[str, dict[str, dict[str, Any]]] = {}
        for key, value in sorted(keys.items()):
            if not key.startswith("images:") or not isinstance(value, dict):
                continue
            obj, _, machine = key[len("images:") :].rpartition("@")
            file = str(value.get("file", ""))
            shared = file.endswith(".so") or ".so." in file  # not a folder of cubins
            if shared and machine not in machines:
                continue
            if dist == "torch" and not _same_torch_build(facts, keys, machine):
                continue  # another CUDA build than the wheel read (torch_toolkit judges it)
            found.setdefault(obj, {})[machine if shared else "any"] = value
        for obj, by_machine in found.items():
            states = {m: _module_state(v["groups"], capabilities) for m, v in by_machine.items()}
            label = f"{dist} {version} {obj}"
            if len(set(states.values())) != 1:
                coverage[label] = (
                    "unknown (" + ", ".join(f"{m}: {s}" for m, s in sorted(states.items())) + ")"
                )
                continue
            state = next(iter(states.values()))
            value = next(iter(by_machine.values()))
            coverage[label] = state
            file = str(value.get("file", ""))
            if file.endswith(".so") or ".so." in file:
                files.setdefault(file, state)
            if state == "none":
                without.append(
                    _describe(label, value["groups"], capabilities, lambda g: True, objects=True)
                )
    facts.set("release.kernels.companions", coverage, SOURCE)
    facts.set("release.kernels.companions_without_image", without, SOURCE)


def _same_torch_build(facts: Facts, keys: dict[str, Any], machine: str) -> bool:
    """The torch installed is the build the knowledge read for ``machine`` (the PyPI wheel's
    CUDA: ``cuda`` for x86_64, ``cuda@aarch64`` for the aarch64 wheel, a CPU build up to 2.10)."""
    build = keys.get("cuda") if machine == "x86_64" else keys.get(f"cuda@{machine}")
    built = (build or {}).get("version")
    cuda = facts.get("torch.cuda_version")
    if built is None or cuda is None:
        return False
    possible = cuda.possible if cuda.inferred and isinstance(cuda.possible, list) else [cuda.value]
    return all(str(value) == str(built) for value in possible)
