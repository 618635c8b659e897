"""AITER's tuned fused-MoE shapes per version (tools/aiter_tuned.py) and the fact that compares
the model's per-rank shape with them (derived.aiter_moe_untuned)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.scripts import load_script
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.facts.hardware import TargetHardware

REPO = Path(__file__).resolve().parent.parent
TOOL = load_script(REPO / "tools" / "aiter_tuned.py", "aiter_tuned_tool")
PATH = "derived.aiter_moe_untuned"

HEADER = "cu_num,token,model_dim,inter_dim,expert,topk,act_type,dtype,q_dtype_a,q_dtype_w,q_type,use_g1u1,doweight_stage1,block_m,ksplit,us1,kernelName1"
ROW_BF16 = "304,16,2048,192,128,8,ActivationType.Silu,torch.bfloat16,torch.bfloat16,torch.bfloat16,QuantType.No,1,0,32,0,1.0,k"
ROW_FP8 = "256,16,4096,384,128,8,ActivationType.Silu,torch.bfloat16,torch.float8_e4m3fn,torch.float8_e4m3fn,QuantType.per_Token,1,0,32,0,1.0,k"
DISPATCH = "def get_2stage_cfgs(token):\n    cfg = None\n    if cfg is None:\n        ksplit = 0\n"
CHIP_INFO = '_LEGACY_CU_NUM_TO_GFX = {\n    256: "gfx950",\n    304: "gfx942",\n}\n'
CORE_MERGING = "model_config_dir = 'aiter/configs/model_configs/'\n"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
    )


def _commit(repo: Path, files: dict[str, str], tag: str) -> None:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", tag)
    _git(repo, "tag", tag)


@pytest.fixture
def aiter_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "aiter"
    repo.mkdir()
    _git(repo, "init", "-q")
    base = {
        "aiter/configs/tuned_fmoe.csv": f"{HEADER}\n{ROW_BF16}\n",
        "aiter/fused_moe.py": DISPATCH,
        "aiter/jit/core.py": "",
    }
    _commit(repo, base, "v0.1.5")
    # a later version merges the model tables (not the untuned ones) and has the cu_num table
    _commit(
        repo,
        {
            "aiter/jit/core.py": CORE_MERGING,
            "aiter/jit/utils/chip_info.py": CHIP_INFO,
            "aiter/configs/model_configs/a8w8_tuned_fmoe_x.csv": f"{HEADER}\n{ROW_FP8}\n",
            "aiter/configs/model_configs/a8w8_untuned_fmoe_x.csv": (
                f"{HEADER}\n{ROW_FP8.replace('4096', '9999')}\n"
            ),
        },
        "v0.1.6",
    )
    _commit(repo, {"aiter/fused_moe.py": DISPATCH + "# rc\n"}, "v0.1.7-rc1")
    return repo / ".git"


def test_generator_reads_each_release_tag(aiter_repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "table.json"
    assert TOOL.main([str(aiter_repo), "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["releases"] == ["0.1.5", "0.1.6"]  # the release candidate is skipped
    entries = data["entries"]
    # the bf16 row keyed on cu_num 304 alone: gfx942 from the newest tag's table in 0.1.5
    assert entries["shape:gfx942:2048:192:128:8"] == [
        {
            "first": "0.1.5",
            "last": "0.1.6",
            "value": {"cu_num": [304], "quant": ["Silu/bfloat16/bfloat16/bfloat16/No"]},
        }
    ]
    fp8 = entries["shape:gfx950:4096:384:128:8"]
    assert [(s["first"], s["last"]) for s in fp8] == [("0.1.6", "0.1.6")]
    assert fp8[0]["value"]["quant"] == ["Silu/bfloat16/float8_e4m3fn/float8_e4m3fn/per_Token"]
    assert not any(":9999:" in key for key in entries)  # untuned tables are not read
    assert entries["@untuned"][0]["value"]["answer"] == "default_heuristics"


def test_generator_refuses_a_directory_that_is_not_git(tmp_path: Path, capsys) -> None:
    assert TOOL.main([str(tmp_path), "--out", str(tmp_path / "t.json")]) == 2
    assert "not a git directory" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("source", "answer"),
    [
        (DISPATCH, "default_heuristics"),
        (
            "def get_2stage_cfgs():\n    if cfg is None:\n        raise RuntimeError('x')\n",
            "asserts",
        ),
        ("def other():\n    pass\n", "unknown"),
    ],
)
def test_untuned_answer(source: str, answer: str) -> None:
    assert TOOL.untuned_answer(source) == answer


HY3 = {
    "architectures": ["HYV3ForCausalLM"],
    "model_type": "hy_v3",
    "hidden_size": 4096,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "moe_intermediate_size": 1536,
    "num_experts": 192,
    "num_experts_per_tok": 8,
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "fp8", "activation_scheme": "static"},
}
QWEN3_MOE = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "hidden_size": 2048,
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "torch_dtype": "bfloat16",
}


def _facts(tmp_path: Path, config: dict, serve: str, gpu: str, packages: dict[str, str]):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return collect_facts(
        CollectOptions(
            serve_string=f"VLLM_ROCM_USE_AITER=1 vllm serve org/moe {serve}".strip(),
            model_config=str(path),
            vllm_version="0.23.0",
            target=TargetHardware(gpu=gpu, count=8),
            packages=packages,
            probe_machine=False,
            environ={},
            offline=True,
        )
    )


def test_hy3_fp8_at_tp8_is_untuned(tmp_path: Path) -> None:
    facts = _facts(tmp_path, HY3, "-tp 8", "MI355X", {"amd-aiter": "0.1.16.post2"})
    assert facts.value(PATH) is True
    detail = facts.get(PATH).detail
    assert "inter_dim 192" in detail and "moe_intermediate_size 1536 / TP 8" in detail
    assert "default heuristics" in detail


def test_a_tuned_bf16_shape(tmp_path: Path) -> None:
    facts = _facts(tmp_path, QWEN3_MOE, "-tp 4", "MI300X", {"aiter": "0.1.16.post2"})
    assert facts.value(PATH) is False
    assert "bfloat16/No" in facts.get(PATH).detail


@pytest.mark.parametrize(
    ("config", "serve", "packages", "reason"),
    [
        (HY3, "-tp 8", {}, "AITER version is not known"),
        (HY3, "-tp 8", {"amd-aiter": "0.0.9"}, "older than the oldest"),
        (HY3, "-tp 8 --enable-expert-parallel", {"amd-aiter": "0.1.16.post2"}, "expert parallel"),
        (
            {**HY3, "quantization_config": {"quant_method": "mxfp4"}},
            "-tp 8",
            {"amd-aiter": "0.1.16.post2"},
            "pad the per-rank",
        ),
        # an FP8 shape tuned for some FP8 scheme: which one vLLM passes is not generated
        (
            {
                **QWEN3_MOE,
                "hidden_size": 4096,
                "moe_intermediate_size": 1536,
                "quantization_config": {"quant_method": "fp8"},
            },
            "-tp 4",
            {"amd-aiter": "0.1.16.post2"},
            "FP8 q_type",
        ),
    ],
)
def test_undecided_names_the_reason(tmp_path, config, serve, packages, reason) -> None:
    facts = _facts(tmp_path, config, serve, "MI355X", packages)
    assert PATH not in facts
    assert reason in (facts.why_missing(PATH) or "")


def test_absent_on_nvidia(tmp_path: Path) -> None:
    facts = _facts(tmp_path, HY3, "-tp 8", "H100", {"amd-aiter": "0.1.16.post2"})
    assert PATH not in facts
    assert not facts.why_missing(PATH)


def test_kept_when_judged_over_each_release(tmp_path: Path) -> None:
    # with the vLLM version unknown the rules are judged over every covered release, whose
    # release.* facts are recomputed: the AITER shape does not follow the vLLM release
    from vllm_doctor.engine.over_releases import facts_for_release

    facts = _facts(tmp_path, HY3, "-tp 8", "MI355X", {"amd-aiter": "0.1.16.post2"})
    assert facts_for_release(facts, "0.26.0").value(PATH) is True


def test_a_corrected_serve_line_recomputes_the_shape(tmp_path: Path) -> None:
    from vllm_doctor.facts.collect import with_serve_line

    facts = _facts(tmp_path, QWEN3_MOE, "-tp 4", "MI300X", {"aiter": "0.1.16.post2"})
    assert facts.value(PATH) is False  # 768 / 4 = 192 is tuned on gfx942
    other = with_serve_line(facts, ["vllm", "serve", "org/moe", "-tp", "2"])
    assert other.value(PATH) is True  # 768 / 2 = 384 is not
    assert "moe_intermediate_size 768 / TP 2" in other.get(PATH).detail
