"""vLLM's gates around its stack: the envs / aiter_gates / model_runner extractors on small
fake release trees (excerpts of the real files, release named beside each), the programs'
interpreter (knowledge/envs.py) and the release.env* / release.aiter.* / model runner facts
from the shipped tables."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.facts.hardware import TargetHardware
from vllm_doctor.knowledge.envs import Opaque, Refused, evaluate, names

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / "tools"
sys.path.insert(0, str(TOOLS))
sys.path.insert(0, str(TOOLS / "extractors"))
from release_tree import release  # noqa: E402


def _extractor(name: str):
    spec = importlib.util.spec_from_file_location(
        f"test_{name}", TOOLS / "extractors" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# vllm/envs.py of 0.16.0, the shapes its lambdas take (trimmed)
ENVS_016 = """
import os
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    VLLM_ROCM_USE_AITER: bool = False
    VLLM_ROCM_USE_AITER_FP4BMM: bool = True
    VLLM_USE_DEEP_GEMM: bool = True
def maybe_convert_bool(value):
    if value is None:
        return None
    return bool(int(value))
def env_with_choices(env_name, default, choices, case_sensitive=True):
    pass
def get_vllm_port():
    return None
environment_variables = {
    "VLLM_ROCM_USE_AITER": lambda: (
        os.getenv("VLLM_ROCM_USE_AITER", "False").lower() in ("true", "1")
    ),
    "VLLM_ROCM_USE_AITER_FP4BMM": lambda: (
        os.getenv("VLLM_ROCM_USE_AITER_FP4BMM", "True").lower() in ("true", "1")
    ),
    "VLLM_USE_DEEP_GEMM": lambda: bool(int(os.getenv("VLLM_USE_DEEP_GEMM", "1"))),
    "VLLM_USE_V2_MODEL_RUNNER": lambda: maybe_convert_bool(
        os.getenv("VLLM_USE_V2_MODEL_RUNNER", None)
    ),
    "VLLM_USE_FLASHINFER_SAMPLER": lambda: bool(int(os.environ["VLLM_USE_FLASHINFER_SAMPLER"]))
    if "VLLM_USE_FLASHINFER_SAMPLER" in os.environ
    else None,
    "VLLM_FLASHINFER_MOE_BACKEND": env_with_choices(
        "VLLM_FLASHINFER_MOE_BACKEND", "latency", ["throughput", "latency"]
    ),
    "VLLM_PORT": get_vllm_port,
}
"""

# vllm/platforms/rocm.py of 0.16.0 (the predicates) and vllm/_aiter_ops.py (the checks)
ROCM_016 = """
import torch
def on_gfx9() -> bool:
    GPU_ARCH = torch.cuda.get_device_properties("cuda").gcnArchName
    return any(arch in GPU_ARCH for arch in ["gfx90a", "gfx942", "gfx950"])
def on_mi3xx() -> bool:
    GPU_ARCH = torch.cuda.get_device_properties("cuda").gcnArchName
    return any(arch in GPU_ARCH for arch in ["gfx942", "gfx950"])
def on_gfx950() -> bool:
    GPU_ARCH = torch.cuda.get_device_properties("cuda").gcnArchName
    return any(arch in GPU_ARCH for arch in ["gfx950"])
"""
AITER_OPS = """
import vllm.envs as envs
def is_aiter_found_and_supported() -> bool:
    if current_platform.is_rocm() and IS_AITER_FOUND:
        from vllm.platforms.rocm import {umbrella}
        return {umbrella}()
    return False
def if_aiter_supported(func):
    def wrapper(*args, **kwargs):
        if is_aiter_found_and_supported():
            return func(*args, **kwargs)
        return None
    return wrapper
