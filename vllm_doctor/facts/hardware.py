"""Hardware facts without the hardware: a target named on the command line (or in a
deployment manifest), and what the GPU table and NVIDIA's driver table infer from names.

``apply_target_hardware`` is the one entry point for "what if it ran on N × GPU X with
driver D": ``check --gpu "H100 80GB" --gpus 8 --driver 580.95.05`` calls it, and so can any
other reader of a deployment (a Kubernetes manifest's GPU product and count). The target
replaces this machine's ``gpu`` and ``topology`` areas (and ``driver`` when one is named).

``infer_hardware`` fills what the names imply and nothing observed says, each value marked
inferred with what it came from (``Facts.infer`` never overrides a collected value):

* ``gpu.memory_total_mib`` from the GPU table. The table gives a card's nominal memory; NVML
  reports 93–100 % of it (ECC reserves about 6 % on GDDR cards: an A10 shows 23028 MiB of 24
  GiB, an L4 23034 MiB, a T4 15360 MiB of 16 GiB), and a family can ship several sizes, so the
  fact carries every size it leaves possible (the memory model, memory/estimate.py, takes
  what vLLM sees of each from knowledge/data/gpu_usable_memory.json and decides "fits" /
  "does not fit" only where every size agrees);
* ``gpu.memory_free_mib``: a GPU known only by its name is assumed idle (free = total), so
  MEM002 can only be decided "does not apply" from it — never a warning or an error (the
  derived free-memory facts that would confirm it stay missing, facts/derived.py);
* ``driver.cuda_version`` from ``driver.version``: the newest CUDA toolkit whose minimum Linux
  driver (NVIDIA's release notes, ``knowledge/data/cuda_compat.json``) the driver meets.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Facts, Source

if TYPE_CHECKING:
    from vllm_doctor.knowledge.gpus import GpuMatch

MIB_PER_GIB = 1024
COMPAT_DATA = Path(__file__).resolve().parent.parent / "knowledge" / "data" / "cuda_compat.json"
COMPAT_NAME = "knowledge/data/cuda_compat.json"


@dataclass(frozen=True)
class TargetHardware:
    """Hardware to judge the serve line for, instead of this machine's."""

    gpu: str | None = None  # a GPU product name, resolved through the GPU table
    count: int | None = None  # how many of them the deployment gets
    driver: str | None = None  # NVIDIA driver version
    cuda: str | None = None  # the driver's CUDA version (nvidia-smi's "CUDA Version")
    origin: str = "command line"  # where the target was named, for the evidence
    detail: str | None = None  # the file and line a manifest names them at

    def __bool__(self) -> bool:
        return any(x is not None for x in (self.gpu, self.count, self.driver, self.cuda))


def resolve_gpu(name: str, option: str = "--gpu") -> GpuMatch:
    """The GPU table's match for a product name as people type it (``4090``, ``rtx4090``,
    ``h100-80gb``, ``MI300X``): its ``name`` is the typed name as the table spells it.
    InputError (exit 2) for a name several families answer to (naming them) or none (naming
    the closest spellings)."""
    from vllm_doctor.knowledge.gpus import Ambiguous, resolve, suggestions

    text = " ".join(str(name).split())
    found = resolve(text) if text else None
    if isinstance(found, Ambiguous):
        listed = "; ".join(
            f"{family.name} ({_memory_words(family.memory_options)})" for family in found.candidates
        )
        raise InputError(option, f"{name!r} could be any of: {listed} — say which")
    if found is not None:
        _check_stated_memory(name, found, option)
        return found
    close = suggestions(text) if text else []
    hint = f"; close matches: {', '.join(close)}" if close else ""
    raise InputError(
        option, f"{name!r} is not a GPU the GPU table knows{hint} (`--gpu list` shows the table)"
    )


