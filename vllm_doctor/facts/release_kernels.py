"""What the judged vLLM release itself says about the quantization method and the attention
backends, for this GPU and model (facts ``release.quant.*`` and ``release.attention.*``).

Read from the generated knowledge tables ``quantization`` and ``attention`` (built from the
release wheels by tools/extractors/quantization.py and attention.py). The release is the
covered one ``vllm.version`` is judged by (``knowledge.match_release``); outside coverage,
or where an input fact is missing, the facts are marked missing with the reason, so rules
say "cannot decide". Only CUDA GPUs are judged (the capabilities are NVIDIA's).

Quantization: vLLM refuses a method whose ``get_min_capability()`` is above the GPU's
(``VllmConfig._get_quantization_config``), after its override step may have replaced the
checkpoint's method by another (``gptq`` → ``gptq_marlin``). ``release.quant.min_capability``
is therefore the lowest minimum over the method and every method whose
``override_quantization_method`` names it in that release; the GPU is refused only below it.

Attention: from 0.12.0 vLLM walks ``_get_backend_priorities`` for the GPU and keeps the
backends whose checks accept head size, dtype and KV-cache dtype ("No valid attention backend
found" when none does); a forced backend is validated up front from 0.11.1. A backend
"rejects" only where its recorded check says no; a check decided at run time (installed FA
version, ...) is unknown, never a rejection.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.release_model import DTYPE_NAMES

SOURCE = "release knowledge"
QUANT_PATHS = (
    "release.quant.judged_release",
    "release.quant.method",
    "release.quant.known",
    "release.quant.min_capability",
    "release.quant.capability_ok",
    "release.quant.deprecated",
    "release.quant.act_dtypes",
    "release.quant.act_dtype_ok",
)
ATTN_PATHS = (
    "release.attention.judged_release",
    "release.attention.candidates",
    "release.attention.supporting",
    "release.attention.any_supports",
    "release.attention.rejections",
    "release.attention.forced_supports",
    "release.attention.forced_rejections",
)

# ModelOpt checkpoints all say quant_method "modelopt"; vLLM picks the config by quant_algo
# (the NVFP4 config was named "nvfp4" in 0.8.x). A release that has none of the names is not
# judged: how it reads such a checkpoint is not in the table.
_MODELOPT_BY_ALGO = {
    "FP8": ("modelopt",),
    "NVFP4": ("modelopt_fp4", "nvfp4"),
    "MIXED_PRECISION": ("modelopt_mixed",),
    "MXFP8": ("modelopt_mxfp8",),
}
# AutoRound checkpoints say quant_method "auto-round": vLLM 0.9.0-0.14.1 list that method,
# and from 0.15.0 INCConfig.override_quantization_method takes such a checkpoint as "inc"
# (read in the 0.27.1 wheel: config/model.py _verify_quantization, quantization/inc/inc.py)
_AUTO_ROUND = ("auto-round", "inc")
_AUTO_ROUND_SPELLINGS = frozenset({"auto-round", "auto_round", "autoround"})


@dataclass(frozen=True)
class Floor:
    value: int | None
    why: str


def quant_floor(values: dict[str, Any], method: str) -> Floor:
    """The lowest capability at which ``method`` passes vLLM's check in a release, given the
    release's table values (``Table.at``); None with the reason where it cannot be read."""
    record = values.get(f"method:{method}")
    if record is None:
        return Floor(None, f"{method} is not a method of this release")
    names = [method, *list(record.get("overridable_by") or [])]
    floors = []
    for name in names:
        other = values.get(f"method:{name}") or {}
        cap = other.get("min_capability")
        if cap is None:
            return Floor(None, f"the minimum capability of {name} is not stated statically")
        floors.append((cap, name))
    cap, name = min(floors)
    via = "" if name == method else f" (as {name}, which vLLM may pick instead)"
    return Floor(cap, f"get_min_capability of {name}{via}: {cap}")


