"""The third hardening pass (issue 37): the container gate, the Hub, the compiled rule cache,
manifests and the streams a run writes to, under hostile input. Each test fails on the code
before the pass; the same inputs run as subprocesses under limits in
tests/fixtures/bad_inputs.py (third pass) and bench/hardening/tally.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent / "vllm_doctor" / "examples" / "diffusion-gemma-tp2"


def doctor(*args: str, env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "VLLM_"))}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-P", "-m", "vllm_doctor", *args],
        capture_output=True,
        env=environ,
        timeout=120,
        **kwargs,
    )


def one_line(stderr: bytes) -> str:
    lines = [line for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


# --- bad input is exit 2 and one line ----------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--vllm-version", "0.24.0", "--", "vllm", "serve", "m", ""],
        ["check", "--vllm-version", "0.24.0", "--", "vllm", "serve", "", "-tp", "2"],
    ],
)
def test_an_empty_word_in_the_serve_line_is_bad_input(argv):
    run = doctor(*argv)
    assert run.returncode == 2, run.stderr
    assert "empty word" in one_line(run.stderr)


def test_an_empty_option_value_is_no_empty_word():
    run = doctor("check", "-q", "--vllm-version", "0.24.0", "--", "vllm", "serve", "m",
                 "--served-model-name", "")  # fmt: skip
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("word", [b"\xff\xfe", b"org/m\xc3"])
def test_invalid_utf8_in_argv_is_bad_input(word):
    argv = [b"check", b"--vllm-version", b"0.24.0", b"--", b"vllm", b"serve", word]
    run = subprocess.run(
        [sys.executable.encode(), b"-P", b"-m", b"vllm_doctor", *argv],
        capture_output=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert "not valid UTF-8" in one_line(run.stderr)


# --- the streams: a reader that leaves, a closed or full stderr --------------------------------


def shell(script: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "VLLM_"))}
    env["DOCTOR"] = f"{sys.executable} -P -m vllm_doctor"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                          timeout=120)  # fmt: skip


@pytest.mark.parametrize(
    "args, code",
    [
        ("--version", 0),
        ("--help", 0),
        ("probe --list", 0),
        ("rules validate", 0),
        ("check --serve 'vllm serve m' --vllm-version banana", 2),
        (f"explain --log {EXAMPLE}/crash.log", 1),
    ],
)
def test_the_exit_code_survives_a_reader_that_leaves_and_a_broken_stderr(args, code):
    # stdout and stderr both into a pipe whose reader exits at once; then stderr alone
    run = shell(
        f'$DOCTOR {args} 2>&1 | true; echo "a=${{PIPESTATUS[0]}}"; '
        f'$DOCTOR {args} 2>/dev/full >/dev/null; echo "b=$?"; '
        f'$DOCTOR {args} 2>&- >/dev/null; echo "c=$?"'
    )
    assert run.stdout.split() == [f"a={code}", f"b={code}", f"c={code}"], run.stdout + run.stderr


def test_a_crash_log_line_never_steers_the_terminal(tmp_path):
    log = tmp_path / "crash.log"
    text = (EXAMPLE / "crash.log").read_bytes()  # the matched line carries a title sequence
    log.write_bytes(text.replace(b"call_function <built-in", b"call_function \x1b]0;PWNED\x07<built-in"))
    run = doctor("explain", "--log", str(log))
    assert run.returncode == 1, run.stderr
    assert b"\x1b" not in run.stdout and b"\x07" not in run.stdout
