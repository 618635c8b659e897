"""One entry of the corpus of real start-up logs (tests/fixtures/memory-logs/<id>.yaml) as the
facts the memory model reads: the GPU, the vLLM version, the serve line or the engine
arguments vLLM printed, and the model's config.json (a path under tests/fixtures/ or inline).

Used by tests/test_memory_accuracy.py and tools/calibrate_memory.py; never by `check`.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from pathlib import Path
from typing import Any

from vllm_doctor.facts.model import Facts, Source

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
# engine_args keys (as vLLM prints its non-default args) → serve facts
_ENGINE_ARGS = {
    "tensor_parallel_size": "serve.tensor_parallel_size",
    "pipeline_parallel_size": "serve.pipeline_parallel_size",
    "data_parallel_size": "serve.data_parallel_size",
    "max_model_len": "serve.max_model_len",
    "gpu_memory_utilization": "serve.gpu_memory_utilization",
    "max_num_seqs": "serve.max_num_seqs",
    "max_num_batched_tokens": "serve.max_num_batched_tokens",
    "kv_cache_dtype": "serve.kv_cache_dtype",
    "quantization": "serve.quantization",
    "dtype": "serve.dtype",
    "enforce_eager": "serve.enforce_eager",
    "enable_expert_parallel": "serve.enable_expert_parallel",
    "enable_prefix_caching": "serve.enable_prefix_caching",
}


def load_entry(path: Path) -> dict[str, Any]:
    from vllm_doctor.yaml_io import safe_load

    data = safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a mapping")
    return data


def _config_path(entry: dict[str, Any], scratch: Path) -> Path | None:
    config = entry.get("config")
    if isinstance(config, str):
        found = FIXTURES / config
        return found if found.exists() else None
    if isinstance(config, dict):
        out = scratch / "config.json"
        out.write_text(json.dumps(config), encoding="utf-8")
        return out
    return None


def entry_facts(entry: dict[str, Any], scratch: Path | None = None) -> Facts:
    """The facts of one corpus entry (model, serve line, GPU, vLLM version)."""
    from vllm_doctor.facts.derived import compute_derived
    from vllm_doctor.facts.hardware import TargetHardware, apply_target_hardware, infer_hardware
    from vllm_doctor.facts.model_config import read_model_config
    from vllm_doctor.serveline.parser import parse_serve_argv

    facts = Facts()
    if entry.get("vllm_version"):  # first: the serve line's defaults depend on it
        facts.set("vllm.version", str(entry["vllm_version"]), "corpus entry")
    scratch = scratch or Path(tempfile.mkdtemp(prefix="vllm-doctor-corpus-"))
    config = _config_path(entry, scratch)
    if config is not None:
        path = config / "config.json" if config.is_dir() else config
        cfg = json.loads(path.read_text(encoding="utf-8"))
        read_model_config(facts, path, cfg, str(path))
    serve = entry.get("serve")
    if isinstance(serve, str) and serve.strip():
        words = shlex.split(serve)
        if words[:2] == ["vllm", "serve"]:
            words = words[2:]
        parse_serve_argv(words).to_facts(facts, Source.SERVE, {})
    for key, value in (entry.get("engine_args") or {}).items():
        fact = _ENGINE_ARGS.get(str(key))
        if fact and value is not None and fact not in facts:
            facts.set(fact, value, "engine arguments the log printed")
    # the multimodal profile's inputs vLLM printed before profiling (its encoder budget and
    # dummy items), as `explain --log` reads them; none of the memory figures
    from vllm_doctor.logreaders.memory_figures import read_memory_figures, says_flashinfer_sampler

    printed = read_memory_figures(str(entry.get("log") or ""))
    if printed.encoder_budget_tokens:
        budget: dict[str, int | str] = {"encoder_budget_tokens": printed.encoder_budget_tokens}
        if printed.encoder_items:
            budget["encoder_items"] = printed.encoder_items
        if printed.encoder_modality:
            budget["encoder_modality"] = printed.encoder_modality
        facts.set("log.memory_figures", budget, Source.LOG, "the entry's budget line")
    if says_flashinfer_sampler(str(entry.get("log") or "")):
        facts.set("log.flashinfer_sampler", True, "the entry's log")
    gpu = entry.get("gpu")
    if gpu:
        apply_target_hardware(
            facts, TargetHardware(gpu=str(gpu), count=int(entry.get("gpu_count") or 1))
        )
        infer_hardware(facts)
    compute_derived(facts)
    return facts


def observation(path: Path) -> dict[str, Any] | None:
    """What one entry tells the calibration (tools/calibrate_memory.py): the inputs of the
    calibrated terms and the overhead vLLM's printed figures imply, or None when the entry
    lacks what the fit needs."""
    from vllm_doctor.logreaders.memory_figures import read_memory_figures
    from vllm_doctor.memory.estimate import estimate
    from vllm_doctor.memory.formula import GIB
    from vllm_doctor.memory.inputs import Missing

    try:
        entry = load_entry(path)
        facts = entry_facts(entry)
        facts.set("release.judged", str(entry.get("vllm_version") or ""), "corpus entry")
        result = estimate(facts)
    except (Missing, ValueError, TypeError, KeyError, OSError):
        return None
    figures = read_memory_figures(str(entry.get("log") or ""))
    inputs = dict(result.inputs)
    if not inputs or not figures.weights_gib:
        return None
    usable = figures.total_gpu_gib or inputs["usable_gib"]
    util = figures.utilization or inputs["utilization"]
    kv_gib = figures.kv_cache_gib
    per_token = result.values.get("memory.kv_bytes_per_token")
    if kv_gib is None and figures.kv_cache_tokens and per_token and inputs["uniform_kv"]:
        kv_gib = figures.kv_cache_tokens * per_token / GIB  # blocks × block size × bytes
    graph = figures.cuda_graph_estimate_gib or figures.cuda_graph_gib
    overhead = None
    if figures.activation_peak_gib is not None and figures.non_torch_gib is not None:
        overhead = figures.activation_peak_gib + figures.non_torch_gib
    elif kv_gib is not None and (graph is not None or not inputs["graph_subtracted"]):
        subtracted = graph if inputs["graph_subtracted"] else 0.0
        overhead = usable * util - figures.weights_gib - kv_gib - (subtracted or 0.0)
    if overhead is not None:  # the calibrated terms explain the text-only part
        overhead -= inputs.get("mm_gib", 0.0)
    return {
        "source": str(entry.get("source")),
        "overhead_gib": overhead,
        "cuda_graph_gib": graph,
        **{
            k: inputs[k]
            for k in (
                "tp",
                "hidden",
                "intermediate",
                "vocab",
                "layers_gpu",
                "batched",
                "seqs",
                "dtype_bytes",
                "sampler",
                "state_bytes",
                "unified_memory",
            )
        },
    }
