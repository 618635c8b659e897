"""collect_facts orchestration, the facts command and its text view."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
from doctor_forks import doctor_run

import vllm_doctor
from vllm_doctor.errors import InputError
from vllm_doctor.facts import packages
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.memory.facts import MEMORY_PATHS
from vllm_doctor.report.facts_view import FAIL, OK, SECTIONS, WARN, render_facts, section_status

MODELS = Path(__file__).parent / "fixtures" / "models"


def offline(**kw) -> CollectOptions:
    return CollectOptions(probe_machine=False, **kw)


def test_offline_with_model_config_and_log(tmp_path):
    log = tmp_path / "crash.txt"
    log.write_text("line 1\nRuntimeError: boom\n")
    facts = collect_facts(offline(model_config=MODELS / "gemma-4-31B-it", log=log))
    assert facts.value("model.family") == "gemma4"
    assert facts.value("log.lines") == 2
    assert facts.value("log.path") == str(log)
    for area in ("vllm", "torch", "gpu", "driver", "topology", "packages"):
        assert "not examined" in facts.why_missing(f"{area}.x")
    assert "not examined" in facts.why_missing("env.VLLM_ATTENTION_BACKEND")
    assert "vllm serve" in facts.why_missing("serve.tensor_parallel_size")
    # no GPU: the memory model names what it lacks
    assert facts.why_missing("memory.kv_cache_gib").startswith("needs gpu.memory_total_mib")
    assert facts.to_dict()["schema_version"] == 1


def test_environ_is_used_when_given():
    facts = collect_facts(offline(environ={"VLLM_USE_V1": "1", "HF_TOKEN": "x"}))
    assert facts.value("env.VLLM_USE_V1") == "1"
    assert facts.value("env.HF_TOKEN") == "<redacted>"


def test_bad_inputs_raise_input_error(tmp_path):
    with pytest.raises(InputError, match="no such log file"):
        collect_facts(offline(log=tmp_path / "absent.txt"))
    with pytest.raises(InputError, match="no such report file"):
        collect_facts(offline(report=tmp_path / "absent.txt"))
    bad = tmp_path / "config.json"
    bad.write_text("{")
    with pytest.raises(InputError, match="not valid JSON"):
        collect_facts(offline(model_config=bad))
    with pytest.raises(InputError, match="only one of"):
        collect_facts(offline(serve_string="vllm serve m", serve_tokens=["vllm", "serve", "m"]))


def test_crashed_collectors_are_recorded_not_raised(monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("metadata is broken")

    monkeypatch.setattr(packages, "collect_packages", boom)
    import vllm_doctor.facts.gpus as gpus_mod

    monkeypatch.setattr(gpus_mod, "collect_gpus", boom)
    facts = collect_facts(CollectOptions(model_config=MODELS / "Qwen3-32B", environ={}))
    reason = facts.why_missing("vllm.version")
    assert reason.startswith("collector crashed (packages): RuntimeError: metadata is broken")
    assert facts.why_missing("gpu.count").startswith("collector crashed (gpus)")
    # recorded as crashes, so check and facts exit 3 (a gate fails closed)
    assert [c.line() for c in facts.crashes] == [
        "installed packages: RuntimeError: metadata is broken",
        "GPUs (NVML): RuntimeError: metadata is broken",
    ]
    assert facts.value("model.num_attention_heads") == 64  # the others went on
    status = {s.title: section_status(facts, s) for s in SECTIONS}
    assert status["Stack"][0] == FAIL and "crashed" in status["Stack"][1]


def fake_report_module(monkeypatch, calls: list) -> None:
    def parse_report(text: str, name: str) -> Facts:
        calls.append((text, name))
        facts = Facts()
        facts.set("vllm.version", "0.25.1", Source.REPORT)
        facts.set("gpu.count", 2, Source.REPORT)
        facts.set("env.NCCL_P2P_DISABLE", "1", Source.REPORT)
        facts.mark_missing("topology", "the report has no GPU Topology block")
        return facts

    module = types.ModuleType("vllm_doctor.facts.report")
    module.parse_report = parse_report
    monkeypatch.setitem(sys.modules, "vllm_doctor.facts.report", module)


def test_report_replaces_machine_areas(monkeypatch, tmp_path):
    calls: list = []
    fake_report_module(monkeypatch, calls)
    monkeypatch.setattr(
        packages, "collect_packages", lambda *a: pytest.fail("this machine must not be examined")
    )
    report = tmp_path / "env.txt"
    report.write_text("vLLM Version                 : 0.25.1\n")
    facts = collect_facts(CollectOptions(report=report, environ={"VLLM_LOCAL": "1"}))
    assert calls == [(report.read_text(), str(report))]
    assert facts.get("vllm.version").source == Source.REPORT
    assert facts.value("gpu.count") == 2
    assert facts.value("env.NCCL_P2P_DISABLE") == "1"
    assert "env.VLLM_LOCAL" not in facts  # this machine's environment is replaced too
    assert facts.why_missing("topology.links") == "the report has no GPU Topology block"
    assert any("replace this machine" in note for note in facts.notes)


class FakeServeLine:
    def __init__(self, model: str, tp: int):
        self.model = model
        self.tp = tp
        self.env_seen = None

    def to_facts(self, facts: Facts, source: str, env) -> None:
        self.env_seen = dict(env)
        facts.set("serve.model", self.model, source)
        facts.set("serve.tensor_parallel_size", self.tp, source)
        facts.set("serve.max_model_len", 4096, source)


def fake_serve_module(monkeypatch, lines: list) -> None:
    module = types.ModuleType("vllm_doctor.serve_args")

    def parse_serve_argv(tokens, cwd):
        tp = int(tokens[tokens.index("-tp") + 1]) if "-tp" in tokens else 1
        lines.append(FakeServeLine(tokens[2], tp))
        return lines[-1]

    module.parse_serve_argv = parse_serve_argv
    module.parse_serve_string = lambda text: parse_serve_argv(text.split(), None)
    module.load_serve_config = lambda path: lines.append(FakeServeLine("cfg-model", 1)) or lines[-1]
    monkeypatch.setitem(sys.modules, "vllm_doctor.serve_args", module)
    monkeypatch.setattr(vllm_doctor, "serve_args", module, raising=False)


def test_serve_line_names_the_model(monkeypatch, tmp_path):
    lines: list = []
    fake_serve_module(monkeypatch, lines)
    model_dir = tmp_path / "llama"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(
        (MODELS / "Llama-3.1-8B-Instruct" / "config.json").read_text()
    )
    monkeypatch.chdir(tmp_path)
    facts = collect_facts(
        offline(
            serve_tokens=["vllm", "serve", "llama", "-tp", "3"],
            environ={"VLLM_ATTENTION_BACKEND": "FLASHINFER"},
        )
    )
    assert lines[0].env_seen == {"VLLM_ATTENTION_BACKEND": "FLASHINFER"}
    assert facts.value("serve.tensor_parallel_size") == 3
    assert facts.value("model.id") == "llama"
    assert facts.value("model.num_attention_heads") == 32
    assert facts.value("derived.tp_divides_heads") is False


def test_what_if_versions_through_collect():
    facts = collect_facts(
        offline(vllm_version="0.23.1rc1.dev20+g0d8097964", torch_version="2.11.0+cu130")
    )
    assert facts.get("vllm.version").source == Source.USER
    assert facts.value("vllm.base_release") == "0.23.0"
    assert facts.value("torch.cuda_version") == "13.0"


def test_timings_are_reported():
    timings: dict = {}
    collect_facts(offline(model_config=MODELS / "Qwen3-32B"), timings)
    assert {"model", "derived", "serve"} <= set(timings)
    assert all(t >= 0 for t in timings.values())


# -- the text view --------------------------------------------------------------------------


def render(facts: Facts, verbose: bool = False) -> str:
    from rich.console import Console

    console = Console(record=True, width=200, color_system=None)
    render_facts(facts, console, verbose=verbose, timings={"model": 0.004})
    return console.export_text()


def test_text_view_marks_sources_and_reasons():
    facts = collect_facts(
        offline(model_config=MODELS / "DeepSeek-V3.2", environ={"NCCL_DEBUG": "INFO"})
    )
    text = render(facts)
    assert f"[{OK}] Model" in text
    assert "model.architectures" in text and "DeepseekV32ForCausalLM" in text
    assert "(config.json)" in text
    assert f"[{FAIL}] GPUs and links — this machine was not examined" in text
    assert f"[{OK}] Environment" in text and "NCCL_DEBUG" in text
    assert f"[{WARN}] Estimates" in text
    assert "derived.tp_divides_heads: needs serve.tensor_parallel_size" in text
    # the memory model lacks one input: one line for its figures, not one per figure
    assert f"[{WARN}] Memory estimate" in text
    lacking = [
        p
        for p in MEMORY_PATHS
        if p not in facts and "gpu.memory_total_mib" in (facts.why_missing(p) or "")
    ]
    assert len(lacking) > 1
    assert f"memory.* ({len(lacking)} facts): needs gpu.memory_total_mib" in text
    assert "memory.kv_room: needs gpu.memory_total_mib" in render(facts, verbose=True)
    verbose = render(facts, verbose=True)
    assert "(4.0 ms)" in verbose
    assert "config.json (--model-config" in verbose  # source detail under -v
    assert "GiB" in text  # weights shown in human units


def test_text_view_inferred_model_is_a_warning():
    facts = Facts()
    facts.set("model.family", "gemma4", Source.INFERRED, "model id google/gemma-4-E2B-it")
    mark, _ = section_status(facts, next(s for s in SECTIONS if s.title == "Model"))
    assert mark == WARN


# -- the command ----------------------------------------------------------------------------


def test_facts_command_options(tmp_path, capsys):
    from vllm_doctor.cli import app

    app(
        args=[
            "facts",
            "--format",
            "json",
            "--model-config",
            str(MODELS / "Qwen3-32B"),
            "--vllm-version",
            "0.25.1",
        ],
        standalone_mode=False,
    )
    data = json.loads(capsys.readouterr().out)
    assert data["facts"]["vllm.version"]["source"] == Source.USER
    assert data["facts"]["model.num_attention_heads"]["value"] == 64
    with pytest.raises(InputError, match="unknown format"):
        app(args=["facts", "--format", "yaml"], standalone_mode=False)
    with pytest.raises(InputError, match="unknown option --bogus"):
        app(args=["facts", "--bogus"], standalone_mode=False)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return doctor_run("facts", *args, timeout=60)


def test_cli_json_and_bad_input():
    done = run_cli("--format", "json", "--model-config", str(MODELS / "gpt-oss-120b"))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["schema_version"] == 1
    assert data["facts"]["model.quant_scheme"]["value"] == "mxfp4"
    assert data["facts"]["model.quant_scheme"]["source"] == Source.DERIVED
    bad = run_cli("--model-config", "/nonexistent/config.json")
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "no such file" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_main_path_imports_nothing_heavy():
    code = (
        "import sys, io, contextlib\n"
        "from vllm_doctor.cli import app\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    app(args=['facts', '--format', 'json'], standalone_mode=False)\n"
        "heavy = {'torch', 'vllm', 'rich', 'pydantic', 'yaml', 'transformers'}\n"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_text_view_inputs_not_given_are_warnings_and_log_is_hidden():
    facts = collect_facts(offline(environ={}))
    text = render(facts)
    assert f"[{WARN}] Model — no model given" in text
    assert f"[{WARN}] Serve arguments" in text
    assert "Crash log" not in text
    assert f"[{WARN}] Crash log" in render(facts, verbose=True)
