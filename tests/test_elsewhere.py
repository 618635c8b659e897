"""`check --elsewhere`: triaging a setup that runs on another machine. This machine's packages,
GPUs, platform and environment must not stand in for facts the inputs lack (they would decide
rules about a machine nobody asked about); the model's config is still looked up here, since it
is the same wherever the model is served."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from doctor_forks import doctor_run

MODELS = Path(__file__).parent / "fixtures" / "models"
SERVE = ["--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]


def _check(tmp_path: Path, *extra: str) -> dict:
    cache = tmp_path / "hub"
    snapshot = cache / "models--meta-llama--Llama-3.1-8B-Instruct" / "snapshots" / "r1"
    if not snapshot.exists():
        shutil.copytree(MODELS / "Llama-3.1-8B-Instruct", snapshot)
    env = {
        **os.environ,
        "HF_HUB_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
        "VLLM_ATTENTION_BACKEND": "FLASHINFER",
    }
    args = ["check", "--format", "json", "--no-config", "--fail-on", "never", *extra]
    result = doctor_run(*args, "--vllm-version", "0.26.0", *SERVE, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["facts"]


def test_elsewhere_reads_nothing_of_this_machine_but_the_model_config(tmp_path):
    here = _check(tmp_path)
    assert here["facts"]["env.VLLM_ATTENTION_BACKEND"]["value"] == "FLASHINFER"

    there = _check(tmp_path, "--elsewhere")
    assert not any(path.startswith("env.") for path in there["facts"])
    # the environment is the inputs' statement, as a collect-env report's listing is
    assert "env" not in there["missing"]
    for area in ("gpu", "packages", "driver"):
        assert "--elsewhere" in there["missing"][area]
    # the config is the same on every machine: still read from this one's Hugging Face cache
    assert there["facts"]["model.num_hidden_layers"]["value"] == 32
    assert there["facts"]["vllm.version"]["value"] == "0.26.0"


def test_elsewhere_takes_the_variables_the_serve_line_sets(tmp_path):
    cache = tmp_path / "hub"
    cache.mkdir()
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "VLLM_USE_V1": "0"}
    line = "VLLM_ATTENTION_BACKEND=FLASHINFER vllm serve meta-llama/Llama-3.1-8B-Instruct"
    result = doctor_run(
        "check", "--elsewhere", "--offline", "--no-config", "--format", "json",
        "--fail-on", "never", "--serve", line, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)["facts"]["facts"]
    assert facts["env.VLLM_ATTENTION_BACKEND"]["source"] == "serve line"
    assert "env.VLLM_USE_V1" not in facts


def test_a_gpu_named_for_another_machine_leaves_this_machines_model_files_unknown(tmp_path):
    """`--gpu` names the target's GPUs: a local model path missing from this machine's disk
    says nothing of the target's (five working club-3090 setups drew ENV066's error here)."""
    args = ["check", "--format", "json", "--no-config", "--fail-on", "never", "--offline"]
    line = ["--", "vllm", "serve", str(tmp_path / "no-such-model"), "-tp", "2"]
    there = doctor_run(*args, "--gpu", "RTX 5090", "--gpus", "2", *line, cwd=tmp_path)
    assert there.returncode == 0, there.stderr
    doc = json.loads(there.stdout)
    assert "host.model_copy" in doc["facts"]["unknowable"]
    assert "ENV066" not in {f["code"] for f in doc["findings"]}
    (env066,) = [f for f in doc["undecided"] if f["code"] == "ENV066"]
    assert env066["missing"] and env066["verdict"] == "undecided"
