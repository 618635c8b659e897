"""`vllm-doctor serve` and the container's entrypoint, run without vLLM.

A `vllm` program on PATH stands in for vLLM: it writes down the arguments it was started with
and its parent's process id, so a test sees exactly what `serve` exec'd, and that it was an
exec (vLLM's parent is the test, not a doctor process waiting for it). The model is found the
way a container finds it, in a Hugging Face cache (the DiffusionGemma example's real
config.json); for the entrypoint, a vLLM 0.24.0 installation is a dist-info directory on the
path, as `pip install vllm==0.24.0` leaves it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "vllm_doctor" / "examples" / "diffusion-gemma-tp2"
MODEL = "nvidia/diffusiongemma-26B-A4B-IT-NVFP4"
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
FIXTURES = Path(__file__).parent / "fixtures" / "serve_gate"

pytestmark = pytest.mark.slow


def line(tp: int) -> list[str]:
    """DiffusionGemma at tensor-parallel ``tp`` (MODEL001 applies at 2 on vLLM 0.24.0)."""
    return [MODEL, "--tensor-parallel-size", str(tp), "--max-model-len", "8192"]


@pytest.fixture
def machine(tmp_path) -> dict[str, str]:
    """The environment of a container without vLLM: the stand-in `vllm`, the model in the
    Hugging Face cache, the doctor on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    vllm = bin_dir / "vllm"
    vllm.write_text(
        '#!/bin/sh\n{ echo "parent $PPID"; printf "arg %s\\n" "$@"; } > "$VLLM_STARTED"\n'
    )
    vllm.chmod(0o755)
    snapshot = (
        tmp_path / "hf" / "hub" / f"models--{MODEL.replace('/', '--')}" / "snapshots" / "0123abc"
    )
    snapshot.mkdir(parents=True)
    for name in ("config.json", "hf_quant_config.json", "model.safetensors.index.json"):
        (snapshot / name).write_bytes((EXAMPLE / "model" / name).read_bytes())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "HF_", "PYTHON"))}
    env.update(
        PATH=os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env["PATH"]]),
        HF_HUB_CACHE=str(tmp_path / "hf" / "hub"),
        VLLM_STARTED=str(tmp_path / "started"),
    )
    return env


def run(command: list[str], env: dict[str, str], **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, env={**env, **extra}, capture_output=True, text=True, timeout=180
    )


def started(env: dict[str, str]) -> list[str] | None:
    """The arguments vLLM was started with (None: it was not), after checking it was exec'd."""
    record = Path(env["VLLM_STARTED"])
    if not record.exists():
        return None
    lines = record.read_text().splitlines()
    assert lines[0] == f"parent {os.getpid()}", "vllm was not exec'd in place of the doctor"
    return [entry.removeprefix("arg ") for entry in lines[1:]]


def test_serve_refuses_to_start_vllm_when_model001_applies(machine):
    refused = run(["vllm-doctor", "serve", "--vllm-version", "0.24.0", "--", *line(2)], machine)
    assert refused.returncode == 1, refused.stderr
    assert "MODEL001" in refused.stdout and "DiffusionGemmaForBlockDiffusion" in refused.stdout
    assert started(machine) is None
    assert (
        f"vllm-doctor: not starting `vllm serve {' '.join(line(2))}`: findings at or above "
        "--fail-on (exit 1)"
    ) in refused.stderr


def test_a_clean_line_reaches_the_exec_of_vllm_serve(machine):
    passed = run(["vllm-doctor", "serve", "--vllm-version", "0.24.0", "--", *line(1)], machine)
    assert passed.returncode == 0, passed.stderr
    assert started(machine) == ["serve", *line(1)]
    assert "the gate passed" in passed.stderr and "MODEL001" not in passed.stdout
    # `vllm serve` written out after `--` is the same line
    Path(machine["VLLM_STARTED"]).unlink()
    assert (
        run(
            ["vllm-doctor", "serve", "--vllm-version", "0.24.0", "--", "vllm", "serve", *line(1)],
            machine,
        ).returncode
        == 0
    )
    assert started(machine) == ["serve", *line(1)]


