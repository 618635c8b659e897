"""The doctor's first line: what each input gave (✓ read, ! in part, ✗ not read and why,
– not given) and the one next step, counting the undecided rules that need it; the same as
`summary.inputs` / `summary.next_step` in JSON; advice that never repeats what was given."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from doctor_forks import doctor_run

from vllm_doctor.report.supply import JUDGED, tailor

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "vllm_doctor" / "examples"
REPORT = EXAMPLES / "diffusion-gemma-tp2" / "collect-env.txt"
# the run of issue 34: options, then the serve line
ISSUE_OPTIONS = ("check", "--gpu", "A100 40GB", "--gpus", "2")
ISSUE_SERVE = ("--", "vllm", "serve", "meta-llama/Llama-3.3-70B-Instruct", "-tp", "2")


def doctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_DOCTOR_")}
    environ.update(env or {})
    return doctor_run(*args, env=environ, timeout=120, cwd=ROOT)


@pytest.fixture
def no_hub(tmp_path):
    """A Hugging Face Hub nothing answers at (a closed local port) and an empty cache."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    environ = {k: v for k, v in os.environ.items() if k.startswith("HF_")}
    blank = dict.fromkeys(environ, "")
    return {**blank, "HF_ENDPOINT": url, "HF_HOME": str(tmp_path / "hf")}, url


def test_the_hub_unreachable_run_names_the_hub_and_how_to_supply_the_config(no_hub):
    env, url = no_hub
    run = doctor(*ISSUE_OPTIONS, "-q", *ISSUE_SERVE, env=env)
    assert run.returncode == 0, run.stderr
    (line,) = run.stdout.splitlines()  # -q: one line, and no finding applies
    read, _, step = line.partition(". Next: ")
    assert read.startswith("Read: ")
    parts = dict(p.split(": ", 1) for p in read[len("Read: ") :].split(" · ") if ": " in p)
    assert parts["✓ GPUs"] == "2 × A100 40GB (--gpu)"
    assert parts["✓ serve line"] == "vllm serve meta-llama/Llama-3.3-70B-Instruct + 1 option"
    assert parts["✗ model config"] == (
        "config.json of meta-llama/Llama-3.3-70B-Instruct: not in the Hugging Face cache; "
        f"the Hub ({url}) could not be reached"
    )
    assert step.startswith("pass --model-config PATH (a config.json or model directory)")
    assert "`hf download meta-llama/Llama-3.3-70B-Instruct config.json`" in step
    # the count is that of the JSON document's next step, and the summary on stderr says so
    data = json.loads(doctor(*ISSUE_OPTIONS, "--format", "json", *ISSUE_SERVE, env=env).stdout)
    nxt = data["summary"]["next_step"]
    assert nxt["input"] == "model" and nxt["of"] == len(data["undecided"])
    assert step.endswith(
        f"— {nxt['undecided']} of the {nxt['of']} undecided rules need the model's config.json"
    )
    assert nxt["undecided"] > nxt["of"] / 2
    assert f"{nxt['undecided']} of the {nxt['of']} undecided need the model's config.json" in (
        run.stderr
    )


def test_the_json_summary_has_each_input_and_the_next_step(no_hub):
    env, _ = no_hub
    data = json.loads(doctor(*ISSUE_OPTIONS, "--format", "json", *ISSUE_SERVE, env=env).stdout)
    inputs = data["summary"]["inputs"]
    assert [i["input"] for i in inputs] == ["stack", "gpus", "model", "serve", "manifest", "log"]
    status = {i["input"]: i["status"] for i in inputs}
    assert status["gpus"] == status["serve"] == "read"
    assert status["model"] == "not-read" and status["manifest"] == status["log"] == "not-given"
    model = next(i for i in inputs if i["input"] == "model")
    assert model["undecided_needing_it"] == data["summary"]["next_step"]["undecided"]
    # every undecided rule that misses a model.* fact is counted
    direct = sum(
        any(m["fact"].startswith("model.") for m in f["missing"]) for f in data["undecided"]
    )
    assert model["undecided_needing_it"] >= direct > 0


def test_quiet_keeps_what_was_read_to_one_line():
    healthy = doctor("check", "--example", "healthy-h100-llama", "-q")
    assert healthy.returncode == 0
    (line,) = healthy.stdout.splitlines()
    assert line.startswith("Read: ✓ stack: vLLM 0.33.0 (report)")
    assert "✓ model config: LlamaForCausalLM (--model-config)" in line
    failing = doctor("check", "--example", "diffusion-gemma-tp2", "-q").stdout.splitlines()
    assert failing[0].startswith("Read: ") and failing[1].startswith("  ✗ MODEL001")