def _judged(
    facts: Facts, kind: str, paths: tuple[str, ...]
) -> tuple[str, dict[str, Any], str] | None:
    """(release, that release's ``kind`` table, detail) for the release that judges
    ``vllm.version`` (facts.release decides); None, with ``paths`` marked missing and the
    reason, where no release does."""
    from vllm_doctor import knowledge
    from vllm_doctor.facts.release import judge_release

    try:
        table = knowledge.load(kind)
    except knowledge.KnowledgeError as err:
        _mark_missing(facts, paths, str(err))
        return None
    release, coverage, note = judge_release(facts, tuple(table.releases))
    if coverage == "outside" or release is None:
        _mark_missing(
            facts, paths, f"no release knowledge: {note}" if coverage == "outside" else note
        )
        return None
    return release, table.at(release), f"vLLM {release}" + (f"; {note}" if note else "")


def _mark_missing(facts: Facts, paths: Iterable[str], reason: str) -> None:
    for path in paths:
        facts.mark_missing(path, reason)


def _dtype(facts: Facts) -> tuple[str | None, str]:
    given = facts.value("serve.dtype")
    if isinstance(given, str) and given.lower() != "auto":
        name = DTYPE_NAMES.get(given.lower())
        return name, "" if name else f"--dtype {given} is not a dtype the doctor maps"
    config = facts.value("model.dtype")
    if isinstance(config, str) and DTYPE_NAMES.get(config.lower()) in ("float16", "bfloat16"):
        return DTYPE_NAMES[config.lower()], ""
    if "model.dtype" not in facts and facts.why_missing("model.dtype"):
        return None, facts.why_missing("model.dtype") or "model.dtype not known"
    return None, "the dtype vLLM resolves from --dtype auto is not known here"


def _method(facts: Facts) -> tuple[tuple[str, ...] | None, str]:
    """The method names to judge (the first the release knows), and where they came from,
    for a serve line without --quantization (a given one goes through the release's own
    override and alias steps: _collect_given_quant)."""
    method = facts.value("model.quant_method")
    if isinstance(method, str) and method:
        # vLLM lower-cases the name and spells compressed_tensors with a hyphen
        method = method.lower().replace("compressed_tensors", "compressed-tensors")
        if method in _AUTO_ROUND_SPELLINGS:
            return _AUTO_ROUND, "model.quant_method (an AutoRound checkpoint)"
        if method == "modelopt":
            algo = facts.value("model.quant_algo")
            if isinstance(algo, str) and algo.upper() in _MODELOPT_BY_ALGO:
                return _MODELOPT_BY_ALGO[algo.upper()], "model.quant_method + model.quant_algo"
            return None, "a ModelOpt checkpoint without a known quant_algo"
        return (method,), "model.quant_method"
    return None, ""


@dataclass(frozen=True)
class Resolved:
    """What ``ModelConfig._verify_quantization`` of a release makes of the names: the method
    it loads (``method``), or why it refuses (``refused``), or why the names alone do not
    decide (``undecided``); ``steps`` says how, in words."""

    method: str | None = None
    refused: str | None = None
    undecided: str | None = None
    steps: str = ""


def _override_answer(entry: dict[str, Any], checkpoint: str, user: str | None) -> str | None:
    """What one ``override_quantization_method`` answers (table ``override:<m>``)."""
    literals = set(entry.get("literals") or ())
    ckpt = checkpoint if checkpoint in literals else "*"
    asked = user if user is None or user in literals else "*"
    for row_ckpt, row_user, result in entry.get("returns") or ():
        if row_ckpt == ckpt and row_user == asked:
            return str(result) if result is not None else None
    return None