class rocm_aiter_ops:
    _AITER_ENABLED = envs.VLLM_ROCM_USE_AITER
    _FP4BMM_ENABLED = envs.VLLM_ROCM_USE_AITER_FP4BMM
    @classmethod
    @if_aiter_supported
    def is_enabled(cls) -> bool:
        return cls._AITER_ENABLED
    @classmethod
    @if_aiter_supported
    def is_fp4bmm_enabled(cls) -> bool:
{fp4bmm}
"""
FP4BMM_016 = "        return cls._AITER_ENABLED and cls._FP4BMM_ENABLED"
FP4BMM_017 = (
    "        from vllm.platforms.rocm import on_gfx950\n\n"
    "        return cls._AITER_ENABLED and cls._FP4BMM_ENABLED and on_gfx950()"
)
# vllm/config/vllm.py: 0.22.0 picks V2 for a list of architectures, 0.29.0 by itself
CONFIG_022 = """
DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES = frozenset({"Qwen3ForCausalLM"})
class VllmConfig:
    @property
    def use_v2_model_runner(self) -> bool:
        use_v2_model_runner = envs.VLLM_USE_V2_MODEL_RUNNER
        if use_v2_model_runner is not None:
            return use_v2_model_runner
        if not self._is_default_v2_model_runner_model():
            return False
        return True
"""
CONFIG_029 = """
ROCM_DEFAULT_MRV1_ARCHITECTURES = frozenset({"DeepseekV32ForCausalLM"})
class VllmConfig:
    @property
    def use_v2_model_runner(self) -> bool:
        use_v2_model_runner = envs.VLLM_USE_V2_MODEL_RUNNER
        if use_v2_model_runner is not None:
            return use_v2_model_runner
        return True