def _check_stated_memory(typed: str, found: GpuMatch, option: str) -> None:
    """InputError for a size the family does not come with ("A100 48GB"): judged as stated it
    would be a GPU that does not exist, judged for every size it would silently drop what was
    typed. A size of twice the largest option or more is a CPU+GPU total ("GH200 480GB"), which
    names no GPU memory and is read as the family alone."""
    from vllm_doctor.knowledge.gpus import stated_memory, without_memory

    options = found.family.memory_options
    stated = stated_memory(found.name or typed)
    if found.memory_gib is not None or not options or not stated:
        return
    wrong = [size for size in stated if size < 2 * max(options)]
    if wrong:
        example = f"{without_memory(found.name or typed)} {options[0]}GB"
        raise InputError(
            option,
            f"{typed!r}: the {found.family.name} comes with {_memory_words(options)}, not "
            f'{wrong[0]} GiB — name one of them (--gpu "{example}")',
        )


def _memory_words(options: tuple[int, ...]) -> str:
    sizes = sorted(options)
    if not sizes:
        return "memory not in the table"
    if len(sizes) == 1:
        return f"{sizes[0]} GiB"
    return ", ".join(str(s) for s in sizes[:-1]) + f" or {sizes[-1]} GiB"


def undecided_memory(match: GpuMatch) -> str | None:
    """For a family named without its size that ships with several ("H100": 64, 80 or 94
    GiB): what the doctor does with that, and how to name one; None otherwise."""
    options = match.family.memory_options
    if match.memory_gib is not None or len(options) < 2:
        return None
    from vllm_doctor.knowledge.gpus import without_memory

    name = match.name or match.family.name
    # the table lists the common size first; a name's own total ("GH200 480GB") is left out
    example = f"{without_memory(name)} {options[0]}GB"
    return (
        f"the {match.family.name} comes with {_memory_words(options)} and {name!r} does not "
        f"say which: the memory is judged for each size and decides only where all agree — "
        f'name one to decide (--gpu "{example}")'
    )


def _check_version(option: str, value: str) -> str:
    try:
        return str(Version(value.strip()))
    except InvalidVersion:
        raise InputError(option, f"{value!r} is not a version (like 580.95.05 or 12.8)") from None


# a count written before the product, as reports write it: "4 x H100 80GB HBM3", "2x RTX 3090"
_COUNTED_NAME = re.compile(r"^\s*(?P<count>\d{1,3})\s*[x×]\s*(?P<name>[A-Za-z].*)$")


def _count_in_name(target: TargetHardware) -> TargetHardware:
    """``--gpu "4 x H100"``: the product, and its count where --gpus does not give one (a
    different --gpus is a contradiction: exit 2)."""
    found = _COUNTED_NAME.match(target.gpu or "")
    if found is None:
        return target
    count = int(found.group("count"))
    if target.count is not None and target.count != count:
        raise InputError(
            "--gpu", f"{target.gpu!r} names {count} GPUs, --gpus {target.count} says otherwise"
        )
    return dataclasses.replace(target, gpu=found.group("name").strip(), count=count)


