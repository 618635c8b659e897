"""What the judged vLLM release itself would refuse: facts under ``release.*``.

The release is the covered release (``knowledge.match_release``) that the vLLM version in
the facts — installed, ``--vllm-version`` or a report's — is judged by: the release itself,
or for a dev build, release candidate or local build the release it descends from. A
version outside the covered releases (or none) leaves the release-specific facts missing
with that reason, so the rules that need them cannot decide instead of guessing.

Computed from the generated knowledge tables (``knowledge/data/*.json``, written by
``tools/gen_knowledge.py`` from the release wheels):

* options: every option on the serve line the release does not accept, the nearest valid
  spelling (difflib over the release's options), the releases that do accept it, and the
  serve line corrected for the release; options no covered release accepts at all (decided
  without a version); values outside an option's choices in that release;
* registry: whether the release registers one of the model's architectures (and the first
  release that does), and whether it would try its Transformers backend instead;
* pins: transformers and torch against the release's ``Requires-Dist``;
* parsers: a ``--tool-call-parser`` / ``--reasoning-parser`` name the release does not
  register, where the release refuses it for this line (argparse choices, or its start-up
  check with the options that check reads);
* checks: an option given without the option the release checks it needs;
* LoRA: whether the architecture the release would load implements SupportsLoRA;
* speculative decoding: a ``speculative_config.method`` the release refuses, and a target
  model the method's check in the release refuses.

Options that the curated removed-flag rules (ARGS001, ARGS004) already explain are left
out of ``release.unaccepted_options``: those rules carry the migration advice, and one
cause gives one finding.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_doctor.facts.model import Fact, Facts, Source
from vllm_doctor.facts.packages import satisfies

# the options' facts live in release_options (the names below are this module's face too)
from vllm_doctor.facts.release_options import (
    CURATED_FLAG_RULES,
    SOURCE,
    _accepts,
    _given_words,
    _options,
    curated_flag_patterns,
    refused_option_hints,
)


def judge_release(facts: Facts, releases: tuple[str, ...]) -> tuple[str | None, str, str]:
    """(release or None, coverage, note): the covered release ``vllm.version`` is judged by
    (``knowledge.match_release``); coverage is covered, outside or unknown; the note says why
    (empty for a release judged exactly)."""
    from vllm_doctor.knowledge import match_release

    version = facts.value("vllm.version")
    if version is None:
        reason = facts.why_missing("vllm.version") or "the vLLM version is not known"
        return None, "unknown", reason
    match = match_release(str(version), releases)
    if match.release is None:
        return None, "outside", match.note
    return match.release, "covered", match.note


# The facts of this module that need a judged release (release.coverage says whether there
# is one; release.unknown_options is decided over every covered release, without a version).
_VERSION_FREE = (
    "release.coverage",
    "release.unknown_options",
    "release.unread_values",
    "release.world_spans_nodes",
)


def _release_paths() -> list[str]:
    from vllm_doctor.facts.schema import FACTS

    return [
        p
        for p in FACTS
        if p.startswith("release.") and p.count(".") == 1 and p not in _VERSION_FREE
    ]


def collect_release(facts: Facts) -> None:
    from vllm_doctor import knowledge

    releases = tuple(knowledge.covered_releases())
    release, coverage, note = judge_release(facts, releases)
    facts.set(
        "release.coverage",
        coverage,
        SOURCE,
        f"releases {releases[0]}–{releases[-1]}" if coverage == "covered" else note,
    )
    if release is None:
        reason = f"no covered release to judge by: {note} (covered: {releases[0]}–{releases[-1]})"
        for path in _release_paths():
            facts.mark_missing(path, reason)
    else:
        facts.set(
            "release.judged",
            release,
            SOURCE,
            note or f"vLLM {facts.value('vllm.version')} is release {release}",
        )
    _options(facts, release)
    _world_nodes(facts)
    if release is not None:
        _registry(facts, release)
        _pins(facts, release)
        _effective_dtype(facts, release)
        _parsers(facts, release)
        _requirements(facts, release)
        _lora(facts, release)
        _parallel(facts, release)
        _speculative(facts, release)


# Facts that say which release judged the version: they differ between the two runs by design.
_JUDGE_PATHS = {
    "release.coverage",
    "release.judged",
    "release.quant.judged_release",
    "release.attention.judged_release",
}


def judged_between_releases(facts: Facts, collect: Callable[[Facts], None]) -> None:
    """Run a ``release.*`` collector; for a dev build or release candidate, keep only what
    its release and the next minor release agree on.

    A nightly such as 0.23.1rc1.dev20 descends from 0.23.0 but carries changes that only
    0.24.0 releases: an option, architecture or kernel limit 0.24.0 brought may already be in
    it. So the collector runs a second time as if the version were that later release, and
    every fact on which the two runs differ is missing, with both answers in the reason,
    instead of an error the facts do not prove.
    """
    from vllm_doctor import knowledge

    before = set(facts.values) | set(facts.missing)
    collect(facts)
    version = facts.value("vllm.version")
    if version is None:
        return
    match = knowledge.match_release(str(version), tuple(knowledge.covered_releases()))
    if match.release is None or match.upper is None:
        return
    # the paths this collector wrote (another release.* collector may have run before it)
    written = (set(facts.values) | set(facts.missing)) - before - _JUDGE_PATHS
    later = Facts.from_dict(facts.to_dict())
    for path in written:
        later.values.pop(path, None)
        later.missing.pop(path, None)
    later.set("vllm.version", match.upper, SOURCE)
    collect(later)
    for path in sorted(written):
        here, there = facts.get(path), later.get(path)
        if _same_answer(here, there, match.release, match.upper):
            continue
        # already open at the release it descends from: that reason speaks of this build
        first = facts.why_missing(path) if here is None else None
        facts.values.pop(path, None)
        shown = {
            r: ("not known" if f is None else f.value)
            for r, f in ((match.release, here), (match.upper, there))
        }
        facts.mark_missing(
            path,
            f"vLLM {version} is a build between {match.release} and "
            f"{match.upper}, which differ here ({match.release}: "
            f"{shown[match.release]}; {match.upper}: {shown[match.upper]})"
            + (f"; at {match.release}: {first}" if first else ""),
        )


def _same_answer(here: Fact | None, there: Fact | None, release: str, upper: str) -> bool:
    """The two runs say the same, once each release's own name is set aside (a hint that
    reads "vLLM 0.23.0 does not accept it" agrees with "vLLM 0.24.0 does not accept it")."""
    import json

    if here is None or there is None:
        return here is there
    text = json.dumps(there.value, sort_keys=True, default=str)
    return json.dumps(here.value, sort_keys=True, default=str) == text.replace(upper, release)


# -- registry ---------------------------------------------------------------------------------


def _registry(facts: Facts, release: str) -> None:
    from vllm_doctor import knowledge

    archs = facts.value("model.architectures")
    if not archs:
        reason = "model.architectures is not known: " + (
            facts.why_missing("model.architectures") or "config.json has none"
        )
        for path in (
            "release.architecture_registered",
            "release.unregistered_architectures",
            "release.architecture_first_release",
            "release.transformers_fallback",
        ):
            facts.mark_missing(path, reason)
        return
    table = knowledge.load("registry")
    info = table.get("@release", release)
    suffixes = list((info.value if info else {}).get("convert_suffixes", ()))

    def known(arch: str) -> bool:
        if table.get(arch, release) is not None:
            return True
        # XForSequenceClassification served by a registered XForCausalLM through an adapter
        for suffix in suffixes:
            if arch.endswith(suffix):
                base = arch[: -len(suffix)]
                return any(table.get(base + other, release) is not None for other in suffixes)
        return False

    registered = [a for a in archs if known(a)]
    facts.set(
        "release.architecture_registered",
        bool(registered),
        SOURCE,
        f"model_executor/models/registry.py of vLLM {release}",
    )
    facts.set(
        "release.unregistered_architectures",
        [a for a in archs if a not in registered],
        SOURCE,
        f"vLLM {release}",
    )
    firsts = [first for a in archs if (first := table.first_release(a))]
    if firsts:
        first = min(firsts, key=Version)
        facts.set(
            "release.architecture_first_release",
            first,
            SOURCE,
            "first covered release that registers one of the architectures",
        )
    fallback = bool(info and info.value.get("transformers_fallback"))
    impl = None
    line, _ = _given_words(facts)
    if line is not None:
        impl = line.options.get("model-impl")
    detail = f"vLLM {release} " + (
        "tries its Transformers backend for an unregistered architecture"
        if fallback
        else "has no Transformers fallback"
    )
    if impl is not None and str(impl) == "vllm":
        fallback = False
        detail = "--model-impl vllm turns the Transformers fallback off"
    facts.set("release.transformers_fallback", fallback, SOURCE, detail)


# -- parsers, start-up checks, LoRA -------------------------------------------------------------

# parser kind -> (its option, the option that loads plugins registering more names)
_PARSER_OPTIONS = {
    "tool": ("tool-call-parser", "tool-parser-plugin"),
    "reasoning": ("reasoning-parser", "reasoning-parser-plugin"),
}
_PARSER_WORDS = {"tool": "tool-call parser", "reasoning": "reasoning parser"}


def _parsers(facts: Facts, release: str) -> None:
    """``release.unknown_parsers``: each parser name on the line that the judged release does
    not register and refuses at start-up for this line."""
    line, _ = _given_words(facts)
    if line is None:
        facts.mark_missing(
            "release.unknown_parsers",
            "no serve line: " + (facts.why_missing("serve.argv") or "not given"),
        )
        return
    from vllm_doctor import knowledge

    table = knowledge.load("parsers")
    names = table.at(release)
    checks = names.get("@release", {})
    options = knowledge.load("options").at(release)
    refused: list[str] = []
    for kind, (option, plugin) in _PARSER_OPTIONS.items():
        name = line.options.get(option)
        if not isinstance(name, str) or f"{kind}:{name}" in names:
            continue
        if "choices" in options.get(option, {}):
            continue  # the release's argparse choices: ARGS101 names the value
        if line.options.get(plugin):
            facts.mark_missing(
                "release.unknown_parsers",
                f"--{plugin} may register '{name}' (what a plugin registers is not known here)",
            )
            return
        check = checks.get(f"{kind}_check")
        if kind == "tool" and checks.get("tool_choices"):
            where = f"argparse choices ({checks['tool_choices']})"
        elif check and all(line.options.get(r) for r in check["requires"]):
            where = f"{check['function']} in {check['file']}" + "".join(
                f", with --{r}" for r in check["requires"]
            )
        else:
            continue  # this release does not check the name for this line
        have = sorted(k.split(":", 1)[1] for k in names if k.startswith(f"{kind}:"))
        first = table.first_release(f"{kind}:{name}")
        text = (
            f"--{option} {name}: vLLM {release} has no {_PARSER_WORDS[kind]} '{name}' "
            f"(refused by {where}); it has: {', '.join(have)}; "
        )
        text += (
            f"first release with '{name}': {first}"
            if first
            else f"no release {table.releases[0]}–{table.newest} has '{name}'"
        )
        nearest = difflib.get_close_matches(name, have, n=1, cutoff=0.6)
        refused.append(text + (f"; nearest name in {release}: {nearest[0]}" if nearest else ""))
    facts.set(
        "release.unknown_parsers",
        refused,
        SOURCE,
        f"the parsers vLLM {release} registers (knowledge/data/parsers.json)",
    )


def _requirements(facts: Facts, release: str) -> None:
    """``release.unmet_requirements``: options given without what the judged release checks
    they need at start-up (knowledge table ``checks``): another option, or a multimodal model
    (``:@multimodal``)."""
    line, _ = _given_words(facts)
    if line is None:
        facts.mark_missing(
            "release.unmet_requirements",
            "no serve line: " + (facts.why_missing("serve.argv") or "not given"),
        )
        return
    from vllm_doctor import knowledge

    unmet, undecided = [], []
    for key, check in knowledge.load("checks").at(release).items():
        option, needed = key.split(":", 1)
        if not line.options.get(option):
            continue
        if needed == "@multimodal":
            loaded = _loaded_class(facts, release)
            if isinstance(loaded, str):
                undecided.append(f"--{option} needs a multimodal model: {loaded}")
                continue
            arch, entry = loaded
            if entry.get("multimodal"):
                continue
            what = f"--{option} on {arch}, which is not multimodal"
        elif line.options.get(needed):
            continue
        else:
            what = f"--{option} without --{needed}"
        unmet.append(
            f"{what}: vLLM {release} refuses it ({check['function']} in "
            f'{check["file"]}: "{check["message"]}")'
        )
    if undecided and not unmet:
        facts.mark_missing("release.unmet_requirements", "; ".join(undecided))
        return
    facts.set(
        "release.unmet_requirements",
        unmet,
        SOURCE,
        f"the start-up checks of vLLM {release} (knowledge/data/checks.json)",
    )


def _parallel(facts: Facts, release: str) -> None:
    """``release.oversized_world``: ray or refuse (knowledge table ``parallel``)."""
    from vllm_doctor import knowledge

    entry = knowledge.load("parallel").at(release).get("oversized_world")
    if entry is None:
        facts.mark_missing(
            "release.oversized_world",
            f"the knowledge does not say how vLLM {release} picks the backend",
        )
        return
    facts.set(
        "release.oversized_world",
        entry["behaviour"],
        SOURCE,
        f"ParallelConfig.__post_init__ of vLLM {release} (knowledge/data/parallel.json)",
    )


# executor backends for which ParallelConfig skips its node check: Ray places the ranks over
# its cluster, an external launcher (torchrun) starts them where it was told
_SPANNING_BACKENDS = ("ray", "external_launcher")
# options that name other nodes without changing what the node check compares
_OTHER_NODE_WORDS = ("headless", "data-parallel-address", "data-parallel-start-rank")


def _world_nodes(facts: Facts) -> None:
    """``release.world_spans_nodes``: the ranks of one data-parallel replica (TP × PP × PCP)
    may lie beyond this node's GPUs, as ParallelConfig.__post_init__ decides it in every
    release: it compares the world size with this node's GPUs only when no executor backend
    is given and ``--nnodes`` is 1 (0.11.1 on; before, it switches to Ray by itself, which
    release.oversized_world says). A given backend of ray or external_launcher, or ``--nnodes``
    above 1, spreads the ranks over nodes. ``--headless``, ``--data-parallel-address`` and
    the other data-parallel options name other nodes, but each replica's ranks are still
    compared with this node's GPUs: they are named in the detail, and decide nothing."""
    line, _ = _given_words(facts)
    if line is None:
        facts.mark_missing("release.world_spans_nodes", "no serve line")
        return
    backend = line.value("distributed-executor-backend")
    nnodes = line.value("nnodes")
    try:
        nodes = int(nnodes) if nnodes is not None else 1
    except (TypeError, ValueError):
        nodes = 1
    world = facts.value("serve.world_size")
    others = [f"--{w}" for w in _OTHER_NODE_WORDS if w in line.given]
    local = line.value("data-parallel-size-local")
    dp = line.value("data-parallel-size")
    if local is not None and dp is not None and str(local).isdigit() and int(local) < int(dp):
        others.append(f"--data-parallel-size-local {local} of {dp}")
    if isinstance(backend, str) and backend in _SPANNING_BACKENDS:
        facts.set(
            "release.world_spans_nodes",
            True,
            SOURCE,
            f"--distributed-executor-backend {backend}: the {world} ranks are placed by "
            + ("the Ray cluster" if backend == "ray" else "the external launcher")
            + ", not counted against this node's GPUs",
        )
    elif nodes > 1:
        per = f" ({int(world) // nodes} per node)" if isinstance(world, int) else ""
        facts.set(
            "release.world_spans_nodes",
            True,
            SOURCE,
            f"--nnodes {nodes}: the {world} ranks spread over {nodes} nodes{per}",
        )
    else:
        facts.set(
            "release.world_spans_nodes",
            False,
            SOURCE,
            "no executor backend and --nnodes 1: vLLM compares the "
            f"{world} ranks of a replica with this node's GPUs"
            + (
                f" ({', '.join(others)} name other nodes, but not where one replica's ranks "
                "run: that takes --nnodes or --distributed-executor-backend ray)"
                if others
                else ""
            ),
        )


