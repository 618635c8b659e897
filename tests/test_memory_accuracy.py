"""The memory model against what vLLM printed: every entry of the corpus of real start-up logs
(tests/fixtures/memory-logs/*.yaml, read with vllm_doctor.logreaders.memory_figures).

Prints the distribution of relative errors of the weights per GPU ("Model loading took") and
of the KV-cache tokens ("GPU KV cache size"), twice: with the shipped calibration (fitted on
this same corpus, so in-sample) and leave-one-out (each entry estimated with a calibration
fitted on the others by tools/calibrate_memory.py). Once the corpus holds MIN_ENTRIES
entries it asserts the issue's bar on the leave-one-out figures: weights within 5 % and KV
tokens within 10 % for at least 80 % of the entries. A printed figure the model gives no
estimate for (it names the fact it lacks instead: a Jetson's unified-memory total) counts as a
miss with 100 % error.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).parent / "fixtures" / "memory-logs"
MIN_ENTRIES = 40
BAR_SHARE = 0.8
WEIGHTS_BAR, TOKENS_BAR = 0.05, 0.10
# Why an entry misses the bar, where the mechanism is known but not (or not yet) modelled. Only
# printed beside the entry when it is outside the bar: every entry still counts.
KNOWN_CAUSES = {
    "gh-5656-gpt-oss-20b-r9700x2": "MXFP4 MoE on ROCm (Triton backend) of a development build between 0.11.0 and 0.11.1 "
    "whose release the estimate cannot take: with 0.11.x's ROCm padding (get_padding_alignment "
    "128 off gfx950: hidden 2944, intermediate 1536 per rank) and the loaded scales kept beside "
    "their strided copy the weights would be 6.40 + 0.43 + 0.30 = 7.13 GiB (1.8 % off), but the "
    "estimate models neither ROCm's MXFP4 backend nor a build between releases",
    "web-kagaho-llama-3.1-8b-jetson-thor": "no estimate: unified memory — on a Jetson vLLM sizes the KV cache from "
    "the total cudaMemGetInfo reports (the system memory less the carve-outs), which neither "
    "the module's name (64 or 128 GiB) nor any log in the corpus gives; counted as a miss",
    "web-kubesimplify-qwen3-32b-rtxpro6000-pp2": "PP 2 under 0.27.1's V2 runner: the first stage (no sampler) left 3.03 GiB of "
    "activation + non-torch memory against 1.66 GiB for TP 2 (as the post notes, 1.4 GiB "
    "more); the forward's MLP peak at TP 1 and the PP send/receive buffers explain 0.6 GiB of "
    "it, the rest is not derived",
    "vllm-17469-qwen3-30b-a3b-a10x4": "0.8.5 in a container at TP 4: the log implies 1.03 GiB of activation + non-torch "
    "memory, below the sorting sampler's 1.45 GiB for 256 × 151936 logits; 0.8.x takes "
    "FlashInfer's sampler when a FlashInfer older than 0.2.3 is installed (vLLM's Dockerfile "
    "of early 2025 installs 0.2.1.post2), which the excerpt does not show; the issue also says max-num-seqs was "
    "set to 1 in the attempts, and the excerpt does not carry the run's arguments",
    "web-guardkit-nemotron-3-nano-4b-fp8-gb10": "weights: the ModelOpt FP8 checkpoint keeps the "
    "layers its exclude_modules list in BF16 (0.13.0 modelopt.py, ModelOptFp8Config.is_layer_excluded "
    "-> UnquantizedLinearMethod); that list is not in the documented config, so every linear layer "
    "is taken as FP8 (3.15 B linear parameters at 1 byte + the untied 131072 x 3136 embeddings at 2 "
    "bytes = 4.47 GiB) where the log loaded 4.91 GiB, the size of about 0.47 B of those parameters "
    "kept in BF16; the KV tokens are within the bar (the GB10 unified-memory overhead as below)",
    "web-guardkit-qwen3-30b-a3b-fp8-gb10": "GB10 (unified memory) under NVIDIA's 0.13.0 build: vLLM measures free memory "
    "there as psutil's MemAvailable (mem_utils.MemorySnapshot, Orin/Thor/Spark), so host "
    "allocations during the profile count as non-torch memory: the log implies 3.4 GiB of "
    "activation + non-torch memory at 2048 tokens / 256 sequences (NVML reports no memory size "
    "on GB10, so get_batch_defaults takes the small defaults, as the log prints), the sorting "
    "sampler and the fitted terms give 1.9; such logs are left out of the fit",
    "web-demo-env-l4-llama-3.1-8b-l4": "0.11.0 without FlashInfer (the log: 'FlashInfer is not available') sorts 128 × "
    "128256 logits: 10 × 0.061 = 0.61 GiB plus the fitted non-torch intercept (0.43 GiB, one "
    "for every release and runner, raised by the V2 runner's compiled profiles of 1.7–1.9 GiB) "
    "against the 0.55 GiB the log implies; 4 % of the 4.75 GiB KV cache more than the bar",
    "web-kvcached-qwen3-30b-a3b-gb10": "GB10 (unified memory) shared with a second vLLM instance, a source build after 0.19.1: "
    "its figures imply a negative overhead (121.69 × 0.49 − 56.88 − 4.85 = −2.1 GiB), so the "
    "budget that run used is not total × utilization; left out of the fit likewise",
    "web-private-ai-inference-qwen3-coder-30b-a3b-fp8-a100-40g": "FP8 on an A100 runs weight-only on Marlin, which turns "
    "block scales into one bf16 scale per 128 inputs of every output channel (marlin_utils_fp8, "
    "modelled: +0.44 GiB for 128×128 blocks); the documented config leaves weight_block_size out "
    "(no document here states it), so the estimate cannot add them: 29.01 + 0.44 = 29.45 GiB "
    "against the 29.54 printed, and the KV tokens follow",
    "web-johnpfeiffer-gemma-4-31b-it-b300": "KV memory within 2 % (179.4 vs 182.37 GiB); the printed tokens are that "
    "memory over all 60 layers held as full attention (182.37 GiB / (50 × 16 × 256 × 2 × 2 + 10 × 4 × 512 × 2 × 2 B) = "
    "217,305 against 217,116 printed, 13.25 requests of 16k), as unify_hybrid_kv_cache_specs makes them when the hybrid "
    "KV-cache manager is off; the estimate keeps the sliding layers' window (kv.capacity's groups: about 1.5 × the tokens). Which "
    "of 0.26.0's rules turned the manager off for this run is not found (no KV connector, no chunked local attention). "
    "The log also ran the V1 model runner with FlashInfer's sampler where 0.26.0's default rule gives V2 (peak "
    "activation printed 3.9 GiB)",
    "web-sipeed-qwen3-vl-30b-a3b-rtx3090x4": "weights: 0.11.0 loaded 14.77 GiB per GPU where the checkpoint's 31.07 B "
    "parameters split over TP 4 (the vision tower too: qwen3_vl.py's Column/RowParallelLinear) give 14.47; the "
    "0.30 GiB more is in no parameter (not identified) and is 13 % of this run's 2.31 GiB KV cache",
    "web-tsailiming-qwen2.5-vl-7b-l4": "multimodal profile: the vision tower's forward over the 16,384-token dummy image "
    "(65,536 patches) is the peak; the structural count (float32 + bf16 pixels and the gated MLP step per patch) gives "
    "2.00 GiB where the log implies about 2.3 GiB of activation, and with 0.19 GiB fewer weights than loaded that is a "
    "large share of this run's 1.81 GiB KV cache; the rest of the tower's peak is not counted",
    "web-retriva-qwen3-0.6b-rtx3060-util075": "0.19.0 at 0.75 of an RTX 3060 12GB: the printed figures imply a negative overhead "
    "(11.63 × 0.75 − 1.12 − 8.03 = −0.43 GiB), so the budget was not total × utilization minus this "
    "process's own use; the same notes' first start-up that day found 2.6 GiB of the GPU held by "
    "another process (Free memory 9.02/11.63 GiB), whose release during the profile vLLM 0.19 counts "
    "as a negative non-torch increase; left out of the fit likewise",
}


def _entries() -> list[Path]:
    return sorted(CORPUS.glob("*.yaml")) if CORPUS.is_dir() else []


def _calibration_tool() -> Any:
    spec = importlib.util.spec_from_file_location(
        "calibrate_memory", ROOT / "tools" / "calibrate_memory.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their annotations there
    spec.loader.exec_module(module)
    return module


def _quantiles(errors: list[float]) -> str:
    if not errors:
        return "none"
    ordered = sorted(errors)
    pick = {q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in (0.5, 0.8, 0.9)}
    return (
        f"n={len(ordered)} median {pick[0.5]:.1%} p80 {pick[0.8]:.1%} p90 {pick[0.9]:.1%} "
        f"max {ordered[-1]:.1%}"
    )


def _errors(
    entry: dict[str, Any], printed: Any, cal: dict[str, Any] | None
) -> tuple[float | None, float | None, str]:
    from vllm_doctor.memory.corpus import entry_facts
    from vllm_doctor.memory.facts import compute_memory

    facts = entry_facts(entry)
    if entry.get("vllm_version"):
        facts.set("release.judged", str(entry["vllm_version"]), "corpus entry")
    compute_memory(facts, cal)
    w_est, t_est = facts.value("memory.weights_gib"), facts.value("memory.kv_cache_tokens")
    # a printed figure the model gives no estimate for (it names the fact it lacks) is a miss:
    # error 100 %, never left out of the count
    w_err = (
        (abs(w_est - printed.weights_gib) / printed.weights_gib if w_est is not None else 1.0)
        if printed.weights_gib
        else None
    )
    t_err = (
        (
            abs(t_est - printed.kv_cache_tokens) / printed.kv_cache_tokens
            if t_est is not None
            else 1.0
        )
        if printed.kv_cache_tokens
        else None
    )
    why = f"(no estimate: {facts.why_missing('memory.kv_cache_tokens')})" if t_est is None else ""
    return (
        w_err,
        t_err,
        (
            f"weights {w_est} vs {printed.weights_gib}, tokens {t_est} vs "
            f"{printed.kv_cache_tokens} {why or ''}"
        ),
    )


def test_memory_model_against_real_startup_logs(capsys):
    entries = _entries()
    if not entries:
        pytest.skip(f"no corpus of start-up logs in {CORPUS} yet")
    from vllm_doctor.logreaders.memory_figures import read_memory_figures
    from vllm_doctor.memory.corpus import load_entry, observation

    tool = _calibration_tool()
    seen = {path: observation(path) for path in entries}
    tallies: dict[str, dict[str, list[float]]] = {
        "in-sample": {"w": [], "t": []},
        "leave-one-out": {"w": [], "t": []},
    }
    within = {"in-sample": 0, "leave-one-out": 0}
    # leave-one-out errors by where the entry's config came from (README: config_origin)
    origins: dict[str, dict[str, list[float]]] = {}
    # leave-one-out [within the bar, judged] by kind (an entry counts under each of its kinds)
    by_kind: dict[str, list[int]] = {}
    judged, rows = 0, []
    for path in entries:
        entry = load_entry(path)
        printed = read_memory_figures(str(entry.get("log") or ""))
        others = [
            tool.Observation(**o)
            for p, o in seen.items()
            if p != path
            and o is not None
            and (o["overhead_gib"] is not None or o["cuda_graph_gib"] is not None)
        ]
        held_out = tool.fit(others) if others else None
        counted = False
        for mode, cal in (("in-sample", None), ("leave-one-out", held_out)):
            w_err, t_err, line = _errors(entry, printed, cal)
            if w_err is None and t_err is None:
                continue
            counted = True
            if w_err is not None:
                tallies[mode]["w"].append(w_err)
            if t_err is not None:
                tallies[mode]["t"].append(t_err)
            within[mode] += (w_err is None or w_err <= WEIGHTS_BAR) and (
                t_err is None or t_err <= TOKENS_BAR
            )
            if mode == "leave-one-out":
                outside = (w_err is not None and w_err > WEIGHTS_BAR) or (
                    t_err is not None and t_err > TOKENS_BAR
                )
                cause = KNOWN_CAUSES.get(path.stem, "cause not identified")
                rows.append(
                    f"  {path.stem}: {line}"
                    + (f"\n      outside the bar: {cause}" if outside else "")
                )
                group = origins.setdefault(
                    str(entry.get("config_origin", "checkpoint")), {"w": [], "t": []}
                )
                group["w"] += [w_err] if w_err is not None else []
                group["t"] += [t_err] if t_err is not None else []
                for kind in entry.get("kinds") or []:
                    tally_kind = by_kind.setdefault(str(kind), [0, 0])
                    tally_kind[0] += not outside
                    tally_kind[1] += 1
        judged += counted
    with capsys.disabled():
        print(f"\nmemory model on {len(entries)} start-up logs ({judged} with printed figures)")
        for mode, tally in tallies.items():
            print(f"  {mode}: weights per GPU error {_quantiles(tally['w'])}")
            print(f"  {mode}: KV-cache tokens error {_quantiles(tally['t'])}")
            print(
                f"  {mode}: within the bar (weights ≤ 5 %, tokens ≤ 10 %): {within[mode]}/{judged}"
            )
        for origin, tally in sorted(origins.items()):
            print(
                f"  leave-one-out, config {origin}: weights per GPU error {_quantiles(tally['w'])}"
            )
            print(
                f"  leave-one-out, config {origin}: KV-cache tokens error {_quantiles(tally['t'])}"
            )
        print(
            "  leave-one-out, within the bar by kind: "
            + ", ".join(f"{kind} {n}/{of}" for kind, (n, of) in sorted(by_kind.items()))
        )
        print("\n".join(rows))
    if len(entries) < MIN_ENTRIES:
        pytest.skip(f"{len(entries)} corpus entries: the bar is asserted from {MIN_ENTRIES}")
    assert within["leave-one-out"] >= BAR_SHARE * judged, (
        f"{within['leave-one-out']}/{judged} entries within the bar (need {BAR_SHARE:.0%})"
    )
