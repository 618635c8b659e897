"""Workarounds as commands to copy: each applicable workaround applied to the serve line, with
the values it leaves to the doctor computed for these facts, and every command re-judged.

A workaround edits the serve line (``serve: set / remove``) or names options whose value the
doctor computes (``serve: compute: [max-model-len]``, ``COMPUTABLE_OPTIONS`` in
engine/rule.py):

* ``max-model-len``: the largest length that the model supports and the estimated KV cache
  holds (memory/estimate.py), rounded as people write it (32768, 24576: 2^k and 1.5 × 2^k);
* ``tensor-parallel-size``: a size that divides the attention heads (and meets the KV heads),
  fits the GPUs with the pipeline stages, nearest the one given (larger first);
* ``kv-cache-dtype``: the first FP8 KV-cache dtype the judged release accepts and an attention
  backend runs on this GPU.

Each candidate is judged with the rules before it is printed (the command with that value
must draw no error, and for a length the estimate must say the request fits); the first that
passes is the one handed over. Where none does, the command is withheld and the title says why.
A workaround's title may name facts as ``{release.torch_pin}`` (``{path|words}`` with words
for a fact that is not known): the values are printed, never the placeholder.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from vllm_doctor.engine.rule import fill_placeholders as fill
from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Source

if TYPE_CHECKING:
    from vllm_doctor.facts.model import Facts
    from vllm_doctor.report.document import CheckDocument
    from vllm_doctor.serveline.line import ServeLine

SHORTEST_LENGTH = 1024  # below this a "fitting" context is no use for serving
MAX_CANDIDATES = 8  # judged per computed option: each is a full re-judgement


class Judge:
    """Judges commands with these facts and rules; each command once."""

    def __init__(self, facts: Facts, rules: Any):
        self.facts = facts
        self.rules = rules
        self._seen: dict[str, tuple[list[str], Facts | None]] = {}

    def __call__(self, command: str) -> tuple[list[str], Facts | None]:
        """The error rules the command would still draw, and its facts (None: bad input)."""
        if command not in self._seen:
            from vllm_doctor.engine.evaluate import APPLIES, evaluate_rules
            from vllm_doctor.facts.collect import with_serve_line

            try:
                other = with_serve_line(self.facts, shlex.split(command))
            except (InputError, ValueError) as err:
                self._seen[command] = ([f"bad input ({err})"], None)
            else:
                failing = sorted(
                    {
                        f.rule.code
                        for f in evaluate_rules(self.rules, other)
                        if f.verdict == APPLIES and f.severity == "error"
                    }
                )
                self._seen[command] = (failing, other)
        return self._seen[command]


# -- the computed values ----------------------------------------------------------------


def _round_lengths(limit: int) -> list[int]:
    """The lengths people write up to ``limit``, longest first: 2^k and 1.5 × 2^k."""
    found = []
    power = SHORTEST_LENGTH
    while power <= limit:
        found.append(power)
        if power * 3 // 2 <= limit:
            found.append(power * 3 // 2)
        power *= 2
    return sorted(set(found), reverse=True)


def max_model_len_candidates(facts: Facts) -> tuple[list[int], str]:
    """The lengths to try, longest first, and what bounds them."""
    from vllm_doctor.facts.model_config import model_max_len

    bounds = []
    model = model_max_len(facts)
    if model is not None:
        bounds.append((model[0], f"the model's {model[0]} ({model[1]})"))
    tokens = facts.value("memory.kv_cache_tokens")
    if isinstance(tokens, int) and tokens > 0:
        bounds.append((tokens, f"about {tokens:,} tokens of KV cache (the memory estimate)"))
    if not bounds:
        return [], "neither the model's context length nor the KV cache is known"
    limit, why = min(bounds)
    candidates = _round_lengths(limit)
    if model is not None and model[0] <= limit and model[0] not in candidates:
        candidates.insert(0, model[0])  # the model's own limit, as its card writes it
    return candidates, why


def tensor_parallel_candidates(facts: Facts) -> tuple[list[int], str]:
    """Sizes that divide the heads and fit the GPUs, nearest the given size (larger first)."""
    count = facts.value("gpu.count")
    if not isinstance(count, int) or count < 1:
        return [], "how many GPUs the target has is not known (--gpus N)"
    current = int(facts.value("serve.tensor_parallel_size") or 1)
    stages = int(facts.value("serve.pipeline_parallel_size") or 1)
    heads = facts.value("model.num_attention_heads")
    kv_heads = facts.value("model.num_key_value_heads")
    sizes = []
    for size in range(1, count // max(stages, 1) + 1):
        if size == current:
            continue
        if isinstance(heads, int):
            if heads % size:
                continue
            if isinstance(kv_heads, int) and kv_heads % size and size % kv_heads:
                continue
        elif size & (size - 1):  # heads unknown: the powers of two people use
            continue
        sizes.append(size)
    sizes.sort(key=lambda size: (size < current, abs(size - current)))
    where = f"{count} GPU{'s' * (count != 1)}" + (f" over {stages} stages" if stages > 1 else "")
    heads_words = f", {heads} attention heads" if isinstance(heads, int) else ""
    return sizes, f"{where}{heads_words}"


def kv_cache_dtype_candidates(facts: Facts) -> tuple[list[str], str]:
    """The FP8 KV-cache dtypes, the plain spelling first; the rules (ARGS101, ATTN100,
    ATTN001) refuse those the release or the GPU's backends do not take."""
    return ["fp8", "fp8_e4m3", "fp8_e5m2"], "the FP8 KV-cache dtypes"