def _loaded_class(facts: Facts, release: str) -> tuple[str, dict[str, Any]] | str:
    """(architecture, registry entry) of the class the judged release would load — the first
    of ``model.architectures`` its registry has — or why it is not known."""
    archs = facts.value("model.architectures")
    if not archs:
        return "model.architectures is not known: " + (
            facts.why_missing("model.architectures") or "config.json has none"
        )
    line, _ = _given_words(facts)
    impl = line.options.get("model-impl") if line is not None else None
    if impl is not None and str(impl) not in ("auto", "vllm"):
        return f"--model-impl {impl}: the class vLLM loads is not the registry's"
    from vllm_doctor import knowledge

    table = knowledge.load("registry")
    found = next(((a, span) for a in archs if (span := table.get(a, release)) is not None), None)
    if found is None:
        return (
            f"vLLM {release} registers none of {', '.join(archs)} (MODEL100/MODEL101 speak "
            "about that)"
        )
    arch, span = found
    return arch, span.value


_CLASS_PATHS = (
    "release.lora_architecture",
    "release.lora_supported",
    "release.model_modalities",
    "release.pooling_model",
)


def _lora(facts: Facts, release: str) -> None:
    """The architecture the judged release would load: whether it implements LoRA, the
    modalities its processor takes, whether ``--runner auto`` makes it a pooling model."""
    loaded = _loaded_class(facts, release)
    if isinstance(loaded, str):
        for path in _CLASS_PATHS:
            facts.mark_missing(path, loaded)
        return
    arch, entry = loaded
    where = f"{entry['class']} in model_executor/models/{entry['module']}.py of vLLM {release}"
    facts.set(
        "release.lora_architecture",
        arch,
        SOURCE,
        f"first of model.architectures registered in vLLM {release}",
    )
    unfollowed = f"{where} could not be followed statically in the release source"
    if entry.get("lora") is None:
        facts.mark_missing("release.lora_supported", unfollowed)
    else:
        facts.set(
            "release.lora_supported",
            bool(entry["lora"]),
            SOURCE,
            where + (" implements" if entry["lora"] else " does not implement") + " SupportsLoRA",
        )
    if not entry.get("multimodal"):
        facts.set("release.model_modalities", [], SOURCE, f"{where}: not multimodal")
    elif entry.get("modalities") is None:
        facts.mark_missing(
            "release.model_modalities",
            f"{where}: its processing info's get_supported_mm_limits could not be read statically",
        )
    else:
        facts.set(
            "release.model_modalities",
            entry["modalities"],
            SOURCE,
            f"{where}: get_supported_mm_limits of its processing info",
        )
    if entry.get("pooling") is None:
        facts.mark_missing("release.pooling_model", unfollowed)
    else:
        facts.set(
            "release.pooling_model",
            bool(entry["pooling"]),
            SOURCE,
            where
            + (" is" if entry["pooling"] else " is not")
            + " a pooling model (VllmModelForPooling):"
            " --runner auto "
            + (
                "serves it as pooling"
                if entry["pooling"]
                else "generates unless the architecture's suffix converts it"
            ),
        )


