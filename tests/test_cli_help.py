"""`--help` grouped (inputs, what-if, output, gate) with two examples per command that run;
`vllm-doctor init`; shell completion of rule codes, example names and GPU names."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from doctor_forks import doctor_run

from vllm_doctor.cli import EXAMPLES, app
from vllm_doctor.commands import inputs
from vllm_doctor.commands.init import KEY_HELP, template
from vllm_doctor.config import _KEYS, load_config
from vllm_doctor.knowledge import gpus

ROOT = Path(__file__).resolve().parents[1]
PANELS = {inputs.INPUTS, inputs.WHAT_IF, inputs.OUTPUT, inputs.GATE}


def doctor(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None):
    """A run of its own, forked from a server that has imported the doctor (doctor_forks)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_DOCTOR_")}
    environ.update({"HF_HUB_OFFLINE": "1", "COLUMNS": "120"}, **(env or {}))
    return doctor_run(*args, env=environ, cwd=cwd, timeout=180)


def test_every_check_option_is_in_one_of_the_four_groups():
    import typer.main

    command = typer.main.get_command(app).commands["check"]  # type: ignore[attr-defined]
    for param in command.params:
        if param.name in ("serve_tokens", "help"):
            continue
        assert getattr(param, "rich_help_panel", None) in PANELS, param.name
    text = doctor("check", "--help").stdout
    for panel in PANELS:
        assert f"─ {panel} ─" in text
    # the settings table's name survives rich's markup
    assert "tool.vllm-doctor" in text


def test_every_command_has_two_examples_under_its_help():
    import typer.main

    root = typer.main.get_command(app)
    names = set(root.commands) | {  # type: ignore[attr-defined]
        f"rules {sub}"
        for sub in root.commands["rules"].commands  # type: ignore[attr-defined]
    }
    assert names <= set(EXAMPLES), names - set(EXAMPLES)
    for name, examples in EXAMPLES.items():
        assert len(examples) == 2, name
        text = doctor(*name.split(), "--help").stdout
        assert "Examples" in text, name
        for command, _ in examples:
            assert command.split(" -- ")[0][:40] in " ".join(text.split()), (name, command)


# examples that need a file, a cluster, a pipe or a GPU the test machine does not have
NEEDS_A_TARGET = (
    "collect-env.txt",
    "node-facts/",
    "./model",
    "ci/doctor-rules",
    "--ray",
    "|",
    ">>",
)


def runnable_examples() -> list[str]:
    out = []
    for name, examples in EXAMPLES.items():
        for command, _ in examples:
            if name in ("probe", "serve") or any(word in command for word in NEEDS_A_TARGET):
                continue
            out.append(command)
    return out


@pytest.mark.parametrize("command", runnable_examples())
def test_the_examples_run(command, tmp_path):
    words = shlex.split(command)
    assert words[0] == "vllm-doctor"
    run = doctor(*words[1:], cwd=tmp_path if words[1] == "init" else ROOT)
    assert run.returncode in (0, 1), (command, run.stderr)
    assert "Traceback" not in run.stderr


def test_enough_examples_run_here():
    assert len(runnable_examples()) >= 12


def test_init_writes_a_commented_file_that_changes_nothing(tmp_path):
    run = doctor("init", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    written = tmp_path / ".vllm-doctor.toml"
    text = written.read_text()
    assert text == template()
    # every key config.py reads is there, commented out: the file changes nothing yet
    for key in _KEYS:
        assert f"\n# {key} = " in text, key
    assert load_config(written).turned_off() == []
    # once again: refused without --force
    again = doctor("init", cwd=tmp_path)
    assert again.returncode == 2 and "--force" in again.stderr
    assert doctor("init", "--force", cwd=tmp_path).returncode == 0


def test_every_example_value_of_init_is_one_the_settings_file_takes(tmp_path):
    (tmp_path / "ci" / "doctor-rules").mkdir(parents=True)
    (tmp_path / "ci" / "doctor-ignore.yaml").write_text("ignore: []\n")
    uncommented = "\n".join(
        line[2:] if any(line.startswith(f"# {key} = ") for key in KEY_HELP) else line
        for line in template().splitlines()
    )
    path = tmp_path / ".vllm-doctor.toml"
    path.write_text(uncommented)
    config = load_config(path)
    assert config.fail_on == "warning" and config.select == ["MODEL", "PAR", "MEM"]
    assert config.strict is True and config.format == "sarif"
    # the pyproject form is the same table
    (tmp_path / "pyproject.toml").write_text(doctor("init", "--pyproject").stdout)
    assert load_config(tmp_path / "pyproject.toml").turned_off() == []


def complete(*words: str) -> list[str]:
    """What bash completion offers, through the installed command (the completion variable
    is named after it)."""
    script = Path(sys.executable).parent / "vllm-doctor"
    environ = dict(os.environ, HF_HUB_OFFLINE="1")
    environ.update(
        _VLLM_DOCTOR_COMPLETE="complete_bash",
        COMP_WORDS=" ".join(["vllm-doctor", *words]),
        COMP_CWORD=str(len(words)),
    )
    run = subprocess.run([str(script)], capture_output=True, text=True, env=environ, timeout=60)
    return run.stdout.split()


def test_completion_of_rule_codes_examples_and_gpus():
    codes = complete("explain", "MODEL00")
    assert "MODEL001" in codes and all(c.startswith("MODEL00") for c in codes)
    assert "PAR" in complete("check", "--select", "PA")
    assert complete("check", "--example", "diff") == ["diffusion-gemma-tp2"]
    # every command that takes rule codes offers them
    for words in (
        ("rules", "show", "MEM00"),
        ("rules", "test", "MEM00"),
        ("rules", "list", "--select", "MEM00"),
        ("serve", "--ignore", "MEM00"),
        ("fleet", "--select", "MEM00"),
        ("check", "--ignore", "MEM00"),
    ):
        offered = complete(*words)
        assert "MEM001" in offered and all(c.startswith("MEM00") for c in offered), words
    offered = complete("check", "--gpu", "40")
    assert "4090" in offered and "4080" in offered
    # each offered name is one word that --gpu resolves to one family
    for name in offered + complete("check", "--gpu", "h1"):
        assert isinstance(gpus.resolve(name), gpus.GpuMatch), name