def apply_target_hardware(facts: Facts, target: TargetHardware) -> None:
    """Replace this machine's GPUs (and driver) with ``target``'s; what the names imply is
    inferred by ``infer_hardware`` afterwards."""
    detail_of = {
        "--gpu": target.gpu,
        "--gpus": target.count,
        "--driver": target.driver,
        "--cuda": target.cuda,
    }
    given = target.detail or ", ".join(f"{k} {v}" for k, v in detail_of.items() if v is not None)
    target = _count_in_name(target)
    source = Source.USER if target.origin == "command line" else target.origin
    if target.driver is not None or target.cuda is not None:
        facts.drop_area("driver")
        if target.driver is not None:
            facts.set("driver.version", _check_version("--driver", target.driver), source, given)
        else:
            facts.mark_missing("driver.version", "only the driver's CUDA version was given")
        if target.cuda is not None:
            facts.set("driver.cuda_version", _check_version("--cuda", target.cuda), source, given)
    if target.gpu is None and target.count is None:
        return
    from vllm_doctor.bounds import MAX_GPUS

    if target.count is not None and not 1 <= target.count <= MAX_GPUS:
        raise InputError(
            "--gpus", f"one machine has between 1 and {MAX_GPUS} GPUs, got {target.count}"
        )
    names = facts.value("gpu.names") or []
    name = target.gpu
    if name is None and not names and target.count is not None:
        # a count alone, no GPU known here (another's setup, a host without GPUs): the count
        # decides what needs only the count (TP x PP against the GPUs); the model stays open
        _count_only(facts, target.count, source, given)
        return
    if name is None:  # a count alone: this machine's (or the report's) GPU model
        if len(set(names)) != 1:
            raise InputError(
                "--gpus",
                "give the GPU model too (--gpu NAME): the GPUs known here are not all one model",
            )
        name = names[0]
    match = resolve_gpu(name)
    if target.gpu is not None and match.name and match.name != " ".join(str(name).split()):
        # "--gpu 4090" is read as "RTX 4090": the facts carry the table's spelling, the
        # evidence says what was typed
        given = given.replace(f"--gpu {name}", f"--gpu {name} (read as {match.name})", 1)
        name = match.name
    if target.count is None and names and _same_gpu(names, match):
        # the GPU named is the one this machine (or the report) has: its count, its devices
        # as measured and the links between them stay
        facts.notes.append(
            f"--gpu {name} names the GPUs {'the report lists' if _from_report(facts) else 'of this machine'} "
            f"({len(names)} × {names[0]}): their count, memory and links are kept"
        )
        total = facts.get("gpu.memory_total_mib")
        if match.memory_gib and (total is None or total.inferred):
            # the report's name left the size open ("RTX 5060 Ti": 8 or 16 GiB): the name
            # given here says which
            facts.values.pop("gpu.memory_total_mib", None)
            facts.values.pop("gpu.memory_free_mib", None)
            facts.infer(
                "gpu.memory_total_mib",
                match.memory_gib * MIB_PER_GIB,
                f"GPU table: --gpu {name} → {match.family.name}, {match.memory_gib} GiB",
            )
        return
    facts.drop_area("gpu")
    facts.drop_area("topology")
    if target.count is None:
        # another GPU than the one here: how many the target has is not known
        facts.mark_missing(
            "gpu.count",
            f"--gpu {name} without --gpus: how many GPUs the target has is not known"
            + (
                f" (this machine's {len(names)} × {names[0]} are set aside: another GPU is named)"
                if names
                else ""
            ),
        )
        devices = [{"name": name, "family": match.family.name}]
        facts.set("gpu.names", [name], source, f"{given} (the model named; how many: --gpus N)")
        facts.set("gpu.devices", devices, source, given)
    else:
        count = target.count
        devices = [{"index": i, "name": name, "family": match.family.name} for i in range(count)]
        facts.set("gpu.count", count, source, given or f"--gpu {name}")
        facts.set("gpu.names", [name] * count, source, given)
        facts.set("gpu.devices", devices, source, given)
    facts.set("gpu.mig_enabled", False, source, "a whole GPU (no MIG slice) is named")
    open_size = undecided_memory(match)
    if open_size is not None:
        facts.notes.append(f"--gpu {name}: {open_size}")
    table = f"GPU table: {name} → {match.family.name}"
    if match.capability is not None:
        caps = [match.capability] * (target.count or 1)
        facts.infer("gpu.capabilities", caps, table)
        facts.infer("gpu.min_capability", match.capability, table)
        facts.infer("gpu.max_capability", match.capability, table)
    else:
        for path in ("gpu.capabilities", "gpu.min_capability", "gpu.max_capability"):
            facts.mark_missing(
                path, f"{match.family.name} ({match.gfx}) has no CUDA compute capability"
            )
    facts.mark_missing(
        "topology",
        f"the links between target GPUs are not known ({given}): "
        "pass --report with the host's collect-env report",
    )


def _count_only(facts: Facts, count: int, source: str, given: str) -> None:
    """``--gpus N`` with no GPU model named or known: the count, and which GPU left open."""
    facts.drop_area("gpu")
    facts.drop_area("topology")
    facts.set("gpu.count", count, source, given)
    why = f"{given} gave how many GPUs, not which: pass --gpu NAME"
    facts.mark_missing("gpu", why)
    facts.mark_missing("topology", why)