_SPEC_PATHS = ("release.unknown_spec_methods", "release.spec_target_refused")


def _speculative(facts: Facts, release: str) -> None:
    """``release.unknown_spec_methods`` and ``release.spec_target_refused`` (knowledge table
    ``speculative``), for the ``speculative_config.method`` on the serve line."""
    method = facts.value("serve.speculative_method")
    if not isinstance(method, str):
        reason = facts.why_missing("serve.speculative_method")
        for path in _SPEC_PATHS:
            if reason:
                facts.mark_missing(path, "serve.speculative_method is not known: " + reason)
            else:  # no method given (none, or detected from the draft model): nothing refused
                facts.set(path, [], SOURCE, "no speculative_config.method on the serve line")
        return
    from vllm_doctor import knowledge

    table = knowledge.load("speculative")
    entries = table.at(release)
    info = entries.get("@release", {})
    methods = sorted(k.split(":", 1)[1] for k in entries if k.startswith("method:"))
    if not info.get("validated") or not methods:
        facts.mark_missing(
            "release.unknown_spec_methods",
            f"vLLM {release} does not validate "
            "speculative_config.method against a list (no pydantic Literal)",
        )
    elif method in methods:
        facts.set(
            "release.unknown_spec_methods",
            [],
            SOURCE,
            f"SpeculativeMethod of vLLM {release} ({info['file']})",
        )
    else:
        first = table.first_release(f"method:{method}")
        facts.set(
            "release.unknown_spec_methods",
            [
                f"speculative_config.method '{method}': vLLM {release} refuses it (SpeculativeMethod "
                f"in {info['file']}); it accepts: {', '.join(methods)}; "
                + (
                    f"first release with '{method}': {first}"
                    if first
                    else f"no release {table.releases[0]}–{table.newest} has '{method}'"
                )
            ],
            SOURCE,
            f"SpeculativeMethod of vLLM {release} ({info['file']})",
        )
    check = entries.get(f"target:{method}")
    if check is None:
        if f"target:{method}" in table:
            facts.mark_missing(
                "release.spec_target_refused",
                f"vLLM {release} does not check the "
                f"target of '{method}' in its config (it checks the model class "
                "when loading, which the knowledge does not carry)",
            )
        else:
            facts.set(
                "release.spec_target_refused",
                [],
                SOURCE,
                f"vLLM {release} checks no target model for '{method}'",
            )
        return
    model_type = _text_model_type(facts)
    if model_type is None:
        facts.mark_missing(
            "release.spec_target_refused",
            "the model's text model_type is not "
            "known: "
            + (facts.why_missing("model.model_type") or "its nested text config has none"),
        )
        return
    accepted = [m for m in check["model_types"] if m in model_type]
    facts.set(
        "release.spec_target_refused",
        []
        if accepted
        else [
            f"speculative_config.method '{method}' on a {model_type} model: vLLM {release} accepts "
            f"only targets whose hf_text_config.model_type contains one of "
            f"{', '.join(check['model_types'])} ({check['function']} in {check['file']})"
        ],
        SOURCE,
        f"the target check of vLLM {release}",
    )