def test_a_container_whose_cache_cannot_be_created_is_not_started(machine, tmp_path):
    """The container's identity at start-up (facts/platform.py): vLLM's cache root under a
    path that cannot hold a directory (a file), which no user, root included, can create."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    refused = run(
        ["vllm-doctor", "serve", "--vllm-version", "0.24.0", "--", *line(1)],
        machine,
        VLLM_CACHE_ROOT=str(blocker / "vllm"),
    )
    assert refused.returncode == 1, refused.stderr
    assert "ENV020" in refused.stdout and "VLLM_CACHE_ROOT" in refused.stdout
    assert started(machine) is None


@pytest.mark.parametrize("how", [["--fail-on", "never"], ["--no-gate"]])
def test_fail_on_and_no_gate_let_a_finding_through(machine, how):
    through = run(
        ["vllm-doctor", "serve", "--vllm-version", "0.24.0", *how, "--", *line(2)], machine
    )
    assert through.returncode == 0, through.stderr
    assert "MODEL001" in through.stdout  # still reported
    assert started(machine) == ["serve", *line(2)]


@pytest.mark.parametrize(
    "variables", [{"VLLM_DOCTOR_FAIL_ON": "never"}, {"VLLM_DOCTOR_NO_GATE": "1"}]
)
def test_the_environment_sets_the_gate(machine, variables):
    through = run(
        ["vllm-doctor", "serve", "--vllm-version", "0.24.0", "--", *line(2)], machine, **variables
    )
    assert through.returncode == 0, through.stderr
    assert started(machine) == ["serve", *line(2)]
    # the command line still wins over the environment
    Path(machine["VLLM_STARTED"]).unlink()
    strict = run(
        ["vllm-doctor", "serve", "--vllm-version", "0.24.0", "--fail-on", "error", "--", *line(2)],
        machine,
        VLLM_DOCTOR_FAIL_ON="never",
    )
    assert strict.returncode == 1 and started(machine) is None


def test_a_line_the_doctor_cannot_read_is_not_started_unless_no_gate(machine):
    bad = [MODEL, "--tensor-parallel-size", "0"]  # out of range: bad input for every release
    refused = run(["vllm-doctor", "serve", "--", *bad], machine)
    assert refused.returncode == 2 and started(machine) is None
    assert "--tensor-parallel-size" in refused.stderr and "Traceback" not in refused.stderr
    escaped = run(["vllm-doctor", "serve", "--no-gate", "--", *bad], machine)
    assert escaped.returncode == 0 and started(machine) == ["serve", *bad]
    assert "--no-gate: the check did not finish" in escaped.stderr


def test_a_serve_option_before_the_double_dash_says_where_it_belongs(machine):
    misplaced = run(["vllm-doctor", "serve", "--tensor-parallel-size", "2", MODEL], machine)
    assert misplaced.returncode == 2 and started(machine) is None
    assert misplaced.stderr.startswith(
        "vllm-doctor: --tensor-parallel-size is a `vllm serve` option: "
        "put the serve line after `--`"
    )


def test_secrets_on_the_line_stay_out_of_the_doctors_messages(machine):
    passed = run(
        ["vllm-doctor", "serve", "--", *line(1), "--api-key", "sk-live-0123456789"], machine
    )
    assert passed.returncode == 0, passed.stderr
    assert "sk-live-0123456789" not in passed.stdout + passed.stderr
    assert started(machine)[-2:] == ["--api-key", "sk-live-0123456789"]  # vLLM gets it as given


# -- the container's entrypoint -------------------------------------------------------------


@pytest.fixture
def container(machine, tmp_path) -> dict[str, str]:
    """The machine with vLLM 0.24.0 installed (the release wheel's own METADATA) and the torch
    it pins, as their dist-info directories say (what the doctor reads of them)."""
    site = tmp_path / "site"
    (site / "vllm-0.24.0.dist-info").mkdir(parents=True)
    (site / "vllm-0.24.0.dist-info" / "METADATA").write_bytes(
        (FIXTURES / "vllm-0.24.0.METADATA").read_bytes()
    )
    (site / "torch-2.11.0+cu130.dist-info").mkdir()
    (site / "torch-2.11.0+cu130.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0+cu130\n"
    )
    return {**machine, "PYTHONPATH": str(site)}


def entrypoint(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return run(["sh", str(ENTRYPOINT), *args], env)


def test_image_takes_the_vllm_images_arguments_with_the_gate_in_front(container):
    # `docker run IMAGE MODEL -tp 2`: the container's vLLM 0.24.0 has the bug: not started
    refused = entrypoint(*line(2), env=container)
    assert refused.returncode == 1 and "MODEL001" in refused.stdout, refused.stderr
    assert (
        "version: vLLM 0.24.0: introduced in 0.24.0" in refused.stdout
        and started(container) is None
    )
    # `docker run IMAGE MODEL -tp 1`: started, with exactly those arguments
    passed = entrypoint(*line(1), env=container)
    assert passed.returncode == 0, passed.stderr
    assert started(container) == ["serve", *line(1)]


@pytest.mark.parametrize(
    "args, expected",
    [
        (["vllm", "serve", *line(1)], ["serve", *line(1)]),
        (
            ["--model", MODEL, "--max-model-len", "8192"],
            ["serve", "--model", MODEL, "--max-model-len", "8192"],
        ),
        (["serve", "--fail-on", "never", "--", *line(2)], ["serve", *line(2)]),
    ],
)
def test_image_forms_of_the_serve_line(container, args, expected):
    done = entrypoint(*args, env=container)
    assert done.returncode == 0, done.stderr
    assert started(container) == expected


def test_image_runs_doctor_commands_and_other_programs(container, tmp_path):
    check = entrypoint("check", "--example", "diffusion-gemma-tp2", "-q", env=container)
    assert check.returncode == 1 and "MODEL001" in check.stdout
    default = entrypoint(env=container)  # no arguments: check this container
    assert default.returncode in (0, 1) and "Known failures" in default.stdout
    shell = entrypoint("sh", "-c", "echo from-the-image", env=container)
    assert shell.returncode == 0 and shell.stdout == "from-the-image\n"
    # a model directory is a model, even one named like a program
    model_dir = tmp_path / "sh"
    model_dir.mkdir()
    (model_dir / "config.json").write_bytes((EXAMPLE / "model" / "config.json").read_bytes())
    local = entrypoint(str(model_dir), "--tensor-parallel-size", "2", env=container)
    assert local.returncode == 1 and "MODEL001" in local.stdout and started(container) is None


def test_no_vllm_to_start_is_exit_127_with_one_line(machine):
    path = os.pathsep.join(
        p for p in machine["PATH"].split(os.pathsep) if not (Path(p) / "vllm").exists()
    )
    missing = run(
        ["vllm-doctor", "serve", "--vllm-version", "0.24.0", "--", *line(1)], machine, PATH=path
    )
    assert missing.returncode == 127 and started(machine) is None
    # found missing before the gate says it passed (issue 29)
    assert "the gate passed" not in missing.stderr
    assert missing.stderr.rstrip().endswith(
        f"vllm-doctor: cannot start `vllm serve {' '.join(line(1))}`: no `vllm` program on "
        "PATH; nothing was started"
    )


# -- the gate judges what vLLM will run (issue 37) ---------------------------------------------

LLAMA = ROOT / "vllm_doctor" / "examples" / "healthy-h100-llama" / "model"


@pytest.mark.parametrize(
    "version, words, says",
    [
        # 0.11.1 on: --model moves to the front, the positional model is an unrecognized argument
        ("0.24.0", [MODEL, "--model", str(LLAMA), "-tp", "2"], "two models"),
        ("0.24.0", ["--model", str(LLAMA), MODEL, "-tp", "2"], "two models"),
        # 0.8.3-0.11.0 raise ValueError for the word --model, 0.8.0-0.8.2 for any --model
        ("0.10.0", ["--model", str(LLAMA), "-tp", "2"], "refuses `--model M`"),
        ("0.8.1", [f"--model={LLAMA}", "-tp", "2"], "refuses `--model`"),
        # no model: vLLM would start its default one
        ("0.24.0", [], "no model"),
        ("0.24.0", ["--served-model-name", "x", "-tp", "2"], "no model"),
        ("0.24.0", ["--model", "", "-tp", "2"], "an empty model"),
    ],
)
def test_a_line_vllm_refuses_or_without_a_model_is_not_started(machine, version, words, says):
    refused = run(["vllm-doctor", "serve", "--vllm-version", version, "--", *words], machine)
    assert refused.returncode == 2, refused.stderr
    assert started(machine) is None
    [message] = refused.stderr.splitlines()
    assert says in message


def test_the_positional_model_wins_where_the_release_lets_it(machine):
    # 0.8.3-0.11.0: `vllm serve P --model=M` serves P; the gate judges P (DiffusionGemma, whose
    # config the doctor reads) and passes the line to vLLM as written
    words = [MODEL, f"--model={LLAMA}", "-tp", "1"]
    passed = run(["vllm-doctor", "serve", "-v", "--vllm-version", "0.10.0", "--", *words], machine)
    assert passed.returncode == 0, passed.stderr
    assert "DiffusionGemmaForBlockDiffusion" in passed.stdout
    assert started(machine) == ["serve", *words]


def test_serve_messages_never_forge_an_annotation(machine):
    words = [*line(1), "--served-model-name", "x\n::error title=SPOOFED::x\x1b[31m"]
    passed = run(["vllm-doctor", "serve", "--vllm-version", "0.24.0", "--", *words], machine)
    assert passed.returncode == 0, passed.stderr
    assert not any(ln.startswith("::") for ln in passed.stderr.splitlines())
    assert "\x1b" not in passed.stderr and "\\n::error title=SPOOFED" in passed.stderr
    # vLLM still gets the word as given (the stand-in writes one argument a line)
    assert started(machine)[:8] == ["serve", *line(1), "--served-model-name", "x"]
    assert (
        "\narg x\n::error title=SPOOFED::x\x1b[31m\n" in Path(machine["VLLM_STARTED"]).read_text()
    )


@pytest.mark.parametrize("how", [[], ["--no-gate"]])
@pytest.mark.parametrize("signum", [2, 15])  # SIGINT (Ctrl-C), SIGTERM
def test_a_stop_signal_during_the_check_starts_nothing(machine, tmp_path, how, signum):
    import signal
    import sys
    import time

    sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
    from hostile_hub import HostileHub

    with HostileHub() as hub:  # its config.json trickles in: the check is still running
        env = {**machine, "HF_ENDPOINT": hub.url, "VLLM_DOCTOR_CACHE_DIR": str(tmp_path / "c")}
        proc = subprocess.Popen(
            ["vllm-doctor", "serve", *how, "--vllm-version", "0.24.0", "--", "evil/slow-config"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while len(hub.requests) < 2 and time.monotonic() < deadline:  # config.json asked
            time.sleep(0.1)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert started(machine) is None
    assert err.strip().splitlines()[-1] == (
        f"vllm-doctor: {signal.Signals(signum).name}: the run stopped before vLLM was started; "
        "nothing was started"
    )
