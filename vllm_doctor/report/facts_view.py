"""The text view of ``vllm-doctor facts``: a section per area, flutter-doctor style.

Each section has a mark: ``✓`` everything collected, ``!`` some facts missing or only inferred,
``✗`` the area could not be collected (or its collector crashed). Every value is printed with
its source; every missing fact with its reason. ``verbose`` prints every fact (with the detail
of its source), per-GPU records, every link and the time each collector took.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from vllm_doctor.errors import CRASH_PREFIX
from vllm_doctor.facts.model import Fact, Facts, Source

OK, WARN, FAIL = "✓", "!", "✗"
_STYLE = {OK: "green", WARN: "yellow", FAIL: "red"}


@dataclass(frozen=True)
class Section:
    title: str
    areas: tuple[str, ...]
    # paths shown without -v (every fact is shown with -v)
    summary: tuple[str, ...]
    # without -v, missing facts that all lack the same input are one line (the memory
    # model's figures: one missing input leaves every one of them out)
    one_reason: bool = False


SECTIONS = (
    Section(
        "Stack",
        ("vllm", "torch", "packages", "driver"),
        (
            "vllm.version",
            "vllm.git_sha",
            "vllm.base_release",
            "vllm.location",
            "vllm.torch_requirement",
            "torch.version",
            "torch.cuda_version",
            "torch.matches_vllm_pin",
            "driver.version",
            "driver.cuda_version",
            "packages.*",
        ),
    ),
    Section(
        "GPUs and links",
        ("gpu", "topology"),
        (
            "gpu.count",
            "gpu.names",
            "gpu.capabilities",
            "gpu.memory_total_mib",
            "gpu.memory_free_mib",
            "gpu.mig_enabled",
            "gpu.visible_devices",
            "topology.worst_link",
            "topology.all_nvlink",
            "topology.p2p_all",
        ),
    ),
    Section(
        "Model",
        ("model",),
        (
            "model.id",
            "model.config_path",
            "model.architectures",
            "model.model_type",
            "model.family",
            "model.dtype",
            "model.quant_method",
            "model.quant_algo",
            "model.quant_scheme",
            "model.num_attention_heads",
            "model.num_key_value_heads",
            "model.head_dim",
            "model.global_head_dim",
            "model.num_hidden_layers",
            "model.num_experts",
            "model.num_mtp_layers",
            "model.kv_lora_rank",
            "model.weights_bytes",
            "model.inferred",
        ),
    ),
    Section(
        "Serve arguments",
        ("serve",),
        (
            "serve.model",
            "serve.tensor_parallel_size",
            "serve.pipeline_parallel_size",
            "serve.data_parallel_size",
            "serve.max_model_len",
            "serve.gpu_memory_utilization",
            "serve.quantization",
            "serve.kv_cache_dtype",
            "serve.speculative_method",
            "serve.attention_backend",
            "serve.legacy_flags",
            "serve.unknown_flags",
        ),
    ),
    Section(
        "Judged release",
        ("release",),
        (
            "release.judged",
            "release.coverage",
            "release.unknown_options",
            "release.unaccepted_options",
            "release.option_hints",
            "release.corrected_command",
            "release.invalid_choices",
            "release.architecture_registered",
            "release.architecture_first_release",
            "release.transformers_in_range",
            "release.torch_pin",
            "release.torch_matches_pin",
        ),
    ),
    Section("Environment", ("env",), ("env.*",)),
    Section("Crash log", ("log",), ("log.path", "log.lines")),
    Section(
        "Estimates",
        ("derived",),
        (
            "derived.free_memory_below_utilization",
            "derived.tp_divides_heads",
            "derived.tp_divides_kv_heads",
            "derived.driver_supports_torch_cuda",
        ),
    ),
    Section(
        "Memory estimate",
        ("memory",),
        (
            "memory.usable_gib",
            "memory.weights_gib",
            "memory.kv_cache_gib",
            "memory.kv_cache_tokens",
            "memory.max_concurrency",
            "memory.kv_verdict",
            "memory.kv_room",
        ),
        one_reason=True,
    ),
)

# areas that come from what the user passes (not from the machine)
_INPUT_AREAS = {"model", "serve", "log"}

# the collector whose timing belongs to a section
_TIMING_KEYS = {
    "Stack": ("packages",),
    "GPUs and links": ("gpus",),
    "Model": ("model",),
    "Serve arguments": ("serve",),
    "Environment": ("environment",),
    "Judged release": ("release",),
    "Estimates": ("derived",),
    "Memory estimate": ("memory",),
}


def _in_areas(path: str, areas: Iterable[str]) -> bool:
    return any(path == a or path.startswith(a + ".") for a in areas)


def _wanted(path: str, patterns: tuple[str, ...]) -> bool:
    for pattern in patterns:
        if pattern.endswith(".*"):
            if path.startswith(pattern[:-1]):
                return True
        elif path == pattern:
            return True
    return False


def format_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def format_value(path: str, value: Any, verbose: bool = False) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and "bytes" in path:
        return f"{format_bytes(value)} ({value})" if verbose else format_bytes(value)
    if isinstance(value, list):
        if path in ("gpu.devices", "topology.links") and not verbose:
            return f"{len(value)} record(s)"
        items = [
            json.dumps(v, default=str) if isinstance(v, (dict, list)) else str(v) for v in value
        ]
        if not verbose and len(items) > 8:
            items = [*items[:8], f"… {len(value) - 8} more"]
        return ", ".join(items) if items else "(none)"
    if isinstance(value, dict):
        return json.dumps(value, default=str, sort_keys=True)
    return str(value)


def section_status(facts: Facts, section: Section) -> tuple[str, str]:
    """(mark, short reason) of a section."""
    values = [(p, f) for p, f in facts.values.items() if _in_areas(p, section.areas)]
    missing = {p: r for p, r in facts.missing.items() if _in_areas(p, section.areas)}
    crashed = [r for r in missing.values() if r.startswith(CRASH_PREFIX)]
    if crashed:
        return FAIL, crashed[0]
    area_missing = [missing[a] for a in section.areas if a in missing]
    if area_missing and len(area_missing) == len(section.areas) and not values:
        # inputs the user did not give (serve line, model, log) are a warning, not a failure
        return (WARN if set(section.areas) <= _INPUT_AREAS else FAIL), area_missing[0]
    if not values and not missing:
        return OK, "none set" if section.areas == ("env",) else "nothing to report"
    inferred = any(f.source == Source.INFERRED for _, f in values)
    from_tables = any(f.inferred for _, f in values)
    if area_missing or missing or inferred or from_tables:
        reason = (
            area_missing[0]
            if area_missing
            else (
                f"{len(missing)} fact(s) missing"
                if missing
                else "some values are inferred from the model name"
                if inferred
                else "some values are inferred (-v shows from what)"
            )
        )
        return WARN, reason
    return OK, ""


def shown_notes(facts: Facts) -> list[str]:
    """The collection notes a reader sees: a crashed collector shows on its section instead."""
    return [note for note in facts.notes if not note.startswith(CRASH_PREFIX)]


def _fact_line(path: str, fact: Fact, verbose: bool) -> tuple[str, str, str]:
    source = fact.describe_source() if verbose else fact.source
    return path, format_value(path, fact.value, verbose), source


def render_facts(
    facts: Facts,
    console: Any = None,
    verbose: bool = False,
    timings: dict[str, float] | None = None,
    only: tuple[str, ...] | None = None,
    notes: bool = True,
) -> None:
    """Print the facts view on ``console`` (a rich Console; stdout when None).

    ``only`` limits it to the sections with these titles (`check` shows the first four);
    ``notes=False`` leaves the collection notes to the caller.
    """
    from rich.console import Console

    from vllm_doctor.report.output import escape

    console = console or Console(highlight=False)
    for section in SECTIONS:
        if only is not None and section.title not in only:
            continue
        if (
            section.areas == ("log",)
            and not verbose
            and not any(p.startswith("log.") for p in facts.values)
        ):
            continue  # no crash log given: nothing to show
        mark, why = section_status(facts, section)
        head = f"[{_STYLE[mark]}][{mark}][/] [bold]{escape(section.title)}[/]"
        if why:
            head += f" — {escape(why)}"
        if verbose and timings:
            spent = sum(timings.get(k, 0.0) for k in _TIMING_KEYS.get(section.title, ()))
            if spent:
                head += f" [dim]({spent * 1000:.1f} ms)[/]"
        console.print(head)
        paths = sorted(p for p in facts.values if _in_areas(p, section.areas))
        shown = [p for p in paths if verbose or _wanted(p, section.summary)]
        width = max((len(p) for p in shown), default=0)
        for path in shown:
            name, value, source = _fact_line(path, facts.values[path], verbose)
            console.print(
                f"    • {escape(name.ljust(width))}  {escape(value)}  [dim]({escape(source)})[/]"
            )
        hidden = len(paths) - len(shown)
        if hidden:
            console.print(f"    [dim]… {hidden} more fact(s): -v shows them[/]")
        if verbose and section.title == "GPUs and links":
            _render_devices(facts, console)
        missing = sorted((p, r) for p, r in facts.missing.items() if _in_areas(p, section.areas))
        if not verbose and section.one_reason and len({r for _, r in missing}) == 1:
            missing = [(f"{section.areas[0]}.* ({len(missing)} facts)", missing[0][1])]
        for path, reason in missing:
            if mark == FAIL and reason == why:
                continue  # already on the heading line
            said = reason
            computed = _in_areas(path, ("derived", "memory"))
            if not verbose and computed and reason.startswith("needs "):
                said = reason.split(":", 1)[0]  # the input's own reason is shown in its area
            console.print(f"    [yellow]✗ {escape(path)}[/]: {escape(said)}")
    for note in shown_notes(facts) if notes else ():
        console.print(f"[dim]note: {escape(note)}[/]")


def _render_devices(facts: Facts, console: Any) -> None:
    from vllm_doctor.report.output import escape

    for dev in facts.value("gpu.devices") or []:
        if not isinstance(dev, dict):
            continue
        cap = dev.get("capability")
        cap_text = f"sm_{cap}" if cap is not None else "sm_?"
        console.print(
            f"      GPU {dev.get('index')}: {escape(str(dev.get('name')))} {cap_text}, "
            f"{dev.get('memory_free_mib')}/{dev.get('memory_total_mib')} MiB free, "
            f"MIG {dev.get('mig')}, persistence {dev.get('persistence_mode')}, "
            f"ECC {dev.get('ecc_enabled')}"
        )
    for link in facts.value("topology.links") or []:
        if not isinstance(link, dict):
            continue
        console.print(
            f"      GPU{link.get('a')} ↔ GPU{link.get('b')}: {link.get('link')}, "
            f"P2P read {link.get('p2p_read')}, write {link.get('p2p_write')}"
        )


def _digest_parts(facts: Facts, section: Section) -> list[str]:
    """The few values that say what a section found, for the one-line summary of `check`."""
    v = facts.value
    parts: list[str] = []
    if section.title == "Stack":
        if v("vllm.version"):
            parts.append(f"vLLM {v('vllm.version')}")
        if v("torch.version"):
            cuda = f" (CUDA {v('torch.cuda_version')})" if v("torch.cuda_version") else ""
            parts.append(f"torch {v('torch.version')}{cuda}")
        if v("driver.version"):
            cuda = f" (CUDA {v('driver.cuda_version')})" if v("driver.cuda_version") else ""
            parts.append(f"driver {v('driver.version')}{cuda}")
    elif section.title == "GPUs and links":
        names = v("gpu.names") or []
        if names:
            unique = list(dict.fromkeys(map(str, names)))
            # a GPU named without its count (--gpu alone) says "?", never 1
            count = v("gpu.count", None if facts.why_missing("gpu.count") else len(names))
            how_many = f"{count if count is not None else '?'} × {unique[0]}"
            parts.append(how_many if len(unique) == 1 else ", ".join(unique))
        caps = sorted(set(v("gpu.capabilities") or []))
        if caps:
            parts.append("sm_" + "/".join(map(str, caps)))
        if v("topology.worst_link"):
            parts.append(f"worst link {v('topology.worst_link')}")
        if v("gpu.mig_enabled"):
            parts.append("MIG on")
    elif section.title == "Model":
        name = v("model.id") or ", ".join(map(str, v("model.architectures") or []))
        if name:
            parts.append(str(name))
        if v("model.id") and v("model.architectures"):
            parts.append(", ".join(map(str, v("model.architectures"))))
        quant = " ".join(str(x) for x in (v("model.quant_method"), v("model.quant_algo")) if x)
        if quant:
            parts.append(quant)
        if v("model.dtype"):
            parts.append(str(v("model.dtype")))
        if isinstance(v("model.weights_bytes"), int):
            parts.append(f"{format_bytes(v('model.weights_bytes'))} of weights")
    elif section.title == "Serve arguments":
        skip = {
            "serve.model",
            "serve.argv",
            "serve.flags",
            "serve.legacy_flags",
            "serve.unknown_flags",
        }
        # the knobs most rules look at first, then the rest; whole JSON options are left to -v
        # (their parts, like serve.speculative_method, are facts of their own)
        first = [p for p in section.summary if p not in skip]
        given = sorted(
            (
                (p, f)
                for p, f in facts.area("serve")
                if f.source == Source.SERVE and p not in skip and not isinstance(f.value, dict)
            ),
            key=lambda item: (first.index(item[0]) if item[0] in first else len(first), item[0]),
        )
        shown = [f"{p[len('serve.') :]}={format_value(p, f.value)}" for p, f in given[:6]]
        if len(given) > 6:
            shown.append(f"… {len(given) - 6} more")
        if v("serve.model"):
            parts.append(str(v("serve.model")))
        parts.extend(shown)
        for key in ("serve.unknown_flags", "serve.legacy_flags"):
            if v(key):
                parts.append(
                    f"{key[len('serve.') :].replace('_', ' ')}: {format_value(key, v(key))}"
                )
    return parts


def section_digest(facts: Facts, section: Section, said: set[str] | None = None) -> tuple[str, str]:
    """(mark, one line) for a section: its key values, then what is missing.

    ``said`` holds the reasons the report has already printed; one that is in it is not
    repeated (one NVML error, one line).
    """
    mark, why = section_status(facts, section)
    if why.endswith("fact(s) missing"):
        why = ""  # the count follows below
    parts = _digest_parts(facts, section)
    missing = [p for p, r in facts.missing.items() if _in_areas(p, section.areas) and r != why]
    text = ", ".join(parts)
    if why and why not in (said or set()):
        text = f"{text} — {why}" if text else why
        if said is not None:
            said.add(why)
    elif why:
        head = why.split(":", 1)[0].split(" (", 1)[0]
        head = head if len(head) <= 60 else head[:59] + "…"
        text = f"{text} — {head} (reason above)" if text else f"{head} (reason above)"
    elif not text:
        text = "nothing to report"
    if missing:
        text += f" ({len(missing)} fact{'s' if len(missing) != 1 else ''} missing: -v lists them)"
    return mark, text