"""


def test_envs_extractor_reads_each_shape(tmp_path):
    out = _extractor("envs").extract(release(tmp_path, "0.16.0", {"envs.py": ENVS_016}))
    assert out["VLLM_ROCM_USE_AITER_FP4BMM"] == {
        "program": ["in", ["lower", ["env", "VLLM_ROCM_USE_AITER_FP4BMM", "True"]], ["true", "1"]],
        "type": "bool",
    }
    assert out["VLLM_USE_DEEP_GEMM"]["program"] == [
        "bool",
        ["int", ["env", "VLLM_USE_DEEP_GEMM", "1"]],
    ]
    assert out["VLLM_USE_V2_MODEL_RUNNER"]["program"] == [
        "maybe_bool",
        ["env", "VLLM_USE_V2_MODEL_RUNNER", None],
    ]
    assert out["VLLM_USE_FLASHINFER_SAMPLER"]["program"][0] == "ifset"
    assert out["VLLM_FLASHINFER_MOE_BACKEND"]["program"] == [
        "choices",
        "VLLM_FLASHINFER_MOE_BACKEND",
        "latency",
        ["throughput", "latency"],
        True,
    ]
    assert out["VLLM_PORT"]["program"][0] == "opaque"


@pytest.mark.parametrize(
    ("version", "umbrella", "fp4bmm", "gfx"),
    [
        ("0.16.0", "on_gfx9", FP4BMM_016, ["gfx90a", "gfx942", "gfx950"]),
        ("0.17.0", "on_gfx9", FP4BMM_017, ["gfx950"]),
        ("0.19.0", "on_mi3xx", FP4BMM_017, ["gfx950"]),
    ],
)
def test_aiter_gates_extractor_names_the_architectures(tmp_path, version, umbrella, fp4bmm, gfx):
    ops = AITER_OPS.replace("{umbrella}", umbrella).replace("{fp4bmm}", fp4bmm)
    out = _extractor("aiter_gates").extract(
        release(tmp_path, version, {"_aiter_ops.py": ops, "platforms/rocm.py": ROCM_016})
    )
    supported = ["gfx90a", "gfx942", "gfx950"] if umbrella == "on_gfx9" else ["gfx942", "gfx950"]
    assert out["@supported"]["gate"] == ["arch", supported]
    assert out["aiter"]["gate"] == ["and", ["arch", supported], ["env", "VLLM_ROCM_USE_AITER"]]
    gate = out["fp4bmm"]["gate"]
    assert gate[:2] == ["and", ["arch", supported]]
    assert ["env", "VLLM_ROCM_USE_AITER_FP4BMM"] in gate[2]
    arch_tests = [t for t in gate[2] if t[0] == "arch"]
    assert (arch_tests[0][1] if arch_tests else supported) == gfx


def test_model_runner_extractor(tmp_path):
    extract = _extractor("model_runner").extract
    assert (
        extract(release(tmp_path, "0.21.0", {"envs.py": ENVS_016}))["@release"]["default"] == "off"
    )
    listed = extract(release(tmp_path, "0.22.0", {"config/vllm.py": CONFIG_022}))["@release"]
    assert listed == {"default": "listed", "architectures": ["Qwen3ForCausalLM"]}
    auto = extract(release(tmp_path, "0.29.0", {"config/vllm.py": CONFIG_029}))["@release"]
    assert auto == {"default": "auto", "architectures": ["DeepseekV32ForCausalLM"]}


# -- the interpreter ------------------------------------------------------------------------
FLAG = ["bool", ["int", ["env", "VLLM_USE_DEEP_GEMM", "1"]]]


def test_programs_read_as_the_release_reads():
    assert evaluate(FLAG, {}) is True
    assert evaluate(FLAG, {"VLLM_USE_DEEP_GEMM": "0"}) is False
    with pytest.raises(Refused, match="invalid literal for int"):
        evaluate(FLAG, {"VLLM_USE_DEEP_GEMM": "true"})
    word = ["in", ["lower", ["env", "VLLM_ROCM_USE_AITER", "False"]], ["true", "1"]]
    assert evaluate(word, {"VLLM_ROCM_USE_AITER": "TRUE"}) is True
    assert evaluate(word, {"VLLM_ROCM_USE_AITER": "yes"}) is False  # vLLM reads it so too
    maybe = ["maybe_bool", ["env", "VLLM_USE_V2_MODEL_RUNNER", None]]
    assert evaluate(maybe, {}) is None and evaluate(maybe, {"VLLM_USE_V2_MODEL_RUNNER": "1"})
    choice = ["choices", "VLLM_FLASHINFER_MOE_BACKEND", "latency", ["throughput", "latency"], True]
    assert evaluate(choice, {}) == "latency"
    with pytest.raises(Refused, match="Valid options"):
        evaluate(choice, {"VLLM_FLASHINFER_MOE_BACKEND": "Latency"})
    with pytest.raises(Opaque):
        evaluate(["opaque", "get_vllm_port"], {})
    assert names(["ifset", "A", ["env", "A", None], ["env", "B", "0"]]) == {"A", "B"}


# -- the facts from the shipped tables --------------------------------------------------------
def facts_for(serve: str, version: str, gpu: str = "MI300X", environ: dict | None = None):
    return collect_facts(
        CollectOptions(
            serve_string=serve,
            vllm_version=version,
            target=TargetHardware(gpu=gpu, count=8),
            probe_machine=False,
            environ=environ if environ is not None else {},
            offline=True,
        )
    )


def test_fp4bmm_on_gfx942_in_0_16_and_guarded_from_0_17():
    line = "VLLM_ROCM_USE_AITER=1 vllm serve deepseek-ai/DeepSeek-V3 -tp 8"
    early = facts_for(line, "0.16.0")
    assert early.value("release.env.VLLM_ROCM_USE_AITER_FP4BMM") is True
    assert "default" in early.get("release.env.VLLM_ROCM_USE_AITER_FP4BMM").detail
    assert early.value("release.aiter.fp4bmm") is True
    later = facts_for(line, "0.17.0")
    assert later.value("release.aiter.fp4bmm") is False
    assert later.value("release.aiter.mla") is True
    off = facts_for("vllm serve deepseek-ai/DeepSeek-V3 -tp 8", "0.16.0")
    assert off.value("release.aiter.aiter") is False
    nvidia = facts_for(line, "0.16.0", gpu="H100")
    assert "release.aiter.fp4bmm" not in nvidia and not nvidia.why_missing("release.aiter.fp4bmm")


def test_unknown_and_refused_variables():
    facts = facts_for(
        "VLLM_ATTENTION_BACKEND=TRITON_ATTN VLLM_USE_DEEP_GEMM=true vllm serve Qwen/Qwen3-8B",
        "0.26.0",
        gpu="H100",
    )
    assert facts.value("release.env_unknown") == ["VLLM_ATTENTION_BACKEND"]
    assert "0.8.0–0.14.1" in facts.get("release.env_unknown").detail
    assert facts.value("release.env_invalid") == ["VLLM_USE_DEEP_GEMM"]
    assert "invalid literal for int()" in facts.why_missing("release.env.VLLM_USE_DEEP_GEMM")
    older = facts_for(
        "VLLM_ATTENTION_BACKEND=TRITON_ATTN vllm serve Qwen/Qwen3-8B", "0.14.1", "H100"
    )
    assert older.value("release.env_unknown") == []
    # 0.11.0-0.14.1 check the value against choices made at run time: not followed
    assert "not follow" in older.why_missing("release.env.VLLM_ATTENTION_BACKEND")


def test_environment_not_known_leaves_the_values_open():
    facts = collect_facts(
        CollectOptions(
            serve_string="vllm serve Qwen/Qwen3-8B",
            vllm_version="0.26.0",
            probe_machine=False,
            offline=True,
        )
    )
    assert "not examined" in facts.why_missing("release.env.VLLM_USE_DEEP_GEMM")
    assert facts.why_missing("release.env_unknown")


@pytest.mark.parametrize(
    ("version", "environ", "expected"),
    [
        ("0.21.0", {}, "off"),
        ("0.24.0", {}, "auto"),
        ("0.29.0", {}, "auto"),
        ("0.29.0", {"VLLM_USE_V2_MODEL_RUNNER": "0"}, "off"),
        ("0.16.0", {"VLLM_USE_V2_MODEL_RUNNER": "1"}, "on"),
    ],
)
def test_model_runner_v2(version, environ, expected):
    facts = facts_for("vllm serve Qwen/Qwen3-0.6B", version, gpu="RTX 4090", environ=environ)
    assert facts.value("release.model_runner_v2") == expected


# vllm/platforms/cuda.py of 0.24.0 (the 12.x family joins)
CUDA_024 = '''
class CudaPlatform:
    @classmethod
    def support_deep_gemm(cls) -> bool:
        """Currently, only Hopper and Blackwell GPUs are supported."""
        return (
            cls.is_device_capability(90)
            or cls.is_device_capability_family(100)
            or cls.is_device_capability_family(120)
        )
'''


def test_deep_gemm_extractor(tmp_path):
    out = _extractor("deep_gemm").extract(
        release(tmp_path, "0.24.0", {"platforms/cuda.py": CUDA_024})
    )
    assert out["@release"] == {
        "exact": [90],
        "family": [100, 120],
        "where": "platforms/cuda.py:support_deep_gemm",
    }


@pytest.mark.parametrize(
    ("gpu", "version", "environ", "arch", "used"),
    [
        ("GB10", "0.26.0", {}, True, True),  # the 12.x family from 0.24.0
        ("GB10", "0.23.0", {}, False, False),
        ("GB10", "0.26.0", {"VLLM_USE_DEEP_GEMM": "0"}, True, False),
        ("H100", "0.23.0", {}, True, True),
        ("RTX 4090", "0.26.0", {}, False, False),
    ],
)
def test_deep_gemm_by_capability(gpu, version, environ, arch, used):
    facts = facts_for("vllm serve Qwen/Qwen3-8B", version, gpu=gpu, environ=environ)
    assert facts.value("release.deep_gemm_arch") is arch
    assert facts.value("release.deep_gemm") is used


# vllm/v1/attention/backends/mla/common.py of 0.10.2: the check before _aiter_ops.py (trimmed)
MLA_COMMON_0102 = """
from vllm import envs
from vllm.platforms import current_platform
def is_rocm_aiter_fp8bmm_enabled() -> bool:
    return current_platform.is_rocm() \\
        and envs.VLLM_ROCM_USE_AITER_FP8BMM \\
        and envs.VLLM_ROCM_USE_AITER