def _text_model_type(facts: Facts) -> str | None:
    """The model_type vLLM's ``hf_text_config`` has: the nested text config's, else the
    top-level one's (None: not known)."""
    nested = facts.get("model.text_model_type")
    if nested is not None:
        return str(nested.value) if nested.value else None
    if "model.text_model_type" in facts.missing:
        return None
    value = facts.value("model.model_type")
    return str(value) if value else None


# -- pins ---------------------------------------------------------------------------------------


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


# -- the dtype the release computes in -------------------------------------------------------

# How `--dtype auto` resolves, by release (config.py / config/model.py, platforms/cuda.py):
# * before 0.9.0: the checkpoint's dtype as it is (float32 → float16; Gemma 2/3 → bfloat16),
#   and the worker refuses bfloat16 below capability 8.0 (_check_if_gpu_supports_dtype);
# * 0.9.0 (PR 17265): float32 → float16 (PLaMo2 → bfloat16), then a dtype the platform lacks
#   (CudaPlatform.supported_dtypes: bfloat16 from 8.0) falls back to its first supported one;
# * 0.9.1 on (_resolve_auto_dtype): the platform's supported dtypes the model allows (no
#   float16 for _FLOAT16_NOT_SUPPORTED_MODELS); float32 → the first of them; the checkpoint's
#   dtype if supported, else the first.
_FALLBACK_FROM, _RESOLVE_FROM = Version("0.9.0"), Version("0.9.1")
_NO_FLOAT16 = ("gemma2", "gemma3", "gemma3_text", "plamo2", "glm4")
_DTYPE_NAMES = {
    "half": "float16",
    "float16": "float16",
    "fp16": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float": "float32",
    "float32": "float32",
    "fp32": "float32",
}