COMPUTERS: dict[str, Callable[[Facts], tuple[list[Any], str]]] = {
    "max-model-len": max_model_len_candidates,
    "tensor-parallel-size": tensor_parallel_candidates,
    "kv-cache-dtype": kv_cache_dtype_candidates,
}


def _accepts(option: str, value: Any, failing: list[str], facts: Facts | None) -> bool:
    """A value passes when its command draws no error; a length whose request fits only
    within the estimate's margin passes too (MEM001 is then a warning: vLLM's own figure
    decides), and the title says so."""
    return not failing and facts is not None


def computed_command(
    line: ServeLine, workaround: Any, facts: Facts, judge: Judge, render: Callable[..., str]
) -> tuple[str | None, str | None]:
    """(command, note) with the computed values (the note says what to know about them, or
    is None), or (None, why no command is handed over)."""
    options = list(workaround.serve_compute)
    changes = dict(workaround.serve_set)

    def attempts(index: int) -> Iterator[dict[str, Any]]:
        if index == len(options):
            yield {}
            return
        option = options[index]
        values, _why = COMPUTERS[option](facts)
        for value in values[:MAX_CANDIDATES]:
            for rest in attempts(index + 1):
                yield {option: value, **rest}

    first_failing: tuple[dict[str, Any], list[str]] | None = None
    for tried, values in enumerate(attempts(0), 1):
        command = render(line, {**changes, **values}, workaround.serve_remove)
        failing, other = judge(command)
        if all(_accepts(o, v, failing, other) for o, v in values.items()):
            tight = other is not None and other.value("memory.kv_verdict") == "tight"
            return command, (
                "the request fits within the estimate's margin: vLLM's own figure decides"
                if tight and "max-model-len" in values
                else None
            )
        first_failing = first_failing or (values, failing)
        if tried >= MAX_CANDIDATES:
            break
    if first_failing is not None:
        values, failing = first_failing
        given = " ".join(f"--{o} {v}" for o, v in values.items())
        return None, (
            f"the edited command is not shown: with {given} it would still draw "
            f"{', '.join(failing) or 'an error'}"
        )
    reasons = [COMPUTERS[option](facts)[1] for option in options]
    return None, "no value to hand over: " + "; ".join(
        f"--{option} for {why}" for option, why in zip(options, reasons, strict=True)
    )


# -- the suggestions of a document ------------------------------------------------------


def _serve_line(facts: Facts) -> ServeLine | None:
    argv = facts.value("serve.argv")
    if not argv:
        return None
    try:
        from vllm_doctor.serveline.parser import parse_serve_argv

        return parse_serve_argv(list(argv))
    except (ImportError, InputError):
        return None


def suggest(doc: CheckDocument, facts: Facts, rules: Any) -> None:
    """Turn each applicable workaround into a ready-to-copy command, verified with the rules:
    a command that would itself draw an error on this machine (``--tensor-parallel-size 2``
    kept for a one-GPU report) is withheld, and the title says which rules it would still
    draw; a corrected command in the evidence is marked the same way."""
    from vllm_doctor.redact import shell_words
    from vllm_doctor.report.document import FixSuggestion
    from vllm_doctor.serveline.render import render_command

    line = _serve_line(facts)
    judge = Judge(facts, rules)
    for finding in doc.applies:
        out = []
        # the facts its titles name: with the version unknown, those of the newest release
        # the finding applies in (engine/over_releases.py)
        named = _release_facts(facts, finding.facts_release)
        for w in finding.rule.workarounds:
            title = fill(w.title, named)
            command = None
            if w.edits_serve_line and line is not None:
                # `KEY=VALUE vllm serve ...`: keep the variables the user put before the
                # command, less those the workaround unsets or sets itself
                prefix = [
                    f"{path[4:]}={fact.value}"
                    for path, fact in facts.area("env")
                    if fact.source == Source.SERVE
                    and path[4:] not in w.env_unset
                    and path[4:] not in w.env_set
                ]

                def render(
                    line: ServeLine, changes: Any, remove: Any, prefix: list[str] = prefix
                ) -> str:
                    command = render_command(line, changes=changes, remove=remove)
                    # a secret's value is a "$NAME" placeholder, never '<redacted>'
                    return f"{shell_words(prefix)} {command}" if prefix else command

                if w.serve_compute:
                    command, note = computed_command(line, w, facts, judge, render)
                    if note:
                        title += f" ({note})"
                else:
                    command = render(line, w.serve_set, w.serve_remove)
            env = [f"export {k}={v}" for k, v in w.env_set.items()] + [
                f"unset {k}" for k in w.env_unset
            ]
            out.append(FixSuggestion(finding.rule.code, title, command, env, fill(w.cost, named)))
        if out:
            doc.suggestions[finding.rule.code] = out
    _verify(doc, judge)


def _release_facts(facts: Facts, release: str | None) -> Facts:
    if release is None:
        return facts
    from vllm_doctor.engine.over_releases import facts_for_release

    return facts_for_release(facts, release)


def _verify(doc: CheckDocument, judge: Judge) -> None:
    for suggestions in doc.suggestions.values():
        for suggestion in suggestions:
            failing = judge(suggestion.command)[0] if suggestion.command else []
            if failing:
                suggestion.title += (
                    " (the edited command is not shown: with these facts it "
                    f"would still draw {', '.join(failing)})"
                )
                suggestion.command = None
    for finding in doc.applies:
        for evidence in finding.evidence:
            if evidence.path == "release.corrected_command" and isinstance(evidence.value, str):
                failing = judge(evidence.value)[0]
                if failing:
                    evidence.value += (
                        f"  (not ready to run: with these facts it would still "
                        f"draw {', '.join(failing)})"
                    )