"""


def test_aiter_gates_extractor_reads_the_checks_before_aiter_ops(tmp_path):
    out = _extractor("aiter_gates").extract(
        release(tmp_path, "0.10.2", {"v1/attention/backends/mla/common.py": MLA_COMMON_0102})
    )
    assert out == {
        "fp8bmm": {
            "method": "vllm/v1/attention/backends/mla/common.py:is_rocm_aiter_fp8bmm_enabled",
            "gate": [
                "and",
                ["const", True],
                ["env", "VLLM_ROCM_USE_AITER_FP8BMM"],
                ["env", "VLLM_ROCM_USE_AITER"],
            ],
        }
    }


def test_aiter_features_before_aiter_ops():
    line = "VLLM_ROCM_USE_AITER=1 vllm serve deepseek-ai/DeepSeek-V3 -dp 8"
    facts = facts_for(line, "0.10.2")
    assert facts.value("release.aiter.fp8bmm") is True  # is_rocm_aiter_fp8bmm_enabled()
    # the FP4 BMM switch is declared from 0.15.0: no such path in 0.10.2
    assert facts.value("release.aiter.fp4bmm") is False
    assert "declares no VLLM_ROCM_USE_AITER_FP4BMM" in facts.get("release.aiter.fp4bmm").detail
    # fused MoE's switch is declared, its check is under another name then: not known
    assert "release.aiter.fused_moe" not in facts
    assert "before vllm/_aiter_ops.py" in facts.why_missing("release.aiter.fused_moe")
    older = facts_for(line, "0.9.2")
    assert older.value("release.aiter.fp8bmm") is False  # VLLM_ROCM_USE_AITER_FP8BMM from 0.10.2


def test_aiter_not_known_without_a_release():
    facts = collect_facts(
        CollectOptions(
            serve_string="VLLM_ROCM_USE_AITER=1 vllm serve deepseek-ai/DeepSeek-V3",
            target=TargetHardware(gpu="MI300X", count=8),
            probe_machine=False,
            environ={},
            offline=True,
        )
    )
    assert "release.aiter.fp8bmm" not in facts
    assert facts.why_missing("release.aiter.fp8bmm")


# vllm/model_executor/layers/fused_moe/oracle/fp8.py of 0.26.0 and unquantized.py of 0.31.0
# (trimmed): the explicit AITER request, raising and falling back
ORACLE_FP8_026 = """
def _make_log_unsupported(backend, reason):
    if reason:
        return (
            f"FP8 MoE backend {backend.value} does not support the "
            f"deployment configuration since {reason}."
        )