def resolve_quantization(
    values: dict[str, Any], release: str, given: str, checkpoint: str | None
) -> Resolved:
    """``--quantization given`` with a checkpoint whose (normalised) ``quant_method`` is
    ``checkpoint`` (None: the checkpoint has no quantization_config), through the release's
    own steps (``verify`` and ``override:<m>`` of its quantization table): its names, the
    override step, the mismatch check, the membership check."""
    verify = values.get("verify")
    if not isinstance(verify, dict):
        return Resolved(undecided=f"how vLLM {release} resolves --quantization is not in the table")
    user = given.lower() if verify.get("lower_user") else given
    steps = [f"--quantization {given}" + (f" (read as {user})" if user != given else "")]
    if checkpoint is not None:
        ckpt = checkpoint.lower() if verify.get("checkpoint_lower", True) else checkpoint
        for old, new in verify.get("aliases") or ():
            ckpt = ckpt.replace(old, new)
        steps.append(f"checkpoint quant_method {ckpt}")
        order = [m for m in verify.get("user_first") or () if m == user]
        order += [m for m in verify.get("chain") or () if m not in order]
        for name in order:
            entry = values.get(f"override:{name}")
            if not isinstance(entry, dict):
                continue
            answer = _override_answer(entry, ckpt, user)
            if answer is None:
                continue
            where = (
                f"{entry.get('config', name)}.override_quantization_method ({entry.get('file')})"
            )
            if answer == "?":
                return Resolved(
                    undecided=f"{where} decides from more than the names "
                    f"(--quantization {user}, checkpoint {ckpt})",
                    steps="; ".join(steps),
                )
            steps.append(f"{where} picks {answer}")
            user = ckpt = answer
            break
        if user != ckpt and verify.get("mismatch_refused"):
            return Resolved(
                refused=f"the checkpoint's quant_method ({ckpt}) does not match --quantization "
                f"({user}) after the override step ({verify.get('file')})",
                steps="; ".join(steps),
            )
    else:
        steps.append("the checkpoint has no quantization_config")
    return Resolved(method=user, steps="; ".join(steps))


def _checkpoint_method(facts: Facts) -> tuple[bool, str | None, str]:
    """(known, the checkpoint's quant_method or None for an unquantized one, why not known).
    A method inferred from the model's name decides nothing."""
    fact = facts.get("model.quant_method")
    if fact is not None and not fact.inferred and isinstance(fact.value, str) and fact.value:
        method = fact.value.lower()
        if method == "modelopt":
            algo = facts.value("model.quant_algo")
            if isinstance(algo, str) and algo.upper() in _MODELOPT_BY_ALGO:
                return True, _MODELOPT_BY_ALGO[algo.upper()][0], ""
        return True, method, ""
    inferred = facts.get("model.inferred")
    if fact is None and inferred is not None and inferred.value is False:
        return True, None, ""  # config.json read: no quantization_config
    why = facts.why_missing("model.quant_method") or facts.why_missing("model.architectures")
    return False, None, why or "the model's config.json is not known (pass --model-config)"


def _collect_quant(facts: Facts) -> None:
    given = facts.value("serve.quantization")
    if isinstance(given, str) and given:
        _collect_given_quant(facts, given)
        return
    names, origin = _method(facts)
    if names is None:
        # an unquantized model on a known serve line: the facts are absent, not unknown
        reason = origin or next(
            (
                facts.why_missing(p)
                for p in ("serve.quantization", "model.quant_method")
                if facts.why_missing(p)
            ),
            None,
        )
        if reason:
            _mark_missing(facts, QUANT_PATHS, reason)
        return
    judged = _judged(facts, "quantization", QUANT_PATHS)
    if judged is None:
        return
    release, values, detail = judged
    method = next((n for n in names if f"method:{n}" in values), names[0])
    if (len(names) > 1 or origin.endswith("quant_algo")) and f"method:{method}" not in values:
        # a ModelOpt algo this release names otherwise
        _mark_missing(
            facts,
            QUANT_PATHS,
            f"which method vLLM {release} uses for this "
            f"checkpoint ({'/'.join(names)}) is not in the table",
        )
        return
    _judge_method(facts, values, release, detail, method, origin)


