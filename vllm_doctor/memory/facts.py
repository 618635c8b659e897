"""The ``memory.*`` facts, set from the estimate (memory/estimate.py) or marked missing with
the input each lacks (``compute_memory``).

A GPU memory inferred from a name may be several sizes: a verdict stands only where every size
gives it. A weights or KV figure resting on an assumption decides no verdict. Where the whole
estimate cannot be made, the figures that need neither the GPU's memory nor the context length
(the weights per GPU, the KV layers and bytes per token) are still set. Memory arguments the
judged release refuses are bad input.
"""

from __future__ import annotations

from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.memory import kv as kvmod
from vllm_doctor.memory.estimate import Estimate, estimate
from vllm_doctor.memory.formula import GIB, batch_defaults, formula_for
from vllm_doctor.memory.inputs import (
    Missing,
    argv_value,
    int_fact,
    kv_layout,
    model_dtype,
    need,
    prefix_caching,
    read_config,
    text_config_with_facts,
    usable_gib,
    weights_estimate,
)

MEMORY_PATHS = (
    "memory.usable_gib",
    "memory.weights_gib",
    "memory.activation_peak_gib",
    "memory.non_torch_gib",
    "memory.cuda_graph_gib",
    "memory.kv_cache_gib",
    "memory.kv_cache_tokens",
    "memory.max_concurrency",
    "memory.kv_bytes_per_token",
    "memory.kv_layers",
    "memory.margin_gib",
    "memory.kv_verdict",
    "memory.kv_room",
    "memory.kv_budget_room",
    "memory.estimate_line",
)


# a hybrid (Mamba / linear-attention) model only: absent for every other model
MAMBA_PATHS = ("memory.mamba_cache_blocks", "memory.max_num_seqs", "memory.mamba_blocks_verdict")
# a hybrid model's scheduling figures: they need neither the weights nor the context length
# (the default token budget needs the GPU's tier), so they stand where the estimate cannot
SCHEDULING_PATHS = (
    "memory.attention_block_size",
    "memory.mamba_cache_mode",
    "memory.max_num_batched_tokens",
)
# the verdicts rules decide on; a weights figure resting on an assumption decides none of them
VERDICT_PATHS = (
    "memory.kv_verdict",
    "memory.kv_room",
    "memory.kv_budget_room",
    "memory.mamba_blocks_verdict",
)
# a weights figure resting on an assumption: why the verdicts are undecided, and the way out
DOUBT_PREFIX = "the weights figure rests on an assumption, so it decides nothing: "
DOUBT_HINT = (
    "Give the checkpoint's size (its model.safetensors.index.json beside config.json, or the "
    "Hub) or a config.json that states it"
)


def _decide_over_possible_sizes(
    facts: Facts, result: Estimate, cal: dict[str, Any] | None = None
) -> None:
    """A GPU memory inferred from a name may be several sizes (8 or 16 GiB): the figures are
    the smallest's, and a verdict stands only where every size gives it."""
    total = facts.get("gpu.memory_total_mib")
    if total is None or not total.inferred or not isinstance(total.possible, list):
        return
    others = [
        estimate(facts, int(size), cal) for size in total.possible if int(size) != int(total.value)
    ]
    for path in ("memory.kv_verdict", "memory.kv_room", "memory.mamba_blocks_verdict"):
        seen = {result.values.get(path)} | {o.values.get(path) for o in others}
        if len(seen) > 1:
            result.values.pop(path, None)
            result.how[path] = (
                f"the GPU's memory decides ({total.detail}): "
                f"{' or '.join(sorted(str(v) for v in seen))}"
            )
    sizes = " or ".join(f"{int(s) // 1024} GiB" for s in total.possible)
    # the one line shows every size where they differ, not only the smallest's figures
    lines = [result.values.get("memory.estimate_line")] + [
        o.values.get("memory.estimate_line") for o in others
    ]
    if all(lines) and len(set(lines)) > 1:
        result.values["memory.estimate_line"] = "; ".join(
            f"with {int(size) // 1024} GiB: {line}"
            for size, line in zip(
                [total.value] + [s for s in total.possible if int(s) != int(total.value)],
                lines,
                strict=True,
            )
        )
    for path in result.how:
        if path in result.values:
            result.how[path] += f"; for the smallest of {sizes} ({total.detail})"