def test_a_family_named_without_its_size_is_read_in_part():
    run = doctor("check", "--gpu", "H100", "--gpus", "8", "-q", "--", "vllm", "serve", "m")
    first = run.stdout.splitlines()[0]
    assert '! GPUs: 8 × H100 (--gpu); 64 or 80 or 94 GiB: name one (--gpu "H100 80GB")' in first


def everything(run: subprocess.CompletedProcess[str]) -> str:
    return run.stdout + run.stderr


def test_advice_never_repeats_a_report_that_was_given():
    for fmt in ("text", "json", "markdown"):
        run = doctor(
            "check", "--report", str(REPORT), "-f", fmt, "--", "vllm", "serve", "org/unknown-model"
        )
        assert run.returncode in (0, 1), run.stderr
        assert "--report collect-env.txt" not in everything(run), fmt
    # without it, the same advice is given (so the test above tests something)
    bare = doctor("check", "--", "vllm", "serve", "org/unknown-model")
    assert "--report collect-env.txt" in everything(bare)


def test_advice_never_repeats_a_vllm_version_that_was_given():
    for fmt in ("text", "json"):
        run = doctor(
            "check",
            "--vllm-version",
            "0.22.0",
            "-f",
            fmt,
            "--",
            "vllm",
            "serve",
            "org/x",
            "-tp",
            "2",
        )
        assert run.returncode in (0, 1), run.stderr
        assert "--vllm-version V" not in everything(run), fmt
    bare = doctor("check", "--", "vllm", "serve", "org/x", "-tp", "2")
    assert "--vllm-version V" in everything(bare)


@pytest.mark.parametrize(
    "how, given, left",
    [
        (
            "run where vLLM is installed, pass --report collect-env.txt, or --vllm-version V",
            {"--report"},
            "run where vLLM is installed or pass --vllm-version V",
        ),
        (
            "run where vLLM is installed, pass --report collect-env.txt, or --vllm-version V",
            {"--vllm-version"},
            "run where vLLM is installed or pass --report collect-env.txt",
        ),
        (
            "give a vLLM version the knowledge covers (0.8.0-0.33.0): run where vLLM is "
            "installed, pass --report collect-env.txt, or --vllm-version V; plus the serve "
            "line / model config / packages the fact compares",
            {"--vllm-version", "--report"},
            "give a vLLM version the knowledge covers (0.8.0-0.33.0): run where vLLM is "
            "installed; plus the serve line / model config / packages the fact compares",
        ),
        # a covered release is judged: the version was not what the fact lacked
        (
            "give a vLLM version the knowledge covers (0.8.0-0.33.0): run where vLLM is "
            "installed, pass --report collect-env.txt, or --vllm-version V; plus the serve "
            "line / model config / packages the fact compares",
            {"--vllm-version", JUDGED},
            "supply the serve line / model config / packages the fact compares",
        ),
        (
            "run on the GPU host, or pass --report collect-env.txt",
            {"--report"},
            "run on the GPU host",
        ),
        ("pass --log crash.txt", {"--log"}, ""),
        # nothing given that it names: unchanged, word for word
        ("run on the GPU host, or pass --report collect-env.txt", {"--log"}, None),
    ],
)
def test_tailored_advice(how, given, left):
    assert tailor(how, given) == (how if left is None else left)


def test_a_what_if_release_asks_for_the_packages_beside_it_not_for_a_version():
    """--vllm-version 0.22.0 with a report: the release is judged, so no advice asks for a
    vLLM version; a package the what-if leaves open names the option that supplies it."""
    run = doctor(
        "check",
        "--offline",
        "--report",
        str(ROOT / "tests" / "fixtures" / "reports" / "rtx3090_x2_driver535.txt"),
        "--vllm-version",
        "0.22.0",
        "-f",
        "json",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-8B",
    )
    assert run.returncode in (0, 1), run.stderr
    missing = {m["fact"]: m for f in json.loads(run.stdout)["undecided"] for m in f["missing"]}
    hints = [m["how_to_supply"] for m in missing.values()]
    assert not any("give a vLLM version" in h for h in hints), hints
    transformers = missing["release.transformers_in_range"]["how_to_supply"]
    assert transformers.startswith("pass --package transformers==V"), transformers
    # and with it given, the rule is decided from the named version
    decided = doctor(
        "check",
        "--offline",
        "--vllm-version",
        "0.22.0",
        "--package",
        "transformers==4.40.0",
        "-f",
        "json",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-8B",
    )
    data = json.loads(decided.stdout)
    assert "ENV100" in [f["code"] for f in data["findings"]], decided.stderr