def _judge_method(
    facts: Facts, values: dict[str, Any], release: str, detail: str, method: str, origin: str
) -> None:
    """The release.quant.* facts for the method the judged release loads."""
    facts.set("release.quant.judged_release", release, SOURCE, detail)
    facts.set("release.quant.method", method, SOURCE, origin)
    record = values.get(f"method:{method}")
    facts.set(
        "release.quant.known",
        record is not None,
        SOURCE,
        f"{detail}: model_executor/layers/quantization/__init__.py",
    )
    if record is None:
        _mark_missing(
            facts, QUANT_PATHS[3:], f"{method} is not a quantization method of vLLM {release}"
        )
        return
    facts.set("release.quant.deprecated", bool(record.get("deprecated")), SOURCE, detail)
    if record.get("act_dtypes") is not None:
        facts.set("release.quant.act_dtypes", record["act_dtypes"], SOURCE, detail)
    else:
        facts.mark_missing(
            "release.quant.act_dtypes",
            f"get_supported_act_dtypes of {method} is computed at run time",
        )
    _collect_act_dtype(facts, values, method, release)
    floor = quant_floor(values, method)
    if floor.value is None:
        facts.mark_missing("release.quant.min_capability", floor.why)
        facts.mark_missing("release.quant.capability_ok", floor.why)
        return
    facts.set(
        "release.quant.min_capability",
        floor.value,
        SOURCE,
        f"{detail}: {record.get('file', '')} {floor.why}",
    )
    gpu = facts.get("gpu.min_capability")
    if gpu is None:
        facts.mark_missing(
            "release.quant.capability_ok",
            facts.why_missing("gpu.min_capability") or "no GPU capability",
        )
        return
    facts.set(
        "release.quant.capability_ok",
        int(gpu.value) >= floor.value,
        SOURCE,
        f"GPU {gpu.value} vs minimum {floor.value} in vLLM {release}",
    )


def _collect_given_quant(facts: Facts, given: str) -> None:
    """``--quantization`` given: the method the judged release ends with, through its own
    override and alias steps (``resolve_quantization``), not the name as written: an
    AutoRound checkpoint served with ``--quantization auto_round`` loads as ``inc`` in the
    releases whose INC override claims ``auto-round`` checkpoints whatever the flag says."""
    judged = _judged(facts, "quantization", QUANT_PATHS)
    if judged is None:
        reason = facts.why_missing("release.quant.known") or "no release to judge by"
        facts.mark_missing("release.quant.conflict", reason)
        return
    release, values, detail = judged
    known, checkpoint, why = _checkpoint_method(facts)
    if known:
        resolved = resolve_quantization(values, release, given, checkpoint)
        if resolved.undecided and f"method:{given.lower()}" in values:
            # a method the release lists, which an override may still swap for a sibling
            # (gptq -> gptq_marlin): judged as given, as vLLM starts from it
            resolved = Resolved(
                method=given.lower(),
                steps=f"--quantization {given} (an override may pick another method: "
                f"{resolved.undecided})",
            )
    elif f"method:{given.lower()}" in values:
        # the checkpoint is not known: a method the release lists is judged as given (what
        # an override may make of it depends on the checkpoint)
        resolved = Resolved(method=given.lower(), steps=f"--quantization {given}")
    else:
        resolved = Resolved(
            undecided=f"--quantization {given} is not a method of vLLM {release}, but its "
            f"override step may replace it from the checkpoint's quantization_config: {why}"
        )
    if resolved.refused is not None:
        facts.set(
            "release.quant.conflict",
            resolved.refused,
            SOURCE,
            f"{detail}: {resolved.steps}",
        )
    elif "model.quant_method" in facts or known:
        facts.set("release.quant.conflict", "", SOURCE, f"{detail}: {resolved.steps or given}")
    else:
        facts.mark_missing("release.quant.conflict", resolved.undecided or why)
    if resolved.method is None:
        reason = resolved.undecided or f"vLLM {release} refuses: {resolved.refused}"
        if resolved.steps:
            reason += f" ({resolved.steps})"
        _mark_missing(facts, QUANT_PATHS, reason)
        return
    _judge_method(facts, values, release, detail, resolved.method, resolved.steps)


def _collect_act_dtype(facts: Facts, values: dict[str, Any], method: str, release: str) -> None:
    """Whether an explicit --dtype is one the method (or a method vLLM may pick instead)
    accepts; ``--dtype auto`` resolves at run time and is not judged."""
    given = facts.value("serve.dtype")
    if not isinstance(given, str) or given.lower() == "auto":
        reason = facts.why_missing("serve.dtype")
        if reason:
            facts.mark_missing("release.quant.act_dtype_ok", reason)
        return  # auto (or no --dtype): absent, vLLM picks a dtype it accepts
    dtype = DTYPE_NAMES.get(given.lower())
    if dtype is None:
        facts.mark_missing("release.quant.act_dtype_ok", f"--dtype {given} is not mapped")
        return
    record = values.get(f"method:{method}") or {}
    names = [method, *list(record.get("overridable_by") or [])]
    accepted = []
    for name in names:
        listed = (values.get(f"method:{name}") or {}).get("act_dtypes")
        if listed is None:
            facts.mark_missing(
                "release.quant.act_dtype_ok",
                f"get_supported_act_dtypes of {name} is computed at run time",
            )
            return
        accepted += [d for d in listed if d not in accepted]
    facts.set(
        "release.quant.act_dtype_ok",
        dtype in accepted,
        SOURCE,
        f"--dtype {given} vs {accepted} ({', '.join(names)} in vLLM {release})",
    )


