"""Where the report goes: -o targets that cannot be written, a full disk, a closed stdout, a
reader that leaves early, an ASCII-only stdout, values JSON cannot hold; and how the text
report reads when piped (no hard wrapping), with -q and -v."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_check import doctor

HERE = Path(__file__).parent
EXAMPLES = HERE.parent / "vllm_doctor" / "examples"
FAILING = ["check", "--example", "diffusion-gemma-tp2"]  # MODEL001 (error): exit 1


def shell(command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``command`` in bash, where `vllm-doctor` is this interpreter's module."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    environ.update(env or {})
    environ["DOCTOR"] = f"{sys.executable} -m vllm_doctor"
    return subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, env=environ, timeout=120
    )


@pytest.mark.parametrize(
    "target, needle",
    [
        ("/nonexistent-dir/sub/x.json", "the directory /nonexistent-dir/sub does not exist"),
        ("/tmp", "names a directory, not a file"),
    ],
)
def test_unwritable_output_is_exit_2_before_any_work(target, needle):
    run = doctor(*FAILING, "--format", "json", "-o", target)
    assert run.returncode == 2, run.stderr
    assert needle in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("redirect", ["-o /dev/full", "> /dev/full"])
def test_full_disk_is_exit_3(redirect):
    run = shell(f"$DOCTOR check --example diffusion-gemma-tp2 --format json {redirect}")
    assert run.returncode == 3, run.stderr
    assert "No space left on device" in run.stderr and "Traceback" not in run.stderr
    assert "Exception ignored" not in run.stderr


def test_closed_stdout_is_exit_3():
    run = shell("$DOCTOR check --example diffusion-gemma-tp2 >&-")
    assert run.returncode == 3, run.stderr
    assert "stdout is closed" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize(
    "args, code",
    [
        ("check --example diffusion-gemma-tp2 --format json", 1),
        ("check --example diffusion-gemma-tp2", 1),
        ("check --example healthy-h100-llama --format sarif", 0),
        ("rules list", 0),
        ("rules list --format json", 0),
        ("facts --format json", 0),
        ("explain MODEL001", 0),
    ],
)
def test_a_reader_that_leaves_early_does_not_change_the_exit_code(args, code):
    # `true` exits at once: every write of the report meets a closed pipe
    run = shell(f'$DOCTOR {args} | true; echo "exit=${{PIPESTATUS[0]}}" >&2')
    assert f"exit={code}" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and "BrokenPipe" not in run.stderr


def test_head_keeps_the_exit_code():
    run = shell(
        '$DOCTOR check --example diffusion-gemma-tp2 -v | head -n 2; echo "exit=${PIPESTATUS[0]}"'
    )
    assert run.stdout.splitlines()[-1] == "exit=1"


@pytest.mark.parametrize("fmt", ["text", "markdown", "json", "github"])
def test_ascii_only_stdout(fmt):
    run = doctor(*FAILING, "--format", fmt, env={"PYTHONIOENCODING": "ascii"})
    assert run.returncode == 1, run.stderr
    assert "MODEL001" in run.stdout and "Traceback" not in run.stderr
    run.stdout.encode("ascii")
    if fmt == "text":
        first, second = run.stdout.splitlines()[:2]
        assert first.startswith("Read: ok stack: ") and " | " in first  # the inputs, in ASCII
        assert second.startswith("[x] Known failures")


# -- text: soft wrap, findings first, -q, -v ---------------------------------------------


def test_piped_text_is_not_hard_wrapped_and_findings_come_first():
    run = doctor(*FAILING)
    lines = run.stdout.splitlines()
    # what was read comes first, on one line; then the findings
    assert lines[0].startswith("Read: ✓ stack: vLLM 0.23.1rc1")
    assert lines[1].startswith("[✗] Known failures")
    assert lines[2].startswith("  ✗ MODEL001")
    # a workaround is one line, whatever its length; its edited command (TP 1) is withheld:
    # on these 16 GiB GPUs it would itself be a MEM003 error
    [tp1] = [line for line in lines if "Serve DiffusionGemma on one GPU" in line]
    assert "the edited command is not shown: with these facts it would still draw MEM003" in tp1
    assert not any("--tensor-parallel-size 1" in line for line in lines)
    assert max(len(line) for line in lines) > 100  # long lines stay long
    # facts: one line per section, after the findings
    for title in ("Stack", "GPUs and links", "Model", "Serve arguments"):
        (line,) = [line for line in lines if line[4:].startswith(f"{title}:")]
        assert lines.index(line) > 2
    # a line per fact section: the -v report lists every fact instead
    assert len(doctor(*FAILING, "-v").stdout.splitlines()) - len(lines) > 60


def test_one_line_per_missing_reason():
    # NVML is missing on this machine (or anywhere without a driver): its reason once
    run = doctor("check", "--serve", "vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 2")
    facts = json.loads(doctor("facts", "--format", "json").stdout)
    reason = facts["missing"].get("gpu")
    if not reason:
        pytest.skip("this machine has GPUs: no reason to repeat")
    assert run.stdout.count(reason) == 1, run.stdout


def test_quiet_prints_the_findings_only():
    run = doctor(*FAILING, "-q")
    assert run.returncode == 1
    # the one line of what was read, then the findings
    read, finding = run.stdout.splitlines()[:2]
    assert read.startswith("Read: ") and finding.startswith("  ✗ MODEL001")
    assert (
        "Stack" not in run.stdout
        and "Cannot decide" not in run.stdout
        and "note:" not in run.stdout
    )
    assert "1 error" in run.stderr  # the summary
    healthy = doctor("check", "--example", "healthy-h100-llama", "-q").stdout
    assert len(healthy.splitlines()) == 1 and healthy.startswith("Read: ✓ stack: vLLM 0.33.0")
    assert doctor(*FAILING, "-q", "-v").returncode == 2


def test_verbose_lists_every_fact_with_its_source():
    short = doctor(*FAILING).stdout
    verbose = doctor(*FAILING, "-v").stdout
    assert "    • vllm.version" in verbose and "    • vllm.version" not in short
    assert len(verbose.splitlines()) > 2 * len(short.splitlines())


def test_output_file_is_soft_wrapped_utf8(tmp_path):
    out = tmp_path / "report.txt"
    run = doctor(*FAILING, "-o", str(out), env={"PYTHONIOENCODING": "ascii"})
    assert run.returncode == 1 and run.stdout == ""
    text = out.read_text(encoding="utf-8")
    assert text.startswith("Read: ✓ stack") and text.splitlines()[1].startswith(
        "[✗] Known failures"
    )
    assert text == doctor(*FAILING).stdout  # the same report as on a pipe, in UTF-8


def test_rules_list_piped_is_one_line_per_rule():
    listed = json.loads(doctor("rules", "list", "--format", "json").stdout)
    run = doctor("rules", "list")
    lines = run.stdout.splitlines()
    assert len(lines) == len(listed) + 1  # the header
    for rule in listed:
        (line,) = [line for line in lines if line.startswith(rule["code"] + " ")]
        assert line.endswith(rule["summary"])


def test_shell_completion_is_enabled():
    env = {
        "_VLLM_DOCTOR_COMPLETE": "complete_bash",
        "COMP_WORDS": "vllm-doctor check --format ",
        "COMP_CWORD": "3",
    }
    script = Path(sys.executable).parent / "vllm-doctor"  # the installed console script
    if not script.exists():
        pytest.skip("the vllm-doctor script is not installed beside this interpreter")
    run = subprocess.run(
        [str(script)], capture_output=True, text=True, env={**os.environ, **env}, timeout=60
    )
    assert {"sarif", "junit", "github", "gitlab"} <= set(run.stdout.split())
    # the shell named on the command line, not detected from the process tree (which a
    # detached test run does not have): typer's own switch for this
    shown = subprocess.run(
        [str(script), "--show-completion", "bash"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"},
    )
    assert "_VLLM_DOCTOR_COMPLETE" in shown.stdout, shown.stderr


def test_on_a_terminal_the_text_fits_its_width_in_colour():
    import pty
    import re

    controller, terminal = pty.openpty()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_") and k != "NO_COLOR"}
    environ.update(COLUMNS="70", TERM="xterm-256color")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm_doctor", *FAILING, "-q"],
        stdout=terminal,
        stderr=subprocess.PIPE,
        env=environ,
    )
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the other side closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=120)
    os.close(controller)
    text = b"".join(chunks).decode("utf-8", errors="replace")
    assert proc.returncode == 1
    assert "\x1b[" in text  # colour
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text).replace("\r", "")
    # the corrected command stays one line to copy; everything else fits the width
    lines = [
        line for line in plain.splitlines() if line and not line.strip().startswith("vllm serve")
    ]
    assert "MODEL001" in plain and max(len(line) for line in lines) <= 70
    assert len(lines) > len(doctor(*FAILING, "-q").stdout.splitlines())  # it was wrapped