def _partial_figures(facts: Facts) -> None:
    """The figures that need neither the GPU's memory size nor the context length (the
    weights per GPU, the KV layers and their bytes per token), where the whole estimate could
    not be made."""
    cfg, raw_text = read_config(facts)
    text = text_config_with_facts(facts, raw_text)
    tp = int_fact(facts, "serve.tensor_parallel_size", 1)
    pp = int_fact(facts, "serve.pipeline_parallel_size", 1)
    dtype, _ = model_dtype(facts)
    version = facts.value("release.judged") or facts.value("vllm.version")
    release = str(version) if version else None
    try:
        weights = weights_estimate(
            facts, cfg, text, tp, pp, float(kvmod.DTYPE_BYTES.get(dtype, 2)), release
        )
    except (Missing, ValueError, TypeError, KeyError):
        pass
    else:
        facts.missing.pop("memory.weights_gib", None)
        facts.set(
            "memory.weights_gib",
            round(weights.bytes_per_gpu / GIB, 2),
            Source.DERIVED,
            (
                f"assuming {'; '.join(weights.assumptions)}: {weights.how}"
                if weights.assumptions
                else weights.how
            ),
        )
    try:
        layers = int(need(facts, "model.num_hidden_layers"))
        layout, layers_how = kv_layout(facts, text, layers, tp, pp, release)
    except (Missing, ValueError, TypeError, KeyError):
        return
    if not any(layer.kind == kvmod.MAMBA for layer in layout.layers):
        for path in MAMBA_PATHS:  # not a hybrid model: it has no Mamba cache to size
            facts.missing.pop(path, None)
    for path, value, how in (
        ("memory.kv_layers", layout.describe(), layers_how),
        (
            "memory.kv_bytes_per_token",
            layout.bytes_per_token(),
            f"per GPU, attention layers summed ({layout.describe()})",
        ),
    ):
        facts.missing.pop(path, None)
        facts.set(path, value, Source.DERIVED, how)


def check_memory_arguments(facts: Facts) -> None:
    """Refuse, as bad input, the memory arguments the judged release refuses before it
    starts: ``--gpu-memory-utilization`` above 1 (every release: ``CacheConfig._verify_args``
    up to 0.11.0, then ``Field(gt=0, le=1)``) or at most 0 (from 0.11.1; before, vLLM starts
    and finds no memory for the KV cache, which MEM003 says)."""
    fact = facts.get("serve.gpu_memory_utilization")
    if fact is None or fact.source == Source.DEFAULT or not isinstance(fact.value, (int, float)):
        return
    value = float(fact.value)
    release = facts.value("release.judged") or facts.value("vllm.version")
    try:
        since_gt0 = Version(str(release).split("+")[0]) >= Version("0.11.1") if release else True
    except InvalidVersion:
        since_gt0 = True
    if value > 1 or (value <= 0 and since_gt0) or value != value:
        from vllm_doctor.errors import InputError

        shown = f"vLLM {release}" if release else "vLLM (every release from 0.11.1)"
        raise InputError(
            f"--gpu-memory-utilization {fact.value:g}",
            f"{shown} refuses it: the share of GPU memory must be in (0, 1] "
            "(CacheConfig.gpu_memory_utilization)",
        )


def _put_scheduling(facts: Facts) -> None:
    """A hybrid model's attention block size (raised so one attention page holds a Mamba
    state: "Setting attention block size to N tokens"), the mamba_cache_mode the judged
    release resolves, and the max_num_batched_tokens the scheduler gets; absent for a model
    without Mamba / linear-attention layers."""
    for path in SCHEDULING_PATHS:
        facts.values.pop(path, None)
        facts.missing.pop(path, None)
    version = facts.value("release.judged") or facts.value("vllm.version")
    release = str(version) if version else None
    formula = formula_for(release)
    _, raw_text = read_config(facts)
    text = text_config_with_facts(facts, raw_text)
    try:
        layers = int(need(facts, "model.num_hidden_layers"))
        layout, layers_how = kv_layout(
            facts,
            text,
            layers,
            int_fact(facts, "serve.tensor_parallel_size", 1),
            int_fact(facts, "serve.pipeline_parallel_size", 1),
            release,
        )
    except Missing as miss:
        for path in SCHEDULING_PATHS:
            facts.mark_missing(path, f"needs {miss.path}: {miss.reason}")
        return
    except (ValueError, TypeError, KeyError) as err:
        for path in SCHEDULING_PATHS:
            facts.mark_missing(path, f"could not be estimated: {err}")
        return
    if not any(layer.kind == kvmod.MAMBA for layer in layout.layers):
        return  # not a hybrid model
    requested = argv_value(facts, "--block-size")
    block, page = kvmod.block_size_for(
        layout, int(requested) if requested and requested.isdigit() else None
    )
    facts.set(
        "memory.attention_block_size",
        block,
        Source.DERIVED,
        f"one attention page ({page} B per layer) holds the largest Mamba state, in the "
        f"kernel's alignment steps ({layers_how})",
    )
    given = facts.value("serve.mamba_cache_mode")
    mode = formula.mamba.cache_mode(
        model_type=str(text.get("model_type") or ""),
        prefix_caching=prefix_caching(facts),
        spec_tokens=int_fact(facts, "serve.num_speculative_tokens", 0),
    )
    if isinstance(given, str) and given:
        facts.set("memory.mamba_cache_mode", given.lower(), Source.SERVE, "--mamba-cache-mode")
    elif mode is None:
        facts.mark_missing(
            "memory.mamba_cache_mode",
            f"vLLM {formula.mamba.release} has no mamba_cache_mode (added in 0.15.0)",
        )
    else:
        caching = prefix_caching(facts)
        facts.set(
            "memory.mamba_cache_mode",
            mode,
            Source.DERIVED,
            f"vLLM {formula.mamba.release} for model_type {text.get('model_type')}, prefix "
            + (
                "caching " + ("on" if caching else "off") + " (serve line)"
                if caching is not None
                else "caching "
                + ("on" if formula.mamba.hybrid_prefix_caching_default else "off")
                + " (the release's default for a hybrid model)"
            ),
        )
    given_tokens = facts.get("serve.max_num_batched_tokens")
    if (
        given_tokens is not None
        and given_tokens.source != Source.DEFAULT
        and isinstance(given_tokens.value, int)
        and given_tokens.value > 0
    ):
        facts.set(
            "memory.max_num_batched_tokens",
            given_tokens.value,
            Source.SERVE,
            "--max-num-batched-tokens",
        )
        return
    if facts.value("serve.enable_chunked_prefill") is False:
        facts.mark_missing(
            "memory.max_num_batched_tokens",
            "chunked prefill is off: vLLM sizes the token budget to max_model_len",
        )
        return
    try:
        usable, usable_how = usable_gib(facts)
    except Missing as miss:
        facts.mark_missing(
            "memory.max_num_batched_tokens",
            f"vLLM's default depends on the GPU: needs {miss.path}: {miss.reason}",
        )
        return
    names = [str(n) for n in facts.value("gpu.names") or []]
    batched, _ = batch_defaults(usable, names, formula)
    facts.set(
        "memory.max_num_batched_tokens",
        batched,
        Source.DERIVED,
        f"vLLM {formula.mamba.release}'s default for `vllm serve` on this GPU "
        f"({usable:.0f} GiB: {usable_how})",
    )


