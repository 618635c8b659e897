"""The scheduler's token budget left by a speculative configuration (``derived.spec_*``).

Some drafters insert slots into the batch while they draft. vLLM reserves an upper bound for
them in ``VllmConfig._set_max_num_scheduled_tokens`` (config/vllm.py, 0.20.0 to 0.33.0):
``max_num_scheduled_tokens = max_num_batched_tokens − max_num_new_slots_for_drafting ×
max_num_seqs``, and refuses the configuration when that is zero or less ("max_num_scheduled_tokens
is set to N based on the speculative decoding settings, which does not allow any tokens to be
scheduled"); an explicit --max-num-scheduled-tokens (0.26.0 on) skips the subtraction.

Slots per request (``SpeculativeConfig.max_num_new_slots_for_drafting``, read in the wheels of
0.20.0-0.33.0): up to 0.27.x ``K − 1`` with parallel drafting plus one for a draft model; from
0.28.0 DFlash takes ``K``, parallel drafting with a draft model ``K``, parallel drafting ``K −
1``, a draft model 1, other methods 0; from 0.33.0 DFlash and DSpark take none (they draft in
a separate query pass). vLLM turns parallel drafting on for ``dflash`` (0.20.0
on) and ``dspark`` (0.25.0 on); ``parallel_drafting: true`` asks for it with other methods.

The batch sizes are the serve line's, else the defaults `vllm serve` fills in for the GPU
(memory/formula.py batch_defaults: 2048 / 256 below 70 GiB, on the A100 and on GB10; 8192 /
1024 above; 16384 / 1024 from 160 GiB in 0.28.0 on). Chunked prefill is on by default for every
generative model (ModelConfig.is_chunked_prefill_supported), the only kind speculative decoding
serves; a default the doctor does not model (data-parallel batched MoE, --performance-mode,
chunked prefill turned off) leaves the budget undecided rather than guessed.
"""

from __future__ import annotations

import re
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_doctor.facts.model import Facts, Source

PATHS = ("derived.spec_drafting_slots", "derived.spec_scheduled_tokens")

# methods for which vLLM sets parallel_drafting itself, and the first release that does
_PARALLEL_METHODS = {"dflash": Version("0.20.0"), "dspark": Version("0.25.0")}
# DFlash takes K slots, not K − 1 (max_num_new_slots_for_drafting rewritten in 0.28.0)
_DFLASH_K_SLOTS = Version("0.28.0")
# DFlash and DSpark draft in a separate query pass and add no slots (0.33.0)
_SEPARATE_PASS = Version("0.33.0")


class SpecMissing(Exception):
    """A fact the budget needs is not known (path, why)."""

    def __init__(self, path: str, reason: str):
        super().__init__(path)
        self.path = path
        self.reason = reason


def _version(facts: Facts) -> Version:
    text = facts.value("release.judged") or facts.value("vllm.version")
    if not text:
        raise SpecMissing(
            "vllm.version",
            facts.why_missing("vllm.version")
            or "the drafting slots and the batch defaults depend on the release",
        )
    try:
        return Version(str(text))
    except InvalidVersion as err:
        raise SpecMissing("vllm.version", f"'{text}' is not a version") from err


def _spec_config(facts: Facts) -> dict[str, Any]:
    spec = facts.value("serve.speculative_config")
    if not isinstance(spec, dict):
        raise SpecMissing(
            "serve.speculative_config",
            facts.why_missing("serve.speculative_config") or "no speculative configuration",
        )
    return spec


def drafting_slots(facts: Facts) -> tuple[int, str]:
    """The slots each request adds while drafting, as the judged release counts them."""
    spec = _spec_config(facts)
    tokens = spec.get("num_speculative_tokens")
    if not isinstance(tokens, int) or isinstance(tokens, bool):
        raise SpecMissing(
            "serve.num_speculative_tokens", "the speculative configuration gives no count"
        )
    version = _version(facts)
    method = str(spec.get("method") or "")
    if not method and spec.get("parallel_drafting") is not True:
        # vLLM picks the method from the draft model's name; only a draft model adds a slot
        raise SpecMissing(
            "serve.speculative_method",
            "no method in the speculative configuration (vLLM infers it from the draft model)",
        )
    first = _PARALLEL_METHODS.get(method)
    parallel = spec.get("parallel_drafting") is True or (first is not None and version >= first)
    draft_model = method == "draft_model"
    if method in ("dflash", "dspark") and version >= _SEPARATE_PASS:
        slots, how = 0, "DFlash and DSpark draft in a separate pass: none"
    elif method == "dflash" and version >= _DFLASH_K_SLOTS:
        slots, how = tokens, "DFlash: K"
    elif parallel and draft_model:
        slots, how = tokens, "parallel drafting with a draft model: K"
    elif parallel:
        slots, how = tokens - 1, "parallel drafting: K − 1"
    elif draft_model:
        slots, how = 1, "a draft model: 1"
    else:
        slots, how = 0, f"method {method or '?'}: none"
    return slots, (
        f"{slots} per request (method {method or '-'}, num_speculative_tokens K = {tokens}; "
        f"{how} in vLLM {version})"
    )


