"""config.json and the weights' size from the Hub, against a local server with the Hub's
layout (tests/hub_server.py, 127.0.0.1 only): on by default, --offline / HF_HUB_OFFLINE
forbid it, a gated, missing or unreachable model is a reason on the undecided facts (never a
failure), and a cached config never goes near the network."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from doctor_forks import doctor_run
from hub_server import FakeHub, Repo, safetensors_file

HERE = Path(__file__).parent
LLAMA = HERE.parent / "vllm_doctor" / "examples" / "healthy-h100-llama" / "model"
CONFIG = json.loads((LLAMA / "config.json").read_text())  # 32 attention heads
INDEX = (LLAMA / "model.safetensors.index.json").read_bytes()


def hub_repos() -> dict[str, Repo]:
    config = json.dumps(CONFIG).encode()
    small = safetensors_file({"embed": ("BF16", [64, 32]), "norm": ("F32", [32])})
    return {
        "org/model": Repo(
            {"config.json": config, "model.safetensors": small, "README.md": b"# a model"}
        ),
        "org/sharded": Repo(
            {"config.json": config, "model.safetensors.index.json": INDEX},
            sha="fedcba9876543210fedcba9876543210fedcba98",
        ),
        "org/gated": Repo({"config.json": config}, gated=True),
    }


def run(hub_url: str, home: Path, *args: str, env: dict[str, str] | None = None):
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "VLLM_"))}
    environ.update(
        {
            "HF_ENDPOINT": hub_url,
            "HF_HOME": str(home),
            "VLLM_DOCTOR_CACHE_DIR": str(home / "doctor-cache"),
        },
        **(env or {}),
    )
    return doctor_run("check", "--format", "json", *args, env=environ, timeout=120)


@pytest.fixture
def hub():
    with FakeHub(hub_repos()) as server:
        yield server


def finding(data: dict, code: str, key: str = "findings") -> dict | None:
    return next((f for f in data[key] if f["code"] == code), None)


def test_par001_from_the_hubs_config(hub, tmp_path):
    result = run(hub.url, tmp_path, "--", "vllm", "serve", "org/model", "-tp", "3")
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    heads = next(
        e for e in finding(data, "PAR001")["evidence"] if e["fact"] == "model.num_attention_heads"
    )
    assert heads["value"] == 32
    assert heads["source"].startswith("config.json (Hub: org/model@0123456789ab")
    facts = data["facts"]["facts"]
    assert facts["model.weights_dtypes"]["value"] == ["BF16", "F32"]  # from the header
    assert facts["model.weights_bytes"]["value"] == len(
        hub.repos["org/model"].files["model.safetensors"]
    )
    # the weights were never downloaded: only the header's byte range
    assert not list(tmp_path.rglob("model.safetensors"))
    # the second run reads the cache and asks the Hub nothing
    hub.requests.clear()
    again = run(hub.url, tmp_path, "--", "vllm", "serve", "org/model", "-tp", "3")
    assert again.returncode == 1 and hub.requests == []
    # from the doctor's own cache: nothing was written into the Hugging Face cache
    source = finding(json.loads(again.stdout), "PAR001")["evidence"][1]["source"]
    assert "Hub: org/model@0123456789ab, cached by vllm-doctor" in source
    assert not (tmp_path / "hub").exists()
    assert [p.name for p in (tmp_path / "doctor-cache" / "hub").glob("*/*/config.json")] == [
        "config.json"
    ]


@pytest.mark.parametrize("how", [["--offline"], []])
def test_offline_leaves_it_undecided_and_says_why(hub, tmp_path, how):
    env = {} if how else {"HF_HUB_OFFLINE": "1"}
    result = run(hub.url, tmp_path, *how, "--", "vllm", "serve", "org/model", "-tp", "3", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    par001 = finding(data, "PAR001", "undecided")
    reasons = " ".join(m["reason"] for m in par001["missing"])
    assert ("--offline: the Hub was not asked" if how else "HF_HUB_OFFLINE") in reasons
    assert not any(r.startswith(("GET /api/models", "HEAD")) for r in hub.requests)


def test_sharded_weights_from_the_index_feed_the_memory_estimate(hub, tmp_path):
    result = run(
        hub.url,
        tmp_path,
        "--gpu",
        "RTX 3090",
        "--vllm-version",
        "0.33.0",
        "--",
        "vllm",
        "serve",
        "org/sharded",
        "--max-model-len",
        "262144",
    )
    data = json.loads(result.stdout)
    weights = data["facts"]["facts"]["model.weights_bytes"]
    assert weights["value"] == json.loads(INDEX)["metadata"]["total_size"]
    assert "MEM001" in {f["code"] for f in data["findings"]}


def test_gated_model_needs_a_token(hub, tmp_path):
    result = run(hub.url, tmp_path, "--", "vllm", "serve", "org/gated", "-tp", "3")
    assert result.returncode == 0, result.stderr  # undecided, not a failure of the gate
    reasons = " ".join(
        m["reason"] for m in finding(json.loads(result.stdout), "PAR001", "undecided")["missing"]
    )
    assert "gated" in reasons and "HF_TOKEN" in reasons
    with_token = run(
        hub.url,
        tmp_path / "t",
        "--",
        "vllm",
        "serve",
        "org/gated",
        "-tp",
        "3",
        env={"HF_TOKEN": "hf_test_token"},
    )
    assert finding(json.loads(with_token.stdout), "PAR001") is not None


def test_missing_model_and_unreachable_hub_are_reasons(hub, tmp_path):
    missing = run(hub.url, tmp_path, "--", "vllm", "serve", "org/nothing", "-tp", "3")
    assert missing.returncode == 0
    assert "is not on the Hub" in json.dumps(json.loads(missing.stdout)["facts"]["missing"])
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    down = run(closed, tmp_path, "--", "vllm", "serve", "org/model", "-tp", "3")
    assert down.returncode == 0, down.stderr
    assert "could not be reached" in json.loads(down.stdout)["facts"]["missing"]["model"]
