"""vLLM's start-up memory figures, estimated per release (the ``memory.*`` facts' figures).

What vLLM does (``determine_available_memory`` in ``vllm/v1/worker/gpu_worker.py``, read in the
0.10.0–0.33.0 wheels):

    requested = total GPU memory × gpu_memory_utilization
    KV cache  = requested − weights − activation peak − non-torch memory
                − CUDA-graph estimate (from 0.20.0)

* ``total`` is what ``torch.cuda.mem_get_info`` reports (``memory.usable_gib``): less than
  nvidia-smi's total by what the driver keeps (knowledge/data/gpu_usable_memory.json);
* ``weights`` is "Model loading took X GiB" (memory/weights.py);
* the activation peak (the profile run over ``max_num_batched_tokens`` tokens and the sampler
  over ``max_num_seqs`` rows; for a multimodal model plus the dummy encoder outputs the profile
  holds meanwhile, derived in memory/multimodal.py), non-torch memory (CUDA context, NCCL and custom all-reduce
  buffers, which grow with TP) and the CUDA-graph pool are calibrated on real start-up logs
  (knowledge/data/memory_calibration.json, fitted by tools/calibrate_memory.py);
* the CUDA-graph estimate is subtracted when ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` is
  on: opt-in (default "0") in 0.18.0–0.19.1, on (default "1") from 0.20.0 (vllm/envs.py; the
  log line says "default since v0.21.0"), absent before 0.18.0; never with --enforce-eager,
  nor on the V2 model runner before 0.29.0 (memory/profile.py: which runner and which sampler
  path the release's profile run takes);
* ``--kv-cache-memory-bytes`` replaces the whole computation (from 0.11.0).

Then memory/kv.py turns the KV bytes into blocks, tokens and concurrency as the release does.
Defaults the release fills in (``EngineArgs.get_batch_defaults``): ``vllm serve`` runs with
max_num_batched_tokens 8192 / max_num_seqs 1024 on GPUs of ≥ 70 GiB other than the A100,
16384 / 1024 on ≥ 160 GiB from 0.28.0, else (and on GB10 in every release) 2048 / 256.

This module puts the figures together (``estimate``); memory/facts.py writes the ``memory.*``
facts from them (``compute_memory``); the release's formula and calibrated terms are
memory/formula.py's, what the estimate reads of the facts memory/inputs.py's, and the report's
words for it memory/summary.py's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.memory import kv as kvmod
from vllm_doctor.memory import profile as profmod
from vllm_doctor.memory import weights as wmod
from vllm_doctor.memory.formula import (
    GIB,
    ReleaseFormula,
    batch_defaults,
    calibrated_terms,
    calibration,
    formula_for,
    margin_gib,
)
from vllm_doctor.memory.inputs import (
    Missing,
    activation_width,
    argv_value,
    encoder_profile,
    flashinfer_installed,
    int_fact,
    kv_assumptions,
    kv_layout,
    max_model_len_of,
    model_dtype,
    model_traits,
    need,
    prefix_caching,
    read_config,
    text_config_with_facts,
    usable_gib,
    weights_estimate,
)

DEFAULT_UTILIZATIONS = profmod.DEFAULT_UTILIZATIONS  # up to 0.19.1, from 0.20.0


def kv_budget(facts: Facts) -> tuple[str | None, int | None]:
    """``--kv-cache-memory-bytes`` as written and in bytes, as vLLM's ``human_readable_int``
    reads it (``200G`` = 200 GiB, ``200g`` = 200 GB); (None, None) when not given."""
    from vllm_doctor.serveline.values import human_readable_int

    budget = argv_value(facts, "--kv-cache-memory-bytes", "--kv-cache-memory")
    if budget is None:
        return None, None
    try:
        value = human_readable_int(budget)
    except (ValueError, OverflowError):
        value = None
    if value == 0:  # `if kv_cache_memory_bytes := ...` in gpu_worker: 0 profiles as unset
        return None, None
    if value is None or value < 0:
        from vllm_doctor.errors import InputError

        raise InputError(
            f"--kv-cache-memory-bytes {budget}", "not a size in bytes (like 8G, 8000000000)"
        )
    return budget, value


def _put_budget_room(
    out: Estimate,
    usable: float,
    uhow: str,
    kv_gib: float,
    held: float,
    weights_gib: float,
    margin: float,
) -> None:
    """memory.kv_budget_room: with --kv-cache-memory-bytes vLLM reserves that KV cache
    whatever else the GPU holds (gpu_worker.determine_available_memory skips the
    utilization budget), so the weights, the profile's peak, non-torch memory, the CUDA graphs
    and the KV cache together must fit in the GPU's memory, or an allocation runs out
    (vllm#56698)."""
    left = usable - held - kv_gib

    def room(gib: float) -> str:
        return "none" if gib + margin <= 0 else "tight" if gib - margin <= 0 else "room"

    out.put(
        "memory.kv_budget_room",
        room(left),
        f"{usable:.2f} GiB total ({uhow}) − KV cache {kv_gib:.2f} (--kv-cache-memory-bytes) "
        f"− weights {weights_gib:.2f} − profile, non-torch and CUDA graphs "
        f"{held - weights_gib:.2f} GiB = {left:.2f} ± {margin:.2f} GiB",
    )
    out.bound["memory.kv_budget_room"] = room(left + weights_gib)
    out.inputs["budget_left_gib"] = left


@dataclass
class Estimate:
    """Every figure of one estimate with its evidence (``how``)."""

    values: dict[str, Any] = field(default_factory=dict)
    how: dict[str, str] = field(default_factory=dict)
    # the weights' size was not known: the figures are upper bounds, only a "does not fit"
    # holds whatever the weights weigh
    weights_unknown: Missing | None = None
    # the weights' figure rests on a value config.json does not state, or disagrees with the
    # size the model's name states: the figures are shown with it, and only what holds with
    # no weights at all decides (the verdicts with zero weights below)
    weights_doubt: str | None = None
    # the KV layout rests on a value config.json does not state (the KV heads or head size):
    # the figures are shown with it, and no verdict decides (not even with no weights)
    kv_doubt: str | None = None
    bound: dict[str, Any] = field(default_factory=dict)  # verdicts with zero weights
    # what the calibration fits on (tools/calibrate_memory.py): the terms' inputs
    inputs: dict[str, Any] = field(default_factory=dict)

    def put(self, path: str, value: Any, how: str) -> None:
        self.values[path] = value
        self.how[path] = how


@dataclass
class _Deployment:
    """What one estimate is computed from, read once from the facts (memory/inputs.py)."""

    formula: ReleaseFormula
    cfg: dict[str, Any]
    raw_text: dict[str, Any]  # the text config as config.json states it
    text: dict[str, Any]  # the same with the values the collectors set from the facts
    release: str | None
    tp: int
    pp: int
    utilization: float
    usable: float  # GiB the GPU reports (memory.usable_gib)
    usable_how: str
    dtype_bytes: float
    # the model's and the batch's sizes (read after the weights, as vLLM does)
    layers: int = 0
    hidden: int = 0
    vocab: int = 0
    intermediate: int = 0
    gpu_names: list[str] = field(default_factory=list)
    batched: int = 0
    seqs: int = 0
    seqs_default: int = 0  # vLLM's --max-num-seqs on this GPU
    eager: bool = False
    layers_gpu: int = 0


def estimate(
    facts: Facts, nominal_mib: int | None = None, cal: dict[str, Any] | None = None
) -> Estimate:
    """Every memory figure of this deployment, or Missing naming the first input it lacks
    (``cal``: another calibration than the shipped one). The steps follow vLLM's
    ``determine_available_memory``: the GPU's memory, the weights, the profile run's terms,
    the KV cache left, its layout and capacity, and the verdict on one request."""
    out = Estimate()
    run = _read_deployment(facts, nominal_mib, out)
    weights_gib = _put_weights(out, facts, run)
    _read_sizes(facts, run)
    terms, graph_on = _put_profile_terms(out, facts, run, cal)
    kv = _put_kv_cache(out, facts, run, terms, graph_on, weights_gib)
    layout = _put_layout(out, facts, run)
    if layout.encoder_only:  # no KV cache: nothing to run out of
        why = "; ".join(layout.how)
        out.put("memory.kv_verdict", "fits", why)
        out.put("memory.kv_room", "room", why)
        for path in (
            "memory.kv_cache_tokens",
            "memory.max_concurrency",
            "memory.margin_gib",
            "memory.estimate_line",
        ):
            out.how[path] = why  # missing, with this reason
        return out
    out.kv_doubt = kv_assumptions(facts, run.raw_text)
    cap, max_len = _put_capacity(out, facts, run, layout, kv.gib)
    calibrated = (
        terms["activation"] + terms["non_torch"] + (terms["cuda_graph"] if graph_on else 0.0)
    )
    margin = margin_gib(cal or calibration(), terms, calibrated, run.seqs, run.vocab)
    hybrid = any(layer.kind == kvmod.MAMBA for layer in layout.layers)
    _put_verdicts(out, run, cap, max_len, kv, weights_gib, margin, hybrid)
    return out


@dataclass(frozen=True)
class _KvCache:
    """The KV cache per GPU and what decides it."""

    gib: float
    held: float  # GiB the GPU holds besides it: weights, profile peak, non-torch, CUDA graphs
    budget: Any  # --kv-cache-memory-bytes as given, or None
    budget_bytes: int | None


def _read_deployment(facts: Facts, nominal_mib: int | None, out: Estimate) -> _Deployment:
    """The release's formula, the model's config, the parallel sizes, the utilization and the
    GPU's usable memory (put first: every bound rests on it)."""
    formula = formula_for(facts.value("release.judged") or facts.value("vllm.version"))
    cfg, raw_text = read_config(facts)
    text = text_config_with_facts(facts, raw_text)
    util_fact = facts.get("serve.gpu_memory_utilization")
    # a default the serve line filled in before the judged release was known (check/explain
    # --vllm-version) is that release's default, not the newest one's
    util = (
        float(util_fact.value)
        if util_fact is not None
        and isinstance(util_fact.value, (int, float))
        and util_fact.source != Source.DEFAULT
        else formula.default_utilization
    )
    usable, uhow = usable_gib(facts, nominal_mib)
    out.put("memory.usable_gib", round(usable, 2), uhow)
    dtype, _ = model_dtype(facts)
    version = facts.value("release.judged") or facts.value("vllm.version")
    return _Deployment(
        formula=formula,
        cfg=cfg,
        raw_text=raw_text,
        text=text,
        release=str(version) if version else None,
        tp=int_fact(facts, "serve.tensor_parallel_size", 1),
        pp=int_fact(facts, "serve.pipeline_parallel_size", 1),
        utilization=util,
        usable=usable,
        usable_how=uhow,
        dtype_bytes=float(kvmod.DTYPE_BYTES.get(dtype, 2)),
    )


def _put_weights(out: Estimate, facts: Facts, run: _Deployment) -> float:
    """The weights per GPU (GiB); with their size unknown, 0 and the reason (the figures are
    then bounds)."""
    try:
        weights = weights_estimate(
            facts, run.cfg, run.text, run.tp, run.pp, run.dtype_bytes, run.release
        )
    except Missing as miss:
        # still a bound: with no weights at all, does one request fit?
        weights = wmod.WeightEstimate(0, f"unknown ({miss.path}: {miss.reason}): 0 assumed")
        out.weights_unknown = miss
    weights_gib = weights.bytes_per_gpu / GIB
    out.put("memory.weights_gib", round(weights_gib, 2), weights.how)
    if weights.assumptions:
        out.weights_doubt = "; ".join(weights.assumptions)
    return weights_gib


def _read_sizes(facts: Facts, run: _Deployment) -> None:
    """The model's sizes and the batch the profile run takes (the release's defaults where the
    serve line gives none); Missing for a size config.json lacks."""
    run.layers = int(need(facts, "model.num_hidden_layers"))
    run.hidden = int(need(facts, "model.hidden_size"))
    run.vocab = int(need(facts, "model.vocab_size"))
    run.intermediate = activation_width(run.text, run.hidden)
    run.gpu_names = [str(n) for n in facts.value("gpu.names") or []]
    batched_default, seqs_default = batch_defaults(run.usable, run.gpu_names, run.formula)
    run.batched = int_fact(facts, "serve.max_num_batched_tokens", batched_default)
    run.seqs = int_fact(facts, "serve.max_num_seqs", seqs_default)
    run.seqs_default = seqs_default
    run.eager = (
        bool(facts.value("serve.enforce_eager")) or facts.value("serve.cudagraph_mode") == "NONE"
    )
    run.layers_gpu = max(
        kvmod.pp_partitions(run.layers, run.pp, facts.value("env.VLLM_PP_LAYER_PARTITION"))
    )


def _put_profile_terms(
    out: Estimate, facts: Facts, run: _Deployment, cal: dict[str, Any] | None
) -> tuple[dict[str, float], bool]:
    """The profile run's terms (activation peak, non-torch memory, CUDA graphs) for the
    release's runner and sampler path, the multimodal encoder's share included; and whether
    the release subtracts the CUDA-graph estimate."""
    release = run.release
    v2, runner_how = profmod.uses_v2_runner(
        release,
        model_traits(facts, run.text, run.layers),
        facts.value("env.VLLM_USE_V2_MODEL_RUNNER"),
    )
    capability = facts.value("gpu.min_capability")
    sampler, sampler_how = profmod.sampler_path(
        release,
        v2=v2,
        capability=int(capability) if capability else None,
        gpu_names=run.gpu_names,
        env=facts.value("env.VLLM_USE_FLASHINFER_SAMPLER"),
        flashinfer_installed=flashinfer_installed(facts),
    )
    graph_on, graph_how = profmod.graph_estimate_subtracted(
        release,
        v2=v2,
        eager=run.eager,
        env=facts.value("env.VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"),
    )
    terms, thow = calibrated_terms(
        tp=run.tp,
        hidden=run.hidden,
        inter=run.intermediate,
        vocab=run.vocab,
        layers_gpu=run.layers_gpu,
        batched=run.batched,
        seqs=run.seqs,
        act_bytes=run.dtype_bytes,
        eager=run.eager,
        graph_subtracted=graph_on,
        cal=cal,
        sampler=sampler,
        state_bytes=profmod.persistent_bytes_per_entry(v2),
    )
    thow["activation"] += f"; sampler path: {sampler_how}; {runner_how}"
    thow["cuda_graph"] += f"; {graph_how}"
    out.inputs = {
        "tp": run.tp,
        "hidden": run.hidden,
        "intermediate": run.intermediate,
        "vocab": run.vocab,
        "sampler": sampler,
        "state_bytes": profmod.persistent_bytes_per_entry(v2),
        "unified_memory": capability in profmod.UNIFIED_MEMORY_CAPABILITIES,
        "layers_gpu": run.layers_gpu,
        "batched": run.batched,
        "seqs": run.seqs,
        "dtype_bytes": run.dtype_bytes,
        "utilization": run.utilization,
        "usable_gib": run.usable,
        "graph_subtracted": graph_on,
    }
    mm = encoder_profile(
        facts, run.cfg, run.hidden, run.dtype_bytes, run.batched, run.seqs, run.release, run.tp
    )
    text_peak = terms["activation"]
    if mm is not None:
        terms["activation"] = mm.peak(text_peak)
        thow["activation"] = f"text-only peak {text_peak:.2f} GiB ({thow['activation']}); {mm.how}"
    # what the multimodal profile adds to the text-only peak (the calibration leaves it out)
    out.inputs["mm_gib"] = terms["activation"] - text_peak
    out.put("memory.activation_peak_gib", round(terms["activation"], 2), thow["activation"])
    out.put("memory.non_torch_gib", round(terms["non_torch"], 2), thow["non_torch"])
    out.put("memory.cuda_graph_gib", round(terms["cuda_graph"], 2), thow["cuda_graph"])
    return terms, graph_on


def _put_kv_cache(
    out: Estimate,
    facts: Facts,
    run: _Deployment,
    terms: dict[str, float],
    graph_on: bool,
    weights_gib: float,
) -> _KvCache:
    """The KV cache left per GPU, or the --kv-cache-memory-bytes budget that replaces the
    computation."""
    budget, budget_bytes = kv_budget(facts)
    graph = terms["cuda_graph"] if graph_on else 0.0
    # what the GPU holds besides the KV cache: weights, the profile's peak, non-torch memory
    # and the CUDA graphs (captured after the KV cache is allocated, in the same memory)
    held = weights_gib + terms["activation"] + terms["non_torch"] + terms["cuda_graph"]
    if budget_bytes:
        kv_gib = budget_bytes / GIB
        kv_how = f"--kv-cache-memory-bytes {budget}: the profile is skipped (gpu_worker)"
    else:
        kv_gib = (
            run.usable * run.utilization
            - weights_gib
            - terms["activation"]
            - terms["non_torch"]
            - graph
        )
        kv_how = (
            f"{run.usable:.2f} GiB × {run.utilization} − weights {weights_gib:.2f} − activation "
            f"{terms['activation']:.2f} − non-torch {terms['non_torch']:.2f}"
            + (f" − CUDA graphs {graph:.2f}" if graph_on else "")
            + f" GiB; {run.formula.describe(graph_on)}"
        )
    out.put("memory.kv_cache_gib", round(kv_gib, 2), kv_how)
    return _KvCache(kv_gib, held, budget, budget_bytes)


def _put_layout(out: Estimate, facts: Facts, run: _Deployment) -> Any:
    """The KV cache's layout per GPU (memory/kv.py): its layers and bytes per token."""
    layout, layers_how = kv_layout(facts, run.text, run.layers, run.tp, run.pp, run.release)
    out.put("memory.kv_layers", layout.describe(), layers_how)
    out.put(
        "memory.kv_bytes_per_token",
        layout.bytes_per_token(),
        f"per GPU, attention layers summed ({layout.describe()})",
    )
    out.inputs["uniform_kv"] = len({layer.key() for layer in layout.layers}) == 1
    return layout


def _put_capacity(
    out: Estimate, facts: Facts, run: _Deployment, layout: Any, kv_gib: float
) -> tuple[Any, int]:
    """The KV cache's blocks, tokens and concurrency as the release counts them; and the
    context length one request takes."""
    formula = run.formula
    max_len, lhow = max_model_len_of(facts)
    block_arg = argv_value(facts, "--block-size")
    requested_block = int(block_arg) if block_arg and block_arg.isdigit() else None
    state_blocks = 1
    if any(layer.kind == kvmod.MAMBA for layer in layout.layers):
        state_blocks, state_how = formula.mamba.blocks_per_request(
            model_type=str(run.text.get("model_type") or ""),
            prefix_caching=prefix_caching(facts),
            spec_tokens=int_fact(facts, "serve.num_speculative_tokens", 0),
            max_model_len=max_len,
            block=kvmod.block_size_for(layout, requested_block)[0],
        )
        layout.how.append(state_how)
    cap = kvmod.capacity(
        layout,
        max(0, int(kv_gib * GIB)),
        max_model_len=max_len,
        max_num_batched_tokens=run.batched,
        tokens_from_concurrency=formula.tokens_from_concurrency,
        block_size=requested_block,
        state_blocks=state_blocks,
    )
    out.put(
        "memory.kv_cache_tokens",
        cap.tokens,
        f"{cap.num_blocks} blocks of {cap.block_size} tokens ({cap.groups} group(s) of "
        f"{cap.group_size} layers, {cap.page_bytes} B per layer page); {formula.describe()}",
    )
    out.put(
        "memory.max_concurrency",
        round(cap.concurrency, 2),
        f"{cap.num_blocks} blocks / {cap.blocks_per_request} blocks per request of "
        f"{max_len} tokens ({lhow})",
    )
    return cap, max_len


def _put_mamba_blocks(
    out: Estimate, cap: Any, kv_gib: float, margin: float, seqs: int, seqs_default: int
) -> None:
    """A hybrid (Mamba / linear-attention) model: each running sequence holds one Mamba cache
    block, and vLLM refuses to capture full CUDA graphs for more sequences than blocks
    (compilation.py: "max_num_seqs (N) exceeds available Mamba cache blocks (M)")."""
    per_block = cap.page_bytes * cap.group_size

    def blocks(gib: float) -> int:
        return max(0, int(gib * GIB) // per_block) if per_block else 0

    low, high = blocks(kv_gib - margin), blocks(kv_gib + margin)
    out.put(
        "memory.mamba_cache_blocks",
        cap.num_blocks,
        f"{cap.num_blocks} blocks of {cap.page_bytes} B × {cap.group_size} layers in "
        f"{kv_gib:.2f} GiB ({low}-{high} within the estimate's margin of {margin:.2f} GiB)",
    )
    out.put(
        "memory.max_num_seqs",
        seqs,
        "--max-num-seqs" if seqs != seqs_default else f"vLLM's default on this GPU ({seqs})",
    )
    verdict = "below" if high < seqs else "tight" if low < seqs else "enough"
    out.put(
        "memory.mamba_blocks_verdict",
        verdict,
        f"{low}-{high} Mamba cache blocks for {seqs} sequences",
    )


def _put_verdicts(
    out: Estimate,
    run: _Deployment,
    cap: Any,
    max_len: int,
    kv: _KvCache,
    weights_gib: float,
    margin_and_how: tuple[float, str],
    hybrid: bool,
) -> None:
    """Whether one request of the context length fits (memory.kv_verdict) within the
    calibrated terms' margin (memory.margin_gib), the room left (memory.kv_room, and
    memory.kv_budget_room for a --kv-cache-memory-bytes budget), a hybrid model's Mamba cache
    blocks against --max-num-seqs, and the line every report shows."""
    margin, margin_how = margin_and_how
    kv_gib, usable, uhow = kv.gib, run.usable, run.usable_how
    need_gib = cap.blocks_per_request * cap.page_bytes * cap.group_size / GIB

    def judge(kv: float) -> tuple[str, str]:
        """(the verdict on one request, the room) for a KV cache of ``kv`` GiB."""
        if kv <= -margin or (kv + margin) < need_gib:
            verdict = "does-not-fit"
        elif kv <= margin or kv < need_gib + margin:
            verdict = "tight"
        else:
            verdict = "fits"
        return verdict, "none" if kv + margin <= 0 else "tight" if kv - margin <= 0 else "room"

    verdict, room = judge(kv_gib)
    # with no weights at all (the KV cache is then larger by them, unless a budget fixes it)
    out.bound["memory.kv_verdict"], out.bound["memory.kv_room"] = judge(
        kv_gib if kv.budget_bytes else kv_gib + weights_gib
    )
    out.put("memory.margin_gib", round(margin, 2), margin_how)
    if hybrid:
        _put_mamba_blocks(out, cap, kv_gib, margin, run.seqs, run.seqs_default)
    if kv.budget_bytes:
        _put_budget_room(out, usable, uhow, kv_gib, kv.held, weights_gib, margin)
    out.put(
        "memory.kv_room",
        room,
        f"estimated KV cache {kv_gib:.2f} ± {margin:.2f} GiB "
        '(vLLM stops with "No available memory for the cache blocks" at ≤ 0); total '
        f"{usable:.2f} GiB ({uhow})",
    )
    out.put(
        "memory.kv_verdict",
        verdict,
        f"one request of {max_len} tokens needs {need_gib:.2f} GiB; estimated KV cache "
        f"{kv_gib:.2f} ± {margin:.2f} GiB; total {usable:.2f} GiB ({uhow})",
    )
    line = estimate_line(kv_gib, cap.tokens, cap.concurrency, max_len)
    if out.values.get("memory.kv_budget_room") in ("none", "tight"):
        left = out.inputs["budget_left_gib"]
        line += (
            f"; asked of the GPU by --kv-cache-memory-bytes {kv.budget}, which with the weights "
            "and "
            + (
                f"the profile is {-left:.1f} GiB more than it holds"
                if left < 0
                else f"the profile leaves {left:.1f} GiB"
            )
        )
    out.put(
        "memory.estimate_line",
        line,
        "memory.kv_cache_gib, memory.kv_cache_tokens, memory.max_concurrency",
    )


def _short_tokens(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.2f}M"
    if n >= 1000:
        return f"{n / 1000:.0f}k"
    return str(n)


def _short_concurrency(concurrency: float) -> str:
    """Two decimals below 10, one above, rounded down: 0.97 requests never reads as 1.0 (MEM001
    decides on the unrounded figure)."""
    places = 2 if concurrency < 10 else 1
    scale = 10**places
    return f"{math.floor(concurrency * scale + 1e-9) / scale:.{places}f}"


def estimate_line(kv_gib: float, tokens: int, concurrency: float, max_len: int) -> str:
    if kv_gib <= 0:  # vLLM stops: "No available memory for the cache blocks"
        return f"no KV cache: the weights and the profile exceed the budget by {-kv_gib:.1f} GiB"
    length = f"{max_len // 1024}k" if max_len % 1024 == 0 else _short_tokens(max_len)
    return (
        f"KV cache ≈ {kv_gib:.0f} GiB ≈ {_short_tokens(tokens)} tokens ≈ "
        f"{_short_concurrency(concurrency)} concurrent requests of {length}"
    )
