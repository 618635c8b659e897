"""One entry of the corpus of real start-up logs (tests/fixtures/memory-logs/<id>.yaml) as the
facts the memory model reads: the GPU, the vLLM version, the serve line or the engine
arguments vLLM printed, and the model's config.json (a path under tests/fixtures/ or inline).

Used by tests/test_memory_accuracy.py and tools/calibrate_memory.py; never by `check`.
"""

from __future__ import annotations

import json
import math
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
    from vllm_doctor.serve_args import parse_serve_argv

    facts = Facts()
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
    if entry.get("vllm_version"):
        facts.set("vllm.version", str(entry["vllm_version"]), "corpus entry")
    gpu = entry.get("gpu")
    if gpu:
        apply_target_hardware(facts, TargetHardware(gpu=str(gpu), count=int(
            entry.get("gpu_count") or 1)))
        infer_hardware(facts)
    compute_derived(facts)
    return facts


def observation_inputs(path: Path) -> dict[str, Any] | None:
    """The calibration inputs of one entry (tools/calibrate_memory.py), or None when the
    entry lacks what the fit needs."""
    from vllm_doctor.memory.estimate import batch_defaults, formula_for, usable_gib

    try:
        entry = load_entry(path)
        facts = entry_facts(entry)
        usable, _ = usable_gib(facts)
    except Exception:  # an entry the model cannot read is not an observation
        return None
    hidden, layers, vocab = (facts.value(f"model.{k}") for k in (
        "hidden_size", "num_hidden_layers", "vocab_size"))
    if not (hidden and layers and vocab and isinstance(entry.get("log"), str)):
        return None
    tp = int(facts.value("serve.tensor_parallel_size") or 1)
    pp = int(facts.value("serve.pipeline_parallel_size") or 1)
    formula = formula_for(facts.value("vllm.version"))
    batched, seqs = batch_defaults(usable, [str(entry.get("gpu"))], formula)
    return {
        "source": str(entry.get("source")), "log": entry["log"], "tp": tp,
        "hidden": int(hidden), "vocab": int(vocab), "layers_gpu": math.ceil(int(layers) / pp),
        "intermediate": int(_intermediate(facts) or 4 * int(hidden)),
        "batched": int(facts.value("serve.max_num_batched_tokens") or batched),
        "seqs": int(facts.value("serve.max_num_seqs") or seqs),
    }


def _intermediate(facts: Facts) -> int | None:
    from vllm_doctor.memory.estimate import _config

    _, text = _config(facts)
    value = text.get("moe_intermediate_size") or text.get("intermediate_size")
    return int(value) if isinstance(value, (int, float)) else None
