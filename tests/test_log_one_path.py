"""`explain --log` and `check --log` say the same of one log: the same rules, each with the same
cause, fixes and workarounds (the environment settings included), decided by one engine path
(engine/logreport.py over engine/evaluate.py). A message a package around vLLM raises is never
put on vLLM's account because the two share words."""

from __future__ import annotations

import json
import subprocess

import pytest
from doctor_forks import doctor_run

# FlashInfer's JIT finding no nvcc (its cpp_ext.get_cuda_path), in an engine core's traceback,
# and, further up, a message vLLM itself raises (compilation/passes/fx_utils.py)
FLASHINFER_NO_NVCC = """\
(EngineCore_DP0 pid=2215) ERROR 11-02 10:11:10 [core.py:708] AssertionError: Could not find auto_functionalized in nodes [add, mul]
(EngineCore_DP0 pid=2215) ERROR 11-02 10:11:12 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=2215) ERROR 11-02 10:11:12 [core.py:708] Traceback (most recent call last):
(EngineCore_DP0 pid=2215) ERROR 11-02 10:11:12 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/flashinfer/jit/cpp_ext.py", line 90, in get_cuda_path
(EngineCore_DP0 pid=2215) ERROR 11-02 10:11:12 [core.py:708]     raise RuntimeError(
(EngineCore_DP0 pid=2215) ERROR 11-02 10:11:12 [core.py:708] RuntimeError: Could not find nvcc and default cuda_home='/usr/local/cuda' doesn't exist
"""

# forked workers after the parent touched CUDA (vllm issue 7077's lines): ENV007, whose
# workaround sets an environment variable
FORKED_WORKERS = """\
(VllmWorkerProcess pid=13359) ERROR 08-02 18:15:15 multiproc_worker_utils.py:226]     raise RuntimeError(
(VllmWorkerProcess pid=13359) ERROR 08-02 18:15:15 multiproc_worker_utils.py:226] RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method
"""


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return doctor_run(*args, timeout=120)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("logs")
    paths = {}
    for name, text in (("flashinfer", FLASHINFER_NO_NVCC), ("forked", FORKED_WORKERS)):
        paths[name] = folder / f"{name}.log"
        paths[name].write_text(text, encoding="utf-8")
    return paths


def test_a_package_message_is_not_put_on_a_vllm_message(logs):
    explained = json.loads(doctor("explain", "--log", str(logs["flashinfer"]), "-f", "json").stdout)
    checked = json.JSONDecoder().raw_decode(
        doctor("check", "--log", str(logs["flashinfer"]), "--format", "json").stdout
    )[0]
    for messages in (explained["vllm_messages"], checked["log_messages"]):
        lines = {m["matched_line"]: m["template"] for m in messages}
        # vLLM's own assertion is named on its own line ...
        assert any("auto_functionalized" in line for line in lines), lines
        # ... and FlashInfer's RuntimeError is nobody's vLLM message
        assert not [t for line, t in lines.items() if "Could not find nvcc" in line], lines


def test_explain_and_check_name_the_same_rules_with_the_same_workarounds(logs):
    explained = json.loads(doctor("explain", "--log", str(logs["forked"]), "-f", "json").stdout)
    checked = json.JSONDecoder().raw_decode(
        doctor("check", "--log", str(logs["forked"]), "--format", "json").stdout
    )[0]
    seen = {
        f["code"]: (f["log_reading"], f["workarounds"], f["fix"])
        for f in checked["findings"]
        if f["verdict"] == "applies" and f["log_matches"]
    }
    said = {
        f["code"]: (f["log_reading"], f["workarounds"], f["fix"])
        for f in explained["known_failures"]
    }
    assert said == seen and "ENV007" in said
    # the workaround's environment setting is printed by both, the same way
    explain_text = doctor("explain", "--log", str(logs["forked"])).stdout
    check_text = doctor("check", "--log", str(logs["forked"]), "--fail-on", "never").stdout
    for text in (explain_text, check_text):
        assert "export VLLM_WORKER_MULTIPROC_METHOD=spawn" in text, text