def select(config):
    if envs.is_set("VLLM_ROCM_USE_AITER") or envs.is_set("VLLM_ROCM_USE_AITER_MOE"):
        if not envs.VLLM_ROCM_USE_AITER or not envs.VLLM_ROCM_USE_AITER_MOE:
            AVAILABLE_BACKENDS.remove(Fp8MoeBackend.AITER)
        else:
            backend = Fp8MoeBackend.AITER
            return _return_or_raise(backend, config)
"""
ORACLE_UNQUANTIZED_031 = """
def select(config):
    if envs.is_set("VLLM_ROCM_USE_AITER") or envs.is_set("VLLM_ROCM_USE_AITER_MOE"):
        skip_aiter_moe = (
            not envs.VLLM_ROCM_USE_AITER
            or not envs.VLLM_ROCM_USE_AITER_MOE
            or rocm_aiter_ops.is_rdna_aiter_enabled()
        )
        if skip_aiter_moe:
            AVAILABLE_BACKENDS.remove(UnquantizedMoeBackend.AITER)
        else:
            backend = UnquantizedMoeBackend.AITER
            logger.warning_once("falling back")
            AVAILABLE_BACKENDS.remove(UnquantizedMoeBackend.AITER)
"""


def test_aiter_moe_request_extractor(tmp_path):
    oracle = "model_executor/layers/fused_moe/oracle/"
    out = _extractor("aiter_moe_request").extract(
        release(
            tmp_path,
            "0.31.0",
            {f"{oracle}fp8.py": ORACLE_FP8_026, f"{oracle}unquantized.py": ORACLE_UNQUANTIZED_031},
        )
    )
    assert out["fp8"] == {
        "raises": True,
        "label": "FP8 MoE backend",
        "switches": ["VLLM_ROCM_USE_AITER", "VLLM_ROCM_USE_AITER_MOE"],
        "skipped_when": [],
    }
    assert out["unquantized"]["raises"] is False
    assert out["unquantized"]["skipped_when"] == ["rdna_aiter"]


def moe_facts(tmp_path, gpu: str, version: str, env: str, quantization: dict | None):
    import json

    config = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "num_hidden_layers": 48,
        "vocab_size": 151936,
        "max_position_embeddings": 40960,
        "torch_dtype": "bfloat16",
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 768,
    }
    if quantization:
        config["quantization_config"] = quantization
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return collect_facts(
        CollectOptions(
            serve_string=f"{env} vllm serve org/moe".strip(),
            model_config=str(path),
            vllm_version=version,
            target=TargetHardware(gpu=gpu, count=1),
            probe_machine=False,
            environ={},
            offline=True,
        )
    )


FP8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}


@pytest.mark.parametrize(
    ("gpu", "version", "env", "quantization", "refused"),
    [
        ("Radeon 8060S", "0.26.0", "VLLM_ROCM_USE_AITER=1", FP8, True),
        ("Radeon 8060S", "0.26.0", "VLLM_ROCM_USE_AITER=1", None, True),  # unquantized oracle
        ("Radeon 8060S", "0.31.0", "VLLM_ROCM_USE_AITER=1", None, False),  # falls back
        ("Radeon 8060S", "0.26.0", "VLLM_ROCM_USE_AITER=1 VLLM_ROCM_USE_AITER_MOE=0", FP8, False),
        ("Radeon 8060S", "0.26.0", "", FP8, False),  # no request
        ("MI300X", "0.26.0", "VLLM_ROCM_USE_AITER=1", FP8, False),  # AITER's experts run
        ("Radeon AI PRO R9700", "0.26.0", "VLLM_ROCM_USE_AITER=1", FP8, True),
        ("Radeon AI PRO R9700", "0.28.0", "VLLM_ROCM_USE_AITER=1", FP8, False),  # RDNA4 skip
        ("Radeon 8060S", "0.14.0", "VLLM_ROCM_USE_AITER=1", FP8, False),  # no request yet
    ],
)
def test_aiter_moe_request_refused(tmp_path, gpu, version, env, quantization, refused):
    facts = moe_facts(tmp_path, gpu, version, env, quantization)
    assert facts.value("release.aiter_moe_refused") is refused
    assert "fused_moe/oracle/" in facts.get("release.aiter_moe_refused").detail


def test_aiter_moe_request_not_on_nvidia(tmp_path):
    facts = moe_facts(tmp_path, "H100", "0.26.0", "VLLM_ROCM_USE_AITER=1", FP8)
    assert "release.aiter_moe_refused" not in facts
    assert not facts.why_missing("release.aiter_moe_refused")


def test_a_dev_build_is_judged_by_every_release_it_may_resemble():
    # Qwen3: V2 by default from 0.22.0, not in 0.20.1-0.21.0; a main build of 2026-05-21
    # (vLLM issue 43381: it already had 0.22.0's default) may be any of 0.20.1-0.23.0
    line = "vllm serve Qwen/Qwen3-8B"
    dated = facts_for(line, "0.20.2rc1.dev562+g1c78f76c2.d20260521", gpu="RTX 4090")
    assert "release.model_runner_v2" not in dated
    reason = dated.why_missing("release.model_runner_v2")
    assert "0.20.1–0.21.0: off; 0.22.0–0.23.0: auto" in reason
    assert "git commit 1c78f76c2" in reason
    # without the day the version does not stop at 0.21.0 either (that build is after it)
    plain = facts_for(line, "0.20.2rc1.dev562+g1c78f76c2", gpu="RTX 4090")
    assert "0.22.0–0.23.0: auto" in plain.why_missing("release.model_runner_v2")
    # a release is judged as itself
    assert facts_for(line, "0.21.0", gpu="RTX 4090").value("release.model_runner_v2") == "off"


# vLLM 0.14.1's v1/sample/ops/topk_topp_sampler.py (trimmed): VLLM_USE_FLASHINFER_SAMPLER is
# None unless set, and only truth-tested; VLLM_USE_V2_MODEL_RUNNER's None is told apart
# (config/vllm.py of 0.22.0 hands it on, then `if use_v2_model_runner is not None:`)
ENVS_NONE = """
import os
environment_variables = {
    "VLLM_USE_FLASHINFER_SAMPLER": lambda: bool(int(os.environ["VLLM_USE_FLASHINFER_SAMPLER"]))
    if "VLLM_USE_FLASHINFER_SAMPLER" in os.environ
    else None,
    "VLLM_USE_V2_MODEL_RUNNER": lambda: maybe_convert_bool(
        os.getenv("VLLM_USE_V2_MODEL_RUNNER", None)
    ),
    "VLLM_NEVER_READ": lambda: os.getenv("VLLM_NEVER_READ", None),
    "VLLM_USE_DEEP_GEMM": lambda: bool(int(os.getenv("VLLM_USE_DEEP_GEMM", "1"))),
}
def maybe_convert_bool(value):
    if value is None:
        return None
    return bool(int(value))
