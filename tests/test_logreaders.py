"""The crash-log readers on real logs (bench/explain/logs-3, each with its source in
index.json): every family names its cause and the command that fixes it, in `explain --log`
and in `check --log`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm_doctor.logreaders.abi import demangle, qualified_name

LOGS = Path(__file__).resolve().parents[1] / "bench" / "explain" / "logs-3"

# log -> (rule, text of the cause, text of a fix)
FAMILIES = {
    "15286.log": ("ENV211", "no native Windows build", "wsl --install"),  # platforms / imports
    "15592.log": ("ENV211", "source checkout", "VLLM_USE_PRECOMPILED=1 pip install -e ."),
    "vllm-windows-49.log": ("ENV211", "llguidance", "pip install 'llguidance"),  # imports
    "14401.log": ("ENV211", "from different times", "pip install -U lm-format-enforcer"),
    "8841.log": (
        "ENV212",
        "c10::Error::Error is torch's",
        "--no-build-isolation flash-attn",
    ),  # ABI
    "23925.log": ("ENV212", "partial or stale build", "rm -rf build"),
    "10459.log": (
        "HW209",
        "has no wheel for this machine",
        "pip install 'vllm>=0.10.2'",
    ),  # platforms
    "pr-12227.log": ("HW209", "macOS", "requirements/cpu.txt"),
    "18851.log": (
        "ENV213",
        "compile cache",
        "rm -rf ~/.cache/vllm/torch_compile_cache",
    ),  # compilers
    "16336.log": ("ENV213", "sm_100", "TRITON_PTXAS_PATH"),
    "28982.log": ("ENV213", "torch.compile", "-O0"),
    "31480.log": ("ATTN102", "sparse MLA", "compute capability 9.0, 10.0, 10.3"),  # vLLM's reasons
    "22193.log": ("ATTN102", "MLACommon", "VLLM_ATTENTION_BACKEND=FLEX_ATTENTION"),
    "16228.log": ("MODEL103", "no vLLM release's registry", "vllm.general_plugins"),  # plugins
}


def _reading(hits: list[dict], code: str) -> dict:
    (hit,) = [h for h in hits if h["code"] == code]
    return hit["log_reading"]


@pytest.mark.parametrize("log", sorted(FAMILIES))
def test_explain_log_names_cause_and_fix(log, capsys):
    from vllm_doctor.commands.explain import explain_log

    code, cause, fix = FAMILIES[log]
    assert explain_log(LOGS / log, None, "json") == 1
    reading = _reading(json.loads(capsys.readouterr().out)["known_failures"], code)
    assert cause in reading["cause"]
    assert any(fix in f for f in reading["fixes"])


@pytest.mark.parametrize("log", sorted(FAMILIES))
def test_check_log_says_what_explain_log_says(log, capsys):
    """`check --log` names the same rules as `explain --log` for what the log shows, each with
    the same reading (cause and fixes), on every family's example."""
    from typer.testing import CliRunner

    from vllm_doctor.cli import app
    from vllm_doctor.commands.explain import explain_log

    explain_log(LOGS / log, None, "json")
    explained = {
        h["code"]: h["log_reading"] for h in json.loads(capsys.readouterr().out)["known_failures"]
    }
    done = CliRunner().invoke(app, ["check", "--log", str(LOGS / log), "--format", "json"])
    doc = json.JSONDecoder().raw_decode(done.stdout)[0]
    checked = {
        f["code"]: f["log_reading"]
        for f in doc["findings"]
        if f["verdict"] == "applies" and f["log_matches"]
    }
    assert checked == explained
    code, cause, fix = FAMILIES[log]
    assert cause in checked[code]["cause"] and any(fix in f for f in checked[code]["fixes"])


def test_generic_rule_steps_back_for_the_reader():
    """ATTN100's generic head-size/dtype cause is not reported for a sparse-MLA model."""
    from vllm_doctor.engine.loader import load_rules
    from vllm_doctor.engine.logreport import analyse_log

    report = analyse_log((LOGS / "31480.log").read_text(), load_rules())
    assert [rule.code for rule, *_ in report.rule_hits] == ["ATTN102"]


def test_missing_custom_ops_step_back_when_the_import_error_is_in_the_log():
    """ENV225 (vLLM's ops never loaded) names the symptom; when the log keeps vLLM's warning
    with the ImportError, the ABI reader names the cause instead (vllm-project/vllm#5501's
    warning)."""
    from vllm_doctor.engine.loader import load_rules
    from vllm_doctor.engine.logreport import analyse_log

    symptom = "[rank0]: AttributeError: '_OpNamespace' '_C' object has no attribute 'rms_norm'\n"
    warning = (
        "WARNING 06-13 11:42:20 _custom_ops.py:11] Failed to import from vllm._C with "
        "ImportError('/usr/local/lib/python3.8/dist-packages/vllm/_C.abi3.so: undefined "
        "symbol: _ZN5torch7LibraryC1ENS0_4KindESsSt8optionalIN3c1011DispatchKeyEEPKcj')\n"
    )
    rules = load_rules()
    alone = [rule.code for rule, *_ in analyse_log(symptom, rules).rule_hits]
    assert alone == ["ENV225"]
    both = [rule.code for rule, *_ in analyse_log(warning + symptom, rules).rule_hits]
    assert "ENV225" not in both and "ENV212" in both


@pytest.mark.parametrize(
    "symbol, name",
    [
        (
            "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
            "c10::Error::Error",
        ),
        ("_ZN5torch3jit17parseSchemaOrNameERKSsb", "torch::jit::parseSchemaOrName"),
        (
            "_ZN2at4_ops15sum_IntList_out4callERKNS_6TensorEN3c1016OptionalArrayRefIlEEbSt8optionalINS5_10ScalarTypeEERS2_",
            "at::_ops::sum_IntList_out::call",
        ),
        (
            "_ZN5torch7LibraryC1ENS0_4KindESsSt8optionalIN3c1011DispatchKeyEEPKcj",
            "torch::Library::Library",
        ),
        ("_Z24silu_and_mul_nvfp4_quantRN2at6TensorES1_S1_S1_", "silu_and_mul_nvfp4_quant"),
        ("_ZNSt6vectorIiSaIiEE9push_backERKi", "std::vector"),
        ("not_mangled", None),
    ],
)
def test_qualified_name_without_cxxfilt(symbol, name):
    assert qualified_name(symbol) == name


def test_demangle_falls_back_without_cxxfilt(monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "which", lambda _name: None)
    name, full, how = demangle("_ZN5torch3jit17parseSchemaOrNameERKSsb")
    assert (name, full) == ("torch::jit::parseSchemaOrName", None) and "read from" in how