def _tier_defaults(facts: Facts, version: Version) -> tuple[int, int, str]:
    """(max_num_batched_tokens, max_num_seqs, how) `vllm serve` fills in on this GPU; every
    memory size an inferred GPU leaves possible must give the same tier."""
    from vllm_doctor.memory.formula import batch_defaults, formula_for
    from vllm_doctor.memory.inputs import Missing, usable_gib

    names = [str(n) for n in facts.value("gpu.names") or []]
    if not names:
        raise SpecMissing("gpu.names", facts.why_missing("gpu.names") or "no GPU known")
    formula = formula_for(str(version))
    total = facts.get("gpu.memory_total_mib")
    sizes: list[int | None] = [None]
    if total is not None and total.inferred and isinstance(total.possible, list):
        sizes = [int(s) for s in total.possible]
    tiers = set()
    for size in sizes:
        try:
            usable, _ = usable_gib(facts, size)
        except Missing:
            usable = 0.0  # only GB10 reaches the tier without its size (by name)
            if not any(re.search(r"\bGB10\b", n) for n in names):
                raise SpecMissing(
                    "gpu.memory_total_mib",
                    facts.why_missing("gpu.memory_total_mib")
                    or "the GPU's memory decides vLLM's default batch sizes",
                ) from None
        tiers.add(batch_defaults(usable, names, formula))
    if len(tiers) != 1:
        raise SpecMissing(
            "gpu.memory_total_mib",
            f"the sizes {names[0]} comes in give different default batch sizes {sorted(tiers)}",
        )
    batched, seqs = tiers.pop()
    return batched, seqs, f"vLLM {version}'s defaults for `vllm serve` on {names[0]}"


def _given(facts: Facts, path: str) -> int | None:
    """A batch size the serve line gives; None where it gives none (vLLM's default applies). A
    value the serve line names but the doctor could not read (an unset variable) is missing."""
    reason = facts.why_missing(path)
    if reason:
        raise SpecMissing(path, reason)
    fact = facts.get(path)
    if fact is None or fact.value is None or fact.source == Source.DEFAULT:
        return None
    return int(fact.value)


def scheduled_tokens(facts: Facts) -> tuple[int, str]:
    """max_num_batched_tokens − slots × max_num_seqs, as vLLM computes it at config build."""
    slots, slots_how = drafting_slots(facts)
    version = _version(facts)
    batched = given_batched = _given(facts, "serve.max_num_batched_tokens")
    seqs = given_seqs = _given(facts, "serve.max_num_seqs")
    how = []
    if batched is None or seqs is None:
        unmodelled = []
        for path in ("serve.data_parallel_size", "serve.enable_chunked_prefill"):
            reason = facts.why_missing(path)
            if reason:
                raise SpecMissing(path, reason)
        if int(facts.value("serve.data_parallel_size") or 1) > 1:
            unmodelled.append("data parallelism (batched data-parallel MoE has its own default)")
        if "performance-mode" in (facts.value("serve.flags") or []):
            unmodelled.append("--performance-mode")
        if facts.value("serve.enable_chunked_prefill") is False:
            unmodelled.append("chunked prefill turned off (the batch grows to max_model_len)")
        if unmodelled:
            raise SpecMissing(
                "serve.max_num_batched_tokens",
                "the default batch sizes under " + ", ".join(unmodelled) + " are not modelled: "
                "pass --max-num-batched-tokens and --max-num-seqs",
            )
        default_batched, default_seqs, where = _tier_defaults(facts, version)
        if batched is None:
            batched = default_batched
            how.append(f"max_num_batched_tokens {batched} ({where})")
        if seqs is None:
            # EngineArgs: a default max_num_seqs never exceeds max_num_batched_tokens
            seqs = min(default_seqs, batched)
            how.append(f"max_num_seqs {seqs} ({where})")
    if given_batched:
        how.insert(0, f"--max-num-batched-tokens {batched}")
    if given_seqs:
        how.insert(0, f"--max-num-seqs {seqs}")
    left = batched - slots * seqs
    return left, (
        f"{batched} − {slots} × {seqs} = {left}: " + "; ".join(how) + f"; slots {slots_how}"
    )