def _supported_dtypes(capability: int, model_type: str) -> list[str]:
    dtypes = (
        ["bfloat16", "float16", "float32"]
        if capability >= 80
        else ["float16", "float32"]
        if capability >= 60
        else ["float32"]
    )
    return [d for d in dtypes if not (d == "float16" and model_type in _NO_FLOAT16)]


def _effective_dtype(facts: Facts, release: str) -> None:
    """release.effective_dtype: the dtype vLLM ``release`` computes in for this serve line."""
    path = "release.effective_dtype"
    ours = Version(release)
    facts.set(
        "release.auto_dtype_fallback",
        ours >= _FALLBACK_FROM,
        SOURCE,
        f"vLLM {release}: --dtype auto "
        + (
            "falls back from a dtype the GPU lacks (PR 17265, 0.9.0)"
            if ours >= _FALLBACK_FROM
            else "keeps the checkpoint's dtype"
        ),
    )
    given = str(facts.value("serve.dtype") or "auto").lower()
    if given != "auto":
        if given in _DTYPE_NAMES:
            facts.set(path, _DTYPE_NAMES[given], SOURCE, f"--dtype {given}")
        return
    checkpoint = facts.value("model.dtype")
    config = _DTYPE_NAMES.get(str(checkpoint).lower()) if checkpoint is not None else None
    if config is None:
        facts.mark_missing(
            path,
            "--dtype auto takes the checkpoint's dtype: "
            + (facts.why_missing("model.dtype") or f"model.dtype {checkpoint!r} is not known"),
        )
        return
    model_type = str(facts.value("model.text_model_type") or facts.value("model.model_type") or "")
    if ours < _FALLBACK_FROM:
        gemma = model_type in ("gemma2", "gemma3", "gemma3_text")
        value = ("bfloat16" if gemma else "float16") if config == "float32" else config
        facts.set(
            path,
            value,
            SOURCE,
            f"--dtype auto in vLLM {release}: the checkpoint's {checkpoint}, whatever the GPU",
        )
        return
    capability = facts.value("gpu.min_capability")
    if capability is None:
        facts.mark_missing(
            path,
            f"--dtype auto in vLLM {release} depends on the GPU: "
            + (facts.why_missing("gpu.min_capability") or "gpu.min_capability is not known"),
        )
        return
    if ours < _RESOLVE_FROM:
        supported = _supported_dtypes(int(capability), "")
        wanted = (
            "bfloat16" if model_type == "plamo2" else ("float16" if config == "float32" else config)
        )
    else:
        supported = _supported_dtypes(int(capability), model_type)
        wanted = supported[0] if config == "float32" else config
    value = wanted if wanted in supported else supported[0]
    facts.set(
        path,
        value,
        SOURCE,
        f"--dtype auto in vLLM {release}: checkpoint {checkpoint} "
        f"on compute capability {capability} (supported: {', '.join(supported)})",
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


def collect(facts: Facts) -> None:
    collect_release(facts)


__all__ = [
    "CURATED_FLAG_RULES",
    "SOURCE",
    "Source",
    "_accepts",
    "_given_words",
    "collect_release",
    "curated_flag_patterns",
    "refused_option_hints",
]
