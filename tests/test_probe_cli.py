"""`vllm-doctor probe`: options, input errors, output formats, serve-line TP, model sizes,
the on-disk cache, and that the doctor itself never imports torch."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from doctor_forks import doctor_run

from vllm_doctor.commands.probe import model_sizes, parse_serve, visible_gpu_count
from vllm_doctor.errors import InputError
from vllm_doctor.probes import cache

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "probes"


def cli(*args, env=None):
    full = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return doctor_run("probe", *args, env=full, timeout=120)


def test_parse_serve_finds_tp_and_model():
    assert parse_serve(["vllm", "serve", "google/gemma-4", "-tp", "2"]) == {
        "model": "google/gemma-4",
        "tp": 2,
        "pp": None,
        "budget": {},
    }
    assert parse_serve(["serve", "m", "--tensor-parallel-size=4"])["tp"] == 4
    # vLLM moves `--model X` to the front: X is the model (serve_args' reading of its parser)
    assert parse_serve(["m", "--model", "x", "-tp=8"]) == {
        "model": "x",
        "tp": 8,
        "pp": None,
        "budget": {},
    }
    assert parse_serve(["vllm", "serve", "m"]) == {
        "model": "m",
        "tp": None,
        "pp": None,
        "budget": {},
    }
    # the pipeline stages `probe --ray` places ranks by
    assert parse_serve(["vllm", "serve", "m", "-tp", "2", "-pp", "2"])["pp"] == 2
    # the budgets the memory probe sizes its forward and its CUDA graphs by
    assert parse_serve(
        ["vllm", "serve", "m", "--max-num-batched-tokens", "16384", "--max-num-seqs=64"]
    )["budget"] == {"max_num_batched_tokens": 16384, "max_num_seqs": 64}
    with pytest.raises(InputError):
        parse_serve(["m", "-tp", "two"])
    with pytest.raises(InputError):
        parse_serve(["m", "--tensor-parallel-size"])


def test_visible_gpu_count_without_nvml_uses_the_variable(monkeypatch):
    import vllm_doctor.facts.gpus as gpus

    def no_nvml(*a, **k):
        raise RuntimeError("no NVML")

    monkeypatch.setattr(gpus, "collect_gpus", no_nvml)
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "0,1,2"}) == 3
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": ""}) == 0
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "1,-1,2"}) == 1
    assert visible_gpu_count({}) is None


def test_model_sizes_from_a_nested_config():
    assert model_sizes(FIXTURES / "config.json", None) == {
        "vocab_size": 1001,
        "hidden_size": 48,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "head_dim": 6,
    }
    assert model_sizes(None, None) is None
    with pytest.raises(InputError):
        model_sizes(FIXTURES / "missing.json", None)


def test_list_names_probes_and_rules():
    proc = cli("--list")
    assert proc.returncode == 0
    assert "tp-softembed" in proc.stdout and "MODEL001" in proc.stdout and "HW001" in proc.stdout
    assert "selftest" not in proc.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--only", "bogus", "--device", "cpu"], "unknown probe 'bogus'"),
        (["--format", "yaml", "--device", "cpu"], "unknown format"),
        (["--device", "tpu"], "unknown device"),
        (["--device", "cpu", "--tp", "0", "--only", "selftest-ok"], "--tp"),
        (["--bogus-flag"], "unknown option"),
        (["bogus", "--device", "cpu"], "unknown probe 'bogus'"),
        (["vllm", "serve", "m"], "give the serve line after --"),
        (
            ["selftest-ok", "--device", "cpu", "--timeout", "nan"],
            "--timeout: must be a finite number",
        ),
        (
            ["selftest-ok", "--device", "cpu", "--timeout", "inf"],
            "--timeout: must be a finite number",
        ),
        (
            ["selftest-ok", "--device", "cpu", "--timeout", "-1"],
            "--timeout: must be a finite number",
        ),
        (["selftest-ok", "--device", "cpu", "--timeout", "1e9"], "at most 86400"),
        (["selftest-ok", "--device", "cpu", "--teardown-timeout", "nan"], "--teardown-timeout"),
        (
            ["selftest-ok", "--device", "cpu", "--tp", "100000"],
            "more than this machine can run on the CPU",
        ),
        (
            ["selftest-ok", "--device", "cpu", "--", "vllm", "serve", "m", "-tp", "5000"],
            "serve line --tensor-parallel-size: 5000 ranks is more than this machine can run",
        ),
        (
            ["selftest-ok", "--device", "cpu", "--", "vllm", "serve", "m", "-tp", str(10**20)],
            "100000000000000000000",
        ),  # the serve-line parser or the rank cap: one line either way
        (["--serve", "vllm serve 'x", "--device", "cpu"], "--serve: cannot split the serve line"),
        (
            ["--serve", "vllm serve m -tp 2", "--", "vllm", "serve", "m"],
            "either with --serve or after --",
        ),
        (["--model-config", "/nonexistent/config.json", "--device", "cpu"], "no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle):
    proc = cli(*args)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_cuda_without_gpus_or_with_too_few_is_an_input_error():
    proc = cli("--device", "cuda", env={"CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 2 and "no GPU is visible" in proc.stderr
    proc = cli(
        "--device",
        "cuda",
        "--",
        "vllm",
        "serve",
        "m",
        "-tp",
        "4",
        env={"CUDA_VISIBLE_DEVICES": "0,1"},
    )
    if "no GPU is visible" not in proc.stderr:  # NVML absent: the variable says 2 GPUs
        assert proc.returncode == 2 and "4 ranks need 4 GPUs" in proc.stderr


def test_json_output_document(tmp_path):
    proc = cli(
        "--only", "selftest-ok,selftest-raise", "--device", "cpu", "--tp", "2", "--format", "json"
    )
    assert proc.returncode == 1  # an errored probe
    doc = json.loads(proc.stdout)
    assert doc["schema_version"] == 1 and doc["tp"] == 2 and doc["device"] == "cpu"
    assert doc["summary"]["pass"] == 1 and doc["summary"]["error"] == 1
    names = [r["name"] for r in doc["results"]]
    assert names == ["selftest-ok", "selftest-raise"]
    assert set(doc["results_at_s"]) == {"selftest-ok", "selftest-raise"}
    # plain progress lines on stderr when not on a terminal
    assert "probe selftest-ok: pass" in proc.stderr


def test_text_output_and_exit_0():
    proc = cli("--only", "selftest-ok,cudagraph-replay", "--device", "cpu", "--tp", "2")
    assert proc.returncode == 0, proc.stderr
    assert "[✓] selftest-ok (" in proc.stdout and "probe pass: ok" in proc.stdout
    assert "[-] cudagraph-replay (" in proc.stdout
    assert (
        "[-] SPEC001: could not run: needs a CUDA GPU; this is the CPU (gloo) variant"
        in proc.stdout
    )
    assert "Summary: 1 could not run (one verdict per rule); probes: 1 pass, 1 skip" in proc.stdout


def test_serve_line_sets_tp():
    proc = cli(
        "--only",
        "selftest-ok",
        "--device",
        "cpu",
        "--format",
        "json",
        "--",
        "vllm",
        "serve",
        "m",
        "-tp",
        "3",
    )
    doc = json.loads(proc.stdout)
    assert doc["tp"] == 3 and len(doc["results"][0]["ranks"]) == 3


def test_the_doctor_process_never_imports_torch():
    code = (
        "import sys; from vllm_doctor.cli import main\n"
        "try:\n    main(['probe', '--only', 'selftest-ok', '--device', 'cpu', '--format', 'json'])\n"
        "except SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\nprint('clean')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("clean")


def test_cache_round_trip_and_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_DOCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("VLLM_DOCTOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(cache, "torch_identity", lambda: {"version": "9.9.9", "git": "abc"})
    key = cache.part_key("tp-softembed", "tp_softembed", "compile", {"tp": 2})
    assert key != cache.part_key("tp-softembed", "tp_softembed", "compile", {"tp": 4})
    assert cache.load(key) is None
    cache.store(key, {"status": "error", "metrics": {}})  # failures are not kept
    assert cache.load(key) is None
    cache.store(key, {"status": "pass", "reason": "r", "metrics": {"error": "msg"}})
    hit = cache.load(key)
    assert hit["metrics"]["error"] == "msg" and hit["metrics"]["cached"]["torch"] == "9.9.9"
    # a result planted or edited in the cache is never read as a probe's verdict
    stored = tmp_path / f"part-{key}.json"
    record = json.loads(stored.read_text())
    record["result"]["status"] = "fail"
    stored.write_text(json.dumps(record))
    assert cache.load(key) is None
    del record["seal"]
    stored.write_text(json.dumps(record))
    assert cache.load(key) is None
    monkeypatch.setattr(cache, "torch_identity", lambda: {"version": "9.9.10"})
    assert cache.part_key("tp-softembed", "tp_softembed", "compile", {"tp": 2}) != key
    monkeypatch.setattr(cache, "torch_identity", lambda: None)
    assert cache.part_key("tp-softembed", "tp_softembed", "compile", {"tp": 2}) is None


def test_probe_names_select_the_probes_to_run():
    proc = cli("selftest-ok", "selftest-raise", "--device", "cpu", "--tp", "2", "--format", "json")
    doc = json.loads(proc.stdout)
    assert [r["name"] for r in doc["results"]] == ["selftest-ok", "selftest-raise"]
    # names, --only and a serve line after -- together
    proc = cli(
        "selftest-ok",
        "--only",
        "selftest-part",
        "--device",
        "cpu",
        "--format",
        "json",
        "--",
        "vllm",
        "serve",
        "m",
        "-tp",
        "3",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [r["name"] for r in doc["results"]] == ["selftest-ok", "selftest-part"] and doc[
        "tp"
    ] == 3


def test_a_shown_mechanism_is_joined_with_the_judged_release():
    """The probe shows a mechanism; the verdict and the exit code follow the judged vLLM."""
    env = {"VLLM_DOCTOR_PROBE_PARAMS": json.dumps({"selftest": {"confirm": "MODEL001"}})}
    # the self-test's mechanism counts as the hardware's: a CPU run never says "will happen"
    lacks = cli("selftest-ok", "--device", "cpu", "--tp", "2", "--vllm-version", "0.24.0", env=env)
    assert lacks.returncode == 0, lacks.stderr
    assert "[!] MODEL001 warning: mechanism shown only in the CPU variant" in lacks.stdout
    assert (
        "vLLM 0.24.0 (--vllm-version) lacks the fix (PR #46177): this failure can happen on a GPU"
        in lacks.stdout
    )
    assert "Summary: 1 warning (one verdict per rule)" in lacks.stdout
    assert "mechanism present (MODEL001)" in lacks.stderr  # the progress line: the mechanism only
    carries = cli(
        "selftest-ok",
        "--device",
        "cpu",
        "--tp",
        "2",
        "--vllm-version",
        "0.33.0",
        "--format",
        "json",
        env=env,
    )
    assert carries.returncode == 0, carries.stderr
    doc = json.loads(carries.stdout)
    (verdict,) = doc["results"][0]["verdicts"]
    assert verdict["level"] == "pass" and verdict["fix_state"] == "fixed"
    assert verdict["text"].endswith(
        "vLLM 0.33.0 (--vllm-version) carries the fix (PR #46177): protected"
    )
    assert doc["vllm"]["version"] == "0.33.0" and doc["verdicts"]["pass"] == 1
    for out in (lacks.stdout, carries.stdout):
        assert "reproduced on this stack" not in out


@pytest.mark.skipif(
    os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia/version"),
    reason="an NVIDIA driver is loaded here",
)
def test_cuda_without_any_driver_says_no_gpu_is_visible():
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    proc = doctor_run("probe", "--device", "cuda", env=dict(env, PYTHONPATH=str(ROOT)), timeout=60)
    assert proc.returncode == 2 and "no GPU is visible" in proc.stderr


def write_events(directory: Path, lines: list[str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "events.rank0.jsonl").write_text("\n".join(lines) + "\n")
    return directory


GOOD_RESULT = json.dumps(
    {
        "ev": "result",
        "rank": 0,
        "probe": "pp-handoff",
        "result": {"status": "pass", "reason": "ok", "metrics": {}, "duration_s": 0.1},
    }
)
MALFORMED = [
    "{not json",
    "[1, 2]",
    '{"ev": "result", "rank": "a", "probe": "pp-handoff"}',
    '{"ev": "result", "rank": 0}',
    '{"ev": "result", "rank": 0, "probe": "pp-handoff", "result": 5}',
    '{"ev": "result", "rank": 0, "probe": "pp-handoff", "result": {"status": "great"}}',
    '{"ev": "result", "rank": 0, "probe": "pp-handoff", "result": {"status": "pass", "reason": [1]}}',
    '{"ev": "hello", "rank": 0, "world": 1000000000000}',
    '{"ev": "teardown", "rank": 0, "seconds": "x"}',
    "7",
    '{"ev": "result", "rank": -1, "probe": "pp-handoff", "result": {"status": "pass"}}',
]


def test_results_with_only_malformed_events_is_one_line_and_exit_2(tmp_path):
    out = write_events(tmp_path / "bad", MALFORMED)
    proc = cli("--results", str(out))
    assert proc.returncode == 2, proc.stderr
    assert "no probe results" in proc.stderr and "malformed" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    proc = cli("--results", str(out / "events.rank0.jsonl"))  # a file, not the directory
    assert proc.returncode == 2 and "not a directory" in proc.stderr


def test_results_leave_malformed_lines_out_and_say_so(tmp_path):
    out = write_events(tmp_path / "mixed", [GOOD_RESULT, *MALFORMED])
    proc = cli("--results", str(out), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [r["name"] for r in doc["results"]] == ["pp-handoff"] and doc["tp"] == 1
    assert "left out 10 line(s)" in proc.stderr and len(doc["skipped_lines"]) == 10