def compute_memory(facts: Facts, cal: dict[str, Any] | None = None) -> None:
    """Set every memory.* fact, or mark each missing with the input it lacks. InputError for
    memory arguments the judged release refuses."""
    for path in (*MEMORY_PATHS, *MAMBA_PATHS):
        facts.values.pop(path, None)
        facts.missing.pop(path, None)
    check_memory_arguments(facts)
    _put_scheduling(facts)
    try:
        result = estimate(facts, cal=cal)
        _decide_over_possible_sizes(facts, result, cal)
    except Missing as miss:
        for path in (*MEMORY_PATHS, *MAMBA_PATHS):
            facts.mark_missing(path, f"needs {miss.path}: {miss.reason}")
        # the weights and the KV bytes per token need neither the GPU nor the context length
        _partial_figures(facts)
        return
    except (ValueError, TypeError, KeyError, ZeroDivisionError, OverflowError) as err:
        for path in MEMORY_PATHS:
            facts.mark_missing(path, f"could not be estimated: {err}")
        return
    unknown, doubt = result.weights_unknown, result.weights_doubt
    if result.kv_doubt:  # no verdict holds whatever the KV layout is
        for path in VERDICT_PATHS:
            if path in result.values:
                result.values.pop(path)
                result.how[path] = f"{DOUBT_PREFIX.replace('weights', 'KV')}{result.kv_doubt}"
        doubt = "; ".join(d for d in (doubt, result.kv_doubt) if d)
    hybrid = [p for p in MAMBA_PATHS if p in result.values or p in result.how]
    for path in (*MEMORY_PATHS, *hybrid):
        bound_holds = (
            path in VERDICT_PATHS
            and path in result.values
            and result.bound.get(path, result.values.get(path)) in ("does-not-fit", "none")
        )
        if unknown is not None and not bound_holds:
            facts.mark_missing(path, f"needs {unknown.path}: {unknown.reason}")
        elif doubt is not None and path in VERDICT_PATHS and path in result.values:
            if bound_holds:  # holds with no weights at all
                facts.set(
                    path,
                    result.bound[path],
                    Source.DERIVED,
                    f"even with no weights (their figure rests on an assumption: {doubt})",
                )
            else:
                facts.mark_missing(path, f"{DOUBT_PREFIX}{doubt}. {DOUBT_HINT}")
        elif path not in result.values and path in result.how:
            facts.mark_missing(path, result.how[path])
        elif path in result.values:
            how = result.how[path]
            value = result.values[path]
            if unknown is not None:
                how = f"even with no weights (their size is unknown): {how}"
            elif doubt is not None:
                how = f"assuming {doubt}: {how}"
                if path == "memory.estimate_line":
                    value = f"{value} (rests on assumed values: decides nothing)"
            facts.set(path, value, Source.DERIVED, how)
        else:
            facts.mark_missing(path, "not estimated")