def _same_gpu(names: list[Any], match: GpuMatch) -> bool:
    """Every GPU known here is the GPU named: the same family of the GPU table, and the same
    memory where both names settle it (an "A100" is an A100-SXM4-80GB; an A100 40GB is not)."""
    from vllm_doctor.knowledge.gpus import lookup

    for known in names:
        here = lookup(str(known))
        if here is None or here.family.name != match.family.name:
            return False
        if here.memory_gib and match.memory_gib and here.memory_gib != match.memory_gib:
            return False
    return True


def _from_report(facts: Facts) -> bool:
    fact = facts.get("gpu.count") or facts.get("gpu.names")
    return fact is not None and fact.source == Source.REPORT


# -- inference from names -------------------------------------------------------------------


def _memory_options(name: str) -> tuple[tuple[int, ...], str] | None:
    """The memory sizes (GiB) a device name leaves possible, and the table's words for it."""
    from vllm_doctor.knowledge.gpus import lookup

    match = lookup(name)
    if match is None or not match.family.memory_options:
        return None
    if match.memory_gib:
        return (match.memory_gib,), f"{name} → {match.family.name}, {match.memory_gib} GiB"
    options = tuple(sorted(match.family.memory_options))
    shown = " or ".join(str(o) for o in options)
    return options, f"{name} → {match.family.name}, {shown} GiB"


def infer_gpu_memory(facts: Facts) -> None:
    """gpu.memory_total_mib (with every size it leaves possible) and an idle gpu.memory_free_mib from the GPU
    names, where nothing measured them."""
    if "gpu.memory_total_mib" in facts:
        return
    names = facts.value("gpu.names")
    if not names:
        return
    per_device = [_memory_options(str(n)) for n in names]
    unknown = sorted({str(n) for n, found in zip(names, per_device, strict=True) if found is None})
    if unknown:
        facts.mark_missing(
            "gpu.memory_total_mib", f"the GPU table has no memory size for {', '.join(unknown)}"
        )
        return
    known = [found for found in per_device if found is not None]  # every one, as checked above
    sizes = sorted({size for options, _ in known for size in options})
    words = sorted({how for _, how in known})
    basis = f"GPU table: {'; '.join(words)}"
    # the smallest GPU bounds what every rank can use
    smallest = min(min(options) for options, _ in known)
    largest_smallest = min(max(options) for options, _ in known)
    possible = sorted({s * MIB_PER_GIB for s in sizes if smallest <= s <= largest_smallest})
    facts.infer(
        "gpu.memory_total_mib",
        smallest * MIB_PER_GIB,
        basis,
        possible if len(possible) > 1 else None,
    )
    if "gpu.memory_free_mib" not in facts:
        facts.infer(
            "gpu.memory_free_mib",
            smallest * MIB_PER_GIB,
            "assumed idle: a GPU known by its name only (nvidia-smi on the host "
            "shows what other processes hold)",
        )


@lru_cache(maxsize=1)
def _compat() -> dict[str, Any]:
    table: dict[str, Any] = json.loads(COMPAT_DATA.read_text(encoding="utf-8"))
    return table


def driver_cuda_version(driver: str) -> tuple[str, str] | None:
    """(highest CUDA version, the table row that says so) for a Linux driver version."""
    try:
        have = Version(str(driver).strip())
    except InvalidVersion:
        return None
    best = None
    for row in _compat()["driver_min"]:
        if have >= Version(row["driver"]):
            best = row
    if best is None:
        return None
    return best["cuda"], f"driver {driver} ≥ {best['driver']}, the minimum for CUDA {best['cuda']}"


def infer_driver_cuda(facts: Facts) -> None:
    driver = facts.value("driver.version")
    if driver is None or "driver.cuda_version" in facts:
        return
    found = driver_cuda_version(str(driver))
    if found is None:
        return
    cuda, how = found
    facts.infer("driver.cuda_version", cuda, f"NVIDIA's driver table ({COMPAT_NAME}): {how}")


def infer_hardware(facts: Facts) -> None:
    """Every hardware fact the names imply and nothing measured."""
    infer_gpu_memory(facts)
    infer_driver_cuda(facts)
