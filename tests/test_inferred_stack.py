"""What a vLLM release brings (torch pin and its CUDA builds, transformers bounds, the dtype
`--dtype auto` resolves to), and rules judged over every covered release when the version is
unknown: every release = applies, some = a warning naming vllm.version, none = not applies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_inferred_hardware import doctor

from vllm_doctor.engine.conditions import compile_condition
from vllm_doctor.engine.over_releases import spans
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.release import collect_release
from vllm_doctor.facts.stack import infer_stack

HERE = Path(__file__).parent


def write_config(
    tmp_path: Path, architecture: str = "LlamaForCausalLM", dtype: str = "bfloat16"
) -> Path:
    config = {
        "architectures": [architecture],
        "model_type": "llama",
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "torch_dtype": dtype,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def check_json(*args: str) -> dict:
    result = doctor("check", "--format", "json", *args)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def finding(data: dict, code: str) -> dict | None:
    return next((f for f in data["findings"] if f["code"] == code), None)


def test_torch_and_its_cuda_builds_from_the_releases_pin():
    facts = Facts.from_flat({"vllm.version": "0.8.5.post1"}, Source.REPORT)
    infer_stack(facts)
    torch, cuda = facts.get("torch.version"), facts.get("torch.cuda_version")
    assert torch.value == "2.6.0" and torch.inferred and "torch==2.6.0" in torch.detail
    # the PyPI wheel is cu124; the cu118 build cannot load vLLM's libcudart.so.12 ops
    assert cuda.value == "12.4" and cuda.possible == ["12.4", "12.6"]
    below = compile_condition({"fact": "torch.cuda_version", "version": "<12.8"})
    assert below.evaluate(facts).value is True
    # newer pins whose builds the table does not list: any minor of vLLM's CUDA major
    new = Facts.from_flat({"vllm.version": "0.33.0"}, Source.REPORT)
    infer_stack(new)
    assert new.get("torch.cuda_version").possible == ">=13.0,<14.0"
    # a collected torch is never replaced
    seen = Facts.from_flat(
        {
            "vllm.version": "0.8.5.post1",
            "torch.version": "2.6.0+cu126",
            "torch.cuda_version": "12.6",
        },
        Source.REPORT,
    )
    infer_stack(seen)
    assert seen.get("torch.cuda_version").source == Source.REPORT


def test_transformers_bounds_decide_where_the_range_agrees():
    facts = Facts.from_flat({"vllm.version": "0.33.0"}, Source.REPORT)
    infer_stack(facts)
    transformers = facts.get("packages.transformers")
    assert transformers.inferred and transformers.possible == "<5.21.0,>=5.16.1"
    new_enough = compile_condition({"fact": "packages.transformers", "version": ">=5.15.0"})
    too_old = compile_condition({"fact": "packages.transformers", "version": "<5.5.0"})
    assert new_enough.evaluate(facts).value is True and too_old.evaluate(facts).value is False
    open_ended = Facts.from_flat({"vllm.version": "0.24.0"}, Source.REPORT)
    infer_stack(open_ended)  # >=5.5.3: a rule on >=5.15.0 cannot be decided
    assert new_enough.evaluate(open_ended).value is None


def test_rtx_5090_with_the_torch_vllm_0_8_5_pins(tmp_path):
    data = check_json(
        "--gpu", "RTX 5090", "--vllm-version", "0.8.5.post1", "--", "vllm", "serve", "m"
    )
    env003 = finding(data, "ENV003")
    assert env003 is not None and env003["severity"] == "error"
    cuda = next(e for e in env003["evidence"] if e["fact"] == "torch.cuda_version")
    assert cuda["inferred"] is True and "torch 2.6.0" in cuda["source"]


@pytest.mark.parametrize(
    "release, serve_dtype, capability, expected",
    [
        ("0.8.5.post1", None, 70, "bfloat16"),  # auto took the checkpoint's dtype as it was
        ("0.9.0", None, 70, "float16"),  # PR 17265: fallback on pre-Ampere GPUs
        ("0.33.0", None, 70, "float16"),
        ("0.33.0", None, 90, "bfloat16"),
        ("0.33.0", "half", 90, "float16"),
    ],
)
def test_effective_dtype_as_each_release_resolves_auto(release, serve_dtype, capability, expected):
    flat = {
        "vllm.version": release,
        "model.dtype": "bfloat16",
        "model.model_type": "llama",
        "gpu.min_capability": capability,
    }
    if serve_dtype:
        flat["serve.dtype"] = serve_dtype
    facts = Facts.from_flat(flat, Source.REPORT)
    collect_release(facts)
    assert facts.value("release.effective_dtype") == expected


def test_float32_checkpoint_on_ampere_differs_between_releases():
    def resolved(release: str) -> str:
        facts = Facts.from_flat(
            {
                "vllm.version": release,
                "model.dtype": "float32",
                "model.model_type": "llama",
                "gpu.min_capability": 80,
            },
            Source.REPORT,
        )
        collect_release(facts)
        return facts.value("release.effective_dtype")

    assert resolved("0.8.0") == "float16" and resolved("0.9.0") == "float16"
    assert resolved("0.9.1") == "bfloat16"  # _resolve_auto_dtype: the platform's first


def test_unknown_version_some_releases_is_a_warning_naming_the_version(tmp_path):
    config = write_config(tmp_path)
    data = check_json("--gpu", "V100", "--model-config", str(config), "--", "vllm", "serve", "m")
    hw003 = finding(data, "HW003")
    assert hw003 is not None and hw003["severity"] == "warning"  # an error rule, capped
    assert "applies in 0.8.0–0.8.5.post1" in hw003["fix_state"]["detail"]
    assert [m["fact"] for m in hw003["missing"]] == ["vllm.version"]
    # the same line with the version known is decided: an error on 0.8.5, nothing on 0.9.0
    old = check_json(
        "--gpu",
        "V100",
        "--vllm-version",
        "0.8.5",
        "--model-config",
        str(config),
        "--",
        "vllm",
        "serve",
        "m",
    )
    assert finding(old, "HW003")["severity"] == "error"
    new = check_json(
        "--gpu",
        "V100",
        "--vllm-version",
        "0.9.0",
        "--model-config",
        str(config),
        "--",
        "vllm",
        "serve",
        "m",
    )
    assert finding(new, "HW003") is None and "HW003" in new["not_applicable"]


def test_unknown_version_every_release_is_as_good_as_applies(tmp_path):
    config = write_config(tmp_path, architecture="FooBarForCausalLM")
    data = check_json(
        "--model-config", str(config), "--", "vllm", "serve", "m", "--model-impl", "vllm"
    )
    model101 = finding(data, "MODEL101")
    assert model101 is not None and model101["severity"] == "error"
    assert model101["fix_state"]["detail"].startswith("applies in every release 0.8.0–")
    # a registered architecture: in no release
    fine = check_json(
        "--model-config",
        str(write_config(tmp_path)),
        "--",
        "vllm",
        "serve",
        "m",
        "--model-impl",
        "vllm",
    )
    assert "MODEL101" in fine["not_applicable"]


def test_spans_group_consecutive_releases():
    releases = ["0.8.0", "0.8.1", "0.9.0", "0.10.0", "0.11.0"]
    assert spans(releases, {"0.8.0", "0.8.1", "0.10.0"}) == "0.8.0–0.8.1, 0.10.0"


def test_unknown_version_judges_the_release_gates_of_each_release():
    """The release's own gates (Model Runner V2's default, release.env) are recomputed per
    release: under WSL2 with the version unknown, ENV110 is a warning where the releases
    choose V2 by themselves (0.22.0 on), never 'applies in no release'."""
    data = check_json("--platform", "wsl2", "--select", "ENV110")
    env110 = finding(data, "ENV110")
    assert env110 is not None and env110["severity"] == "warning"
    assert env110["fix_state"]["detail"].startswith("applies in 0.22.0–")
    assert [m["fact"] for m in env110["missing"]] == ["vllm.version"]
    # V1 forced: no release takes V2, so it applies in none
    forced = check_json(
        "--platform",
        "wsl2",
        "--select",
        "ENV110",
        "--serve",
        "VLLM_USE_V2_MODEL_RUNNER=0 vllm serve m",
    )
    assert finding(forced, "ENV110") is None and "ENV110" in forced["not_applicable"]