"""
SAMPLER_0141 = """
import vllm.envs as envs
class TopKTopPSampler:
    def __init__(self):
        if current_platform.is_cuda():
            if envs.VLLM_USE_FLASHINFER_SAMPLER:
                self.forward = self.forward_cuda
            else:
                self.forward = self.forward_native
"""
CONFIG_NONE = """
import vllm.envs as envs
def use_v2_model_runner(self):
    use_v2_model_runner = envs.VLLM_USE_V2_MODEL_RUNNER
    if use_v2_model_runner is not None:
        return use_v2_model_runner
    return self.default_runner
"""


def test_envs_extractor_records_how_the_release_reads_a_none_default(tmp_path):
    files = {
        "envs.py": ENVS_NONE,
        "v1/sample/ops/topk_topp_sampler.py": SAMPLER_0141,
        "config/vllm.py": CONFIG_NONE,
    }
    out = _extractor("envs").extract(release(tmp_path, "0.14.1", files))
    assert out["VLLM_USE_FLASHINFER_SAMPLER"]["none_reads"] == "off"
    assert out["VLLM_USE_V2_MODEL_RUNNER"]["none_reads"] == "own"
    assert out["VLLM_NEVER_READ"]["none_reads"] == "unread"
    assert "none_reads" not in out["VLLM_USE_DEEP_GEMM"]  # its default is not None


def test_a_none_default_the_release_only_truth_tests_reads_as_off(tmp_path):
    from vllm_doctor import knowledge

    # generated from the real wheels: 0.14.1's sampler tests `if envs.VLLM_USE_FLASHINFER_SAMPLER:`
    envs = knowledge.load("envs")
    assert envs.at("0.14.1")["VLLM_USE_FLASHINFER_SAMPLER"]["none_reads"] == "off"
    # 0.22.0's config/vllm.py: `use_v2_model_runner = envs.VLLM_USE_V2_MODEL_RUNNER` then
    # `if use_v2_model_runner is not None:` (None: the release chooses)
    assert envs.at("0.22.0")["VLLM_USE_V2_MODEL_RUNNER"]["none_reads"] == "own"
    line = "vllm serve Qwen/Qwen3-8B"
    facts = facts_for(line, "0.14.1", gpu="H100")
    sampler = facts.get("release.env.VLLM_USE_FLASHINFER_SAMPLER")
    assert sampler.value is False and "truth test" in sampler.detail
    assert facts.value("release.flashinfer_sampler_jit") is False
    # set, it is what the user set
    on = facts_for("VLLM_USE_FLASHINFER_SAMPLER=1 " + line, "0.14.1", gpu="H100")
    assert on.value("release.env.VLLM_USE_FLASHINFER_SAMPLER") is True
    # a None the release tells apart stays open to the release's own choice
    later = facts_for(line, "0.22.0", gpu="H100")
    assert "release.env.VLLM_USE_V2_MODEL_RUNNER" not in later
    assert later.value("release.model_runner_v2") == "auto"
    # the environment not known (a report without its section): not known, not off
    report = tmp_path / "collect-env.txt"
    report.write_text("vLLM Version                 : 0.14.1\n")
    unknown = collect_facts(
        CollectOptions(serve_string=line, report=report, probe_machine=False, offline=True)
    )
    assert unknown.value("vllm.version") == "0.14.1"
    assert "release.env.VLLM_USE_FLASHINFER_SAMPLER" not in unknown
    assert unknown.why_missing("release.env.VLLM_USE_FLASHINFER_SAMPLER")