# -- attention -------------------------------------------------------------------------------


def _state(grid: dict[str, list[Any]] | None, value: int | str) -> bool | None:
    if not grid:
        return None
    if value in grid.get("yes", ()):
        return True
    if value in grid.get("no", ()):
        return False
    return None


def judge_backend(
    record: dict[str, Any], head: int | None, dtype: str | None, kv: str | None, capability: int
) -> tuple[bool | None, list[str]]:
    """(True/False/None, the reasons it says no) for one backend record of the table."""
    reasons: list[str] = []
    unknown = False
    cap = _state(record.get("capabilities"), capability)
    if cap is False:
        reasons.append(f"compute capability {capability} not supported")
    unknown |= cap is None
    if head is None:
        unknown = True
    else:
        ok = _state(record.get("head_size_check"), head)
        if ok is None and "head_size_check" not in record:
            sizes = record.get("head_sizes")
            ok = None if sizes is None else (not sizes or head in sizes)
        if ok is False:
            reasons.append(f"head size {head} not supported")
        unknown |= ok is None
    if dtype is None:
        unknown = True
    else:
        ok = _state(record.get("dtype_check"), dtype)
        if ok is None and "dtype_check" not in record and record.get("dtypes") is not None:
            ok = dtype in record["dtypes"]
        if ok is False:
            reasons.append(f"dtype {dtype} not supported")
        unknown |= ok is None
    if kv is not None:
        ok = _state(record.get("kv_cache_check"), kv)
        if ok is None and "kv_cache_check" not in record and kv == "auto":
            ok = True  # every backend reads a cache in the model dtype
        elif (
            ok is None
            and "kv_cache_check" not in record
            and record.get("kv_cache_dtypes") is not None
            and not record.get("kv_cache_dtype_runtime")
        ):
            ok = kv in record["kv_cache_dtypes"]
        if ok is False:
            reasons.append(f"kv_cache_dtype {kv} not supported")
        unknown |= ok is None
    if reasons:
        return False, reasons
    return (None if unknown else True), []


def _attention_inputs(facts: Facts) -> tuple[dict[str, Any] | None, str]:
    gpu = facts.get("gpu.min_capability")
    if gpu is None:
        # the upstream reason verbatim: reports print each distinct reason once
        return None, facts.why_missing("gpu.min_capability") or "no GPU capability"
    if "model.kv_lora_rank" in facts:
        return None, "MLA models (kv_lora_rank) are not judged by the generated attention facts"
    if facts.why_missing("model.kv_lora_rank") and "model.head_dim" not in facts:
        return None, facts.why_missing("model.kv_lora_rank") or "model not known"
    heads = [facts.value("model.head_dim")]
    global_head = facts.value("model.global_head_dim")
    if isinstance(global_head, int) and global_head not in heads:
        heads.append(global_head)  # every attention layer gets a backend for its head size
    dtype, why_dtype = _dtype(facts)
    kv = facts.value("serve.kv_cache_dtype")
    return {
        "capability": int(gpu.value),
        "heads": heads,
        "dtype": dtype,
        "kv": kv or "auto",
        "why_dtype": why_dtype,
    }, ""


def _collect_attention(facts: Facts) -> None:
    inputs, why = _attention_inputs(facts)
    if inputs is None:
        _mark_missing(facts, ATTN_PATHS, why)
        return
    judged = _judged(facts, "attention", ATTN_PATHS)
    if judged is None:
        return
    release, values, detail = judged
    facts.set("release.attention.judged_release", release, SOURCE, detail)
    cap, heads, dtype, kv = (inputs["capability"], inputs["heads"], inputs["dtype"], inputs["kv"])
    shown_heads = "/".join(str(h) if h is not None else "?" for h in heads)
    described = (
        f"capability {cap}, head size {shown_heads}, dtype {dtype or '?'}, kv_cache_dtype {kv}"
    )

    # the backends vLLM would consider by itself (each layer picks one for its head size)
    candidates = values.get(f"cuda_priority:std:{cap}")
    if "check:no_valid_backend" not in values or candidates is None:
        reason = (
            f"vLLM {release} picks the backend by an if-chain (before 0.12.0)"
            if "check:no_valid_backend" not in values
            else f"no priority list for capability {cap} in vLLM {release}"
        )
        _mark_missing(facts, ATTN_PATHS[1:5], reason)
    else:
        facts.set(
            "release.attention.candidates",
            candidates,
            SOURCE,
            f"{detail}: platforms/cuda.py _get_backend_priorities",
        )
        supporting, rejections = [], []
        refused_heads, undecided = [], []
        for head in heads:
            some_yes, some_unknown = False, []
            for name in candidates:
                record = values.get(f"backend:{name}")
                verdict, reasons = (
                    judge_backend(record, head, dtype, kv, cap) if record else (None, [])
                )
                if verdict is True:
                    some_yes = True
                    if name not in supporting:
                        supporting.append(name)
                elif verdict is False:
                    rejections.append(f"{name} (head size {head}): {'; '.join(reasons)}")
                else:
                    some_unknown.append(name)
            if not some_yes and not some_unknown:
                refused_heads.append(head)
            elif not some_yes:
                undecided.append(f"head size {head}: {', '.join(some_unknown)}")
        facts.set("release.attention.supporting", supporting, SOURCE, described)
        facts.set("release.attention.rejections", rejections, SOURCE, described)
        if refused_heads:
            facts.set(
                "release.attention.any_supports",
                False,
                SOURCE,
                f"{described}: no candidate for head size {'/'.join(map(str, refused_heads))}",
            )
        elif undecided:
            facts.mark_missing(
                "release.attention.any_supports",
                f"decided at run time or by inputs not known here "
                f"({'; '.join(undecided)}; {described}"
                f"{'; ' + inputs['why_dtype'] if inputs['why_dtype'] else ''})",
            )
        else:
            facts.set("release.attention.any_supports", True, SOURCE, described)

    forced = facts.value("serve.attention_backend")
    if not forced:
        absent = facts.why_missing("serve.attention_backend")
        if absent:  # no serve line; without a forced backend the facts are absent
            _mark_missing(facts, ATTN_PATHS[5:], absent)
        return
    name = str(forced).upper().removesuffix("_VLLM_V1")
    record = values.get(f"backend:{name}")
    if "check:forced_backend_validated" not in values:
        why = f"vLLM {release} does not validate a forced backend up front (0.11.1 on)"
    elif record is None:
        why = f"{name} is not an attention backend vLLM {release} knows"
    else:
        why = ""
    if why or record is None:
        _mark_missing(facts, ATTN_PATHS[5:], why)
        return
    verdicts = [judge_backend(record, head, dtype, kv, cap) for head in heads]
    reasons = [r for _, rs in verdicts for r in rs]
    if any(v is False for v, _ in verdicts):
        facts.set(
            "release.attention.forced_supports",
            False,
            SOURCE,
            f"{detail}: {record.get('file')} {record.get('class')}",
        )
    elif all(v is True for v, _ in verdicts):
        facts.set(
            "release.attention.forced_supports",
            True,
            SOURCE,
            f"{detail}: {record.get('file')} {record.get('class')}",
        )
    else:
        facts.mark_missing(
            "release.attention.forced_supports",
            f"{name}'s checks are decided at run time or by inputs not known here ({described})",
        )
    facts.set("release.attention.forced_rejections", sorted(set(reasons)), SOURCE, described)


def collect_release_kernels(facts: Facts) -> None:
    from vllm_doctor.facts.kv_cache_backends import collect_kv_cache_backends
    from vllm_doctor.facts.release_stack import collect_release_stack

    _collect_quant(facts)
    _collect_attention(facts)
    collect_kv_cache_backends(facts, _judged, judge_backend)
    collect_release_stack(facts)  # the packages and compiled kernels around the release
