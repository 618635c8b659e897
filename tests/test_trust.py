"""The trust model of docs/hardening.md: what the files around a run can and cannot make the
doctor do. No code from the working directory, no file written outside a temporary tree, no
repository file that silences the gate unseen, every pattern of a rule linear, every input
bounded, secrets and control characters never printed."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# modules every child of the doctor imports early; a planted one leaves a marker file
PLANTED = ("json", "shutil", "signal", "typer", "tempfile", "subprocess", "threading")


def plant(directory: Path) -> Path:
    """Plant look-alike standard modules in ``directory``; return the marker they would write."""
    marker = directory / "PLANTED-CODE-RAN"
    for name in PLANTED:
        (directory / f"{name}.py").write_text(
            f"open({str(marker)!r}, 'a').write('{name}\\n')\nraise SystemExit('planted {name}')\n"
        )
    return marker


def console(name: str) -> str:
    return str(BIN / name)


# --- no code from the working directory -------------------------------------------------------


def test_probe_children_import_nothing_from_the_working_directory(tmp_path):
    """`cd untrusted-model-dir && vllm-doctor probe`: the reaper, the ranks and the parts."""
    work = tmp_path / "model-dir"
    work.mkdir()
    marker = plant(work)
    run = subprocess.run(
        [
            console("vllm-doctor"),
            "probe",
            "selftest-ok",
            "selftest-part",
            "--device",
            "cpu",
            "--tp",
            "2",
            "--timeout",
            "60",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert not marker.exists(), marker.read_text()
    assert run.returncode == 0, run.stdout + run.stderr


def test_probe_children_import_nothing_from_a_kept_probe_dir(tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir(mode=0o700)
    marker = plant(keep)
    from vllm_doctor.probes import run_probes

    results = run_probes(["selftest-ok", "selftest-part"], 1, "cpu", 60, run_dir=keep)
    assert not marker.exists(), marker.read_text()
    assert all(r.status == "pass" for r in results)


def test_the_reaper_imports_nothing_from_the_working_directory(tmp_path, monkeypatch):
    from vllm_doctor.probes.runner import Runner
    from vllm_doctor.probes.teardown import start_reaper

    work = tmp_path / "work"
    work.mkdir()
    marker = plant(work)
    monkeypatch.chdir(work)
    runner = Runner(["selftest-ok"], 1, "cpu", 10)
    reaper = start_reaper(runner.run_dir, runner.python, runner.keep_dir)
    try:
        time.sleep(1.5)  # its imports are done long before
        assert reaper.poll() is None, "the reaper died at start-up"
    finally:
        reaper.kill()
        reaper.wait()
        import shutil

        shutil.rmtree(runner.run_dir, ignore_errors=True)
    assert not marker.exists(), marker.read_text()


def test_the_pre_commit_hook_imports_nothing_from_the_repository(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    marker = plant(repo)
    (repo / "serve.yaml").write_text("model: facebook/opt-125m\n")
    run = subprocess.run(
        [console("vllm-doctor-pre-commit"), "--vllm-version", "0.14.0", "serve.yaml"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert not marker.exists(), marker.read_text()
    assert run.returncode in (0, 1), run.stdout + run.stderr


def test_the_pre_commit_hook_never_reads_a_file_name_as_an_option(tmp_path, monkeypatch):
    """A committed file named `--ignore-file=ign-serve.yaml` is a serve config to check."""
    from vllm_doctor import precommit

    monkeypatch.chdir(tmp_path)
    for name in ("serve.yaml", "--ignore-file=ign-serve.yaml", "ign-serve.yaml", "--fail-on"):
        (tmp_path / name).write_text("model: m\n")
    calls = []
    monkeypatch.setattr(precommit.subprocess, "call", lambda cmd: calls.append(cmd) or 0)
    with pytest.raises(SystemExit):
        precommit.main(
            ["--report", "r.txt", "serve.yaml", "--ignore-file=ign-serve.yaml", "--fail-on"]
        )
    assert len(calls) == 3
    for cmd in calls:
        assert cmd[1] in ("-P", "-I")  # isolated: the repository's root is not on sys.path
        check = cmd[cmd.index("check") + 1 :]
        configs = [a for a in check if a.startswith("--serve-config=")]
        assert len(configs) == 1
        assert [a for a in check if a not in configs] == ["-q", "--report", "r.txt"]


# --- rules test writes only inside its temporary tree ----------------------------------------

sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
import bad_inputs  # noqa: E402
from doctor_forks import doctor_run  # noqa: E402


def run_cli(
    *argv: str, cwd: Path | None = None, env: dict | None = None, stdin=None, timeout: float = 120
) -> subprocess.CompletedProcess:
    if stdin is None:  # forked from a server started as the console script starts (-P)
        return doctor_run(
            *argv,
            console=console("vllm-doctor"),
            cwd=cwd,
            env={**os.environ, **(env or {})},
            timeout=timeout,
        )
    return subprocess.run(
        [console("vllm-doctor"), *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        stdin=stdin,
    )


def one_line_exit_2(run: subprocess.CompletedProcess) -> str:
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and "Traceback" not in run.stderr, (
        run.returncode,
        run.stderr[-2000:],
    )
    return lines[0]


@pytest.mark.parametrize(
    "name", ["../../../../escaped.pth", "{abs}/escaped.pth", "vllm/../../escaped.pth"]
)
def test_rules_test_writes_vllm_files_only_inside_its_tree(tmp_path, name):
    rules = tmp_path / "rules"
    rules.mkdir()
    shipped = ROOT / "rules" / "args"
    import yaml

    rule = yaml.safe_load((shipped / "ARGS001.yaml").read_text())
    rule.pop("related", None)
    rule.pop("defers_to", None)
    (rules / "ARGS001.yaml").write_text(yaml.safe_dump(rule))
    name = name.replace("{abs}", str(tmp_path))
    (rules / "ARGS001.cases.yaml").write_text(
        (shipped / "ARGS001.cases.yaml").read_text()
        + "  - name: planted\n    expect: undecided\n    facts: {}\n"
        f"    vllm_files:\n      {name!r}: 'import os'\n"
    )
    private_tmp = tmp_path / "t" / "a" / "b"
    private_tmp.mkdir(parents=True)
    run = run_cli(
        "rules",
        "test",
        "--rules-dir",
        str(rules),
        "--no-default-rules",
        env={"TMPDIR": str(private_tmp)},
    )
    assert not list(tmp_path.rglob("escaped.pth"))
    assert run.returncode == 1 and "must stay inside the vllm package" in run.stdout, run.stdout
    validate = run_cli("rules", "validate", "--rules-dir", str(rules))
    assert validate.returncode == 2 and "vllm_files" in validate.stderr, validate.stderr


# --- a repository cannot silence the gate unseen -----------------------------------------------

GEMMA = ("check", "--example", "diffusion-gemma-tp2")  # MODEL001, an error: exit 1
SILENCING = [
    'default-rules = false\nrules-dir = ["mine"]\n',
    'ignore = ["MODEL"]\n',
    'select = ["HW"]\n',
    'ignore = ["M"]\n',
    'fail-on = "never"\n',
    'ignore-entries = [{code = "MODEL001", reason = "x"}]\n',
]


def repo_with(tmp_path: Path, settings: str) -> Path:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "mine").mkdir()
    (repo / ".vllm-doctor.toml").write_text(settings)
    return repo


@pytest.mark.parametrize("settings, lock", list(zip(SILENCING, ["flag", "env"] * 3, strict=True)))
def test_a_locked_gate_ignores_what_a_repository_turns_off(tmp_path, settings, lock):
    repo = repo_with(tmp_path, settings)
    unlocked = run_cli(*GEMMA, "-q", cwd=repo)
    assert unlocked.returncode == 0  # the file silenced it ...
    assert (
        f"settings from {repo / '.vllm-doctor.toml'}; it turns off: " in unlocked.stderr
    )  # ... said so
    argv = [*GEMMA, "-q", "--locked"] if lock == "flag" else [*GEMMA, "-q"]
    locked = run_cli(*argv, cwd=repo, env={"VLLM_DOCTOR_LOCKED": "1"} if lock == "env" else None)
    assert locked.returncode == 1, locked.stderr
    assert "so not applied: " in locked.stderr
    # the command line of the CI job still chooses
    assert (
        run_cli(
            *argv,
            "--fail-on",
            "never",
            cwd=repo,
            env={"VLLM_DOCTOR_LOCKED": "1"} if lock == "env" else None,
        ).returncode
        == 0
    )


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "sarif", "junit", "github", "gitlab"])
def test_every_format_names_the_settings_file_and_what_it_turned_off(tmp_path, fmt):
    repo = repo_with(tmp_path, 'ignore = ["MODEL"]\n')
    run = run_cli(*GEMMA, "--format", fmt, cwd=repo)
    assert run.returncode == 0
    assert ".vllm-doctor.toml" in run.stdout and "ignore = MODEL" in run.stdout


def test_the_search_stops_at_the_repository_root(tmp_path):
    repo = repo_with(tmp_path, 'format = "json"\n')
    (repo / ".vllm-doctor.toml").unlink()
    (tmp_path / ".vllm-doctor.toml").write_text('fail-on = "never"\n')  # planted above the checkout
    (repo / "deploy").mkdir()
    assert run_cli(*GEMMA, "-q", cwd=repo / "deploy").returncode == 1


def test_the_search_stops_at_home_and_outside_both_at_the_working_directory(tmp_path):
    home = tmp_path / "home"
    (home / "proj" / "sub").mkdir(parents=True)
    (tmp_path / ".vllm-doctor.toml").write_text('fail-on = "never"\n')
    env = {"HOME": str(home)}
    assert run_cli(*GEMMA, "-q", cwd=home / "proj", env=env).returncode == 1
    (home / ".vllm-doctor.toml").write_text('fail-on = "never"\n')  # the user's own: applies
    assert run_cli(*GEMMA, "-q", cwd=home / "proj" / "sub", env=env).returncode == 0
    loose = tmp_path / "loose" / "sub"  # neither a repository nor home above it
    loose.mkdir(parents=True)
    (tmp_path / "loose" / ".vllm-doctor.toml").write_text('fail-on = "never"\n')
    assert run_cli(*GEMMA, "-q", cwd=loose, env=env).returncode == 1


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n", "not a usable settings file"),
        (b"a = " + b"{b = " * 3000 + b"1" + b"}" * 3000 + b"\n", "not a usable settings file"),
        (b'select = ["\xff\xfe"]\n', "not UTF-8"),
        (b".".join([b"k"] * 3000) + b" = 1\n", "not a usable settings file"),
        (b"# " + b"x" * (2 << 20) + b"\n", "at most 1.0 MiB"),
    ],
    ids=["nested-arrays", "nested-tables", "not-utf8", "dotted-key-3000", "over-1-mib"],
)
# Short ids: pytest puts the test id in PYTEST_CURRENT_TEST, which the doctor's process inherits,
# and a 2 MiB id there is more than one environment string may hold (E2BIG at exec).
def test_bad_settings_files_are_exit_2(tmp_path, content, needle):
    repo = repo_with(tmp_path, "")
    (repo / ".vllm-doctor.toml").write_bytes(content)
    assert needle in one_line_exit_2(run_cli(*GEMMA, cwd=repo))


# --- every pattern from a rule runs in linear time; fingerprint reads are bounded ------------


def test_a_matches_condition_runs_in_linear_time():
    from vllm_doctor.engine.conditions import compile_condition
    from vllm_doctor.facts.model import Facts

    condition = compile_condition({"fact": "torch.git_version", "matches": "^([0-9a-f]+)+!$"})
    facts = Facts.from_flat({"torch.git_version": "0123456789abcdef" * 4 + "0"})
    start = time.process_time()
    assert condition.evaluate(facts).value is False
    assert time.process_time() - start < 0.5


@pytest.mark.parametrize(
    "node",
    [
        {"fact": "torch.git_version", "matches": r"(a)\1"},
        {"fact": "torch.git_version", "matches": "a(?!b)"},
    ],
)
def test_a_pattern_re2_cannot_run_is_refused_at_load(node):
    from vllm_doctor.engine.conditions import ConditionError, compile_condition

    with pytest.raises(ConditionError, match="not a linear-time"):
        compile_condition(node)


def test_a_fingerprint_pattern_re2_cannot_run_is_refused(tmp_path):
    from vllm_doctor.engine.loader import validate_dir

    rules = tmp_path / "rules"
    shutil.copytree(ROOT / "rules" / "quant", rules)
    rule = rules / "QUANT005.yaml"
    rule.write_text(
        rule.read_text().replace(
            "pattern: 'class ModelOptFp8Config", "pattern: '(?<=x)class ModelOptFp8Config"
        )
    )
    _, problems = validate_dir(rules)
    assert any(
        "QUANT005.yaml:affected.fingerprints[0].pattern: not a linear-time" in p for p in problems
    )


def test_fingerprint_reads_are_bounded(tmp_path):
    from vllm_doctor.engine import fixstate
    from vllm_doctor.engine.rule import Fingerprint, LazyPattern

    tree = tmp_path / "vllm"
    (tree / "lib").mkdir(parents=True)
    with open(tree / "lib" / "_C.abi3.so", "wb") as handle:  # sparse: large, costs no disk
        handle.truncate(1536 << 20)
    found = fixstate.check_fingerprint(
        Fingerprint("**/*", LazyPattern("never", "t:p"), "fixed"), tree
    )
    assert found is None  # nothing readable as source: no verdict from a library's bytes
    for i in range(3000):
        (tree / f"m{i:04}.py").write_text("x = 1\n")
    opened = []
    real_open = open
    fixstate._read.cache_clear()
    import builtins

    def counting_open(path, *args, **kwargs):
        opened.append(path)
        return real_open(path, *args, **kwargs)

    builtins.open = counting_open
    try:
        state, _ = fixstate.check_fingerprint(
            Fingerprint("**/*", LazyPattern("never", "t:p"), "fixed"), tree
        )
    finally:
        builtins.open = real_open
    assert state == fixstate.AFFECTED and len(opened) <= fixstate.MAX_FINGERPRINT_FILES


# --- standard input is bounded like a file ----------------------------------------------------


@pytest.mark.parametrize(
    "command", [("explain", "--log", "-"), ("check", "--serve", "vllm serve m", "--log", "-")]
)
def test_standard_input_past_the_log_limit_is_exit_2(command):
    proc = subprocess.Popen(
        [console("vllm-doctor"), *command],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    chunk = b"INFO a line of a log that goes on\n" * 30000  # ~1 MiB
    try:
        for _ in range(200):  # 200 MiB offered; the reader stops after 64
            proc.stdin.write(chunk)
    except BrokenPipeError:
        pass
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()
    proc.stdin = None  # closed: communicate() only reads
    out, err = proc.communicate(timeout=120)
    run = subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(), err.decode())
    assert "at most 64.0 MiB" in one_line_exit_2(run)


@pytest.mark.parametrize(
    "command", [("explain", "--log", "-"), ("check", "--serve", "vllm serve m", "--log", "-")]
)
def test_a_writer_that_never_closes_does_not_hang(command):
    read_end, write_end = os.pipe()
    os.write(write_end, b"ERROR something\n")  # then nothing more, and never closed
    try:
        start = time.monotonic()
        run = run_cli(*command, stdin=read_end, env={"VLLM_DOCTOR_STDIN_TIMEOUT": "1"}, timeout=60)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert "still open" in one_line_exit_2(run)
    assert time.monotonic() - start < 30


# --- the report parser is linear ---------------------------------------------------------------

BLANKS = " " * 60_000


@pytest.mark.parametrize(
    "line",
    [
        f"PyTorch version{BLANKS}x",  # a key that never reaches its colon
        f"GPU 0: NVIDIA H100{BLANKS}x",  # a GPU line with a blank run inside
        f"[pip3] torch==2.5.1{BLANKS}x",  # a package line
        f"GPU models and configuration: {BLANKS}AMD Instinct MI300X",  # one device, ROCm's form
        "GPU models and configuration: " + "(gfx942" * 8000,
        BLANKS,
    ],
)
def test_one_long_line_in_a_report_is_read_in_linear_time(line):
    from vllm_doctor.facts.report import parse_report

    text = (
        ROOT / "vllm_doctor" / "examples" / "diffusion-gemma-tp2" / "collect-env.txt"
    ).read_text()
    from vllm_doctor.errors import InputError

    start = time.process_time()
    parse_report(text + "\n" + line + "\n", "report")
    with contextlib.suppress(InputError):  # alone it is no report: refused, and quickly
        parse_report(line + "\n", "report")
    assert time.process_time() - start < 1.0


# --- secrets inside JSON options and model URLs -----------------------------------------------

URL_SECRET, JSON_SECRET, NESTED_SECRET = (
    "wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLEKEY",
    "hubS3cretVal",
    "nestedPw9",
)
LEAKY_LINE = (
    f"vllm serve s3://AKIAIOSFODNN7EXAMPLE:{URL_SECRET}@bucket/llama -tp 2 --hf-overrides "
    f'\'{{"hub_token": "hf_{JSON_SECRET}", "x": {{"my_password": "{NESTED_SECRET}"}}}}\''
)


def in_process(argv: list[str]) -> tuple[int, str, str]:
    """The doctor run in this process: (exit code, stdout, stderr)."""
    from test_hardening import run_cli as run_in_process

    return run_in_process(argv)


@pytest.mark.parametrize(
    "argv",
    [
        *[
            ["check", "--strict", "--format", fmt]
            for fmt in ("text", "json", "markdown", "sarif", "junit", "github", "gitlab")
        ],
        ["facts", "--format", "json"],
        ["facts"],
    ],
)
def test_secrets_in_json_options_and_model_urls_are_hidden_everywhere(argv):
    code, out, err = in_process([*argv, "--vllm-version", "0.14.0", "--serve", LEAKY_LINE])
    assert code in (0, 1), err
    for secret in (URL_SECRET, JSON_SECRET, NESTED_SECRET, "AKIAIOSFODNN7EXAMPLE"):
        assert secret not in out and secret not in err, (secret, argv)
    if "github" not in argv and "gitlab" not in argv:  # annotations carry no facts
        assert "bucket/llama" in out  # the model is still named


# --- control characters never reach a terminal or a CI log --------------------------------------

ESC_NAME = "org/m\x1b]0;PWNED\x07\x1b[31mred"


def test_a_forged_annotation_in_an_ignore_file_is_escaped_on_stderr(tmp_path):
    ignore = tmp_path / "ignore.yaml"
    ignore.write_text(
        'ignore:\n  - {code: "HW0001\\n::error::forged", reason: "x"}\n'
        '  - {code: MODEL001, reason: "old\\n::error::forged too", expires: 2001-01-01}\n'
    )
    _code, out, err = in_process([*GEMMA, "--ignore-file", str(ignore)])
    for stream in (out, err):
        assert not [line for line in stream.splitlines() if line.startswith("::")], stream
    assert "\\n::ERROR::FORGED" in err  # codes are read in capitals


@pytest.mark.parametrize("fmt", ["text", "markdown", "github", "junit", "sarif", "json", "gitlab"])
def test_terminal_escapes_from_a_model_name_never_reach_the_output(fmt):
    code, out, err = in_process(
        [
            "check",
            "--strict",
            "-v" if fmt == "text" else "-q",
            "--format",
            fmt,
            "--vllm-version",
            "0.14.0",
            "--",
            "vllm",
            "serve",
            ESC_NAME,
        ]
    )
    assert "\x1b" not in out and "\x07" not in out and "\x1b" not in err, (code, err)


def test_terminal_escapes_in_an_error_line_are_escaped():
    # an unknown short option is bad input whatever the release (a value no covered release
    # reads is judged per release since issue 29: the next test)
    code, _, err = in_process(["check", "--serve", "vllm serve m -\x1b[31mx\n::error::y"])
    assert code == 2 and "\x1b" not in err and len(err.strip().splitlines()) == 1


def test_terminal_escapes_in_a_judged_value_are_escaped():
    line = "vllm serve m -tp \x1b[31mx\n::error::y"
    for fmt in ("text", "github"):
        code, out, err = in_process(
            ["check", "--offline", "--vllm-version", "0.27.1", "--format", fmt, "--serve", line]
        )
        assert code == 1, err
        assert "\x1b" not in out + err and "\n::error::y" not in out + err


# --- bad input is exit 2 with one line, never a crash ------------------------------------------


def quant_config(tmp_path: Path, qcfg: object) -> str:
    import json

    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": 4096,
                "num_attention_heads": 32,
                "num_hidden_layers": 32,
                "vocab_size": 32000,
                "quantization_config": qcfg,
            }
        )
    )
    return str(tmp_path / "config.json")


@pytest.mark.parametrize(
    "case",
    [
        "rules-dir /",
        "deep rules tree",
        "integer key",
        "quant types",
        "quant activations",
        "60 KB model id",
        "long model name part",
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, case):
    import yaml

    argv = ["check", "--serve", "vllm serve m", "-q"]
    if case == "rules-dir /":
        repo = repo_with(tmp_path, 'rules-dir = ["/"]\n')
        monkeypatch.chdir(repo)
    elif case == "deep rules tree":
        bad_inputs._deep_tree(tmp_path / "deep", 1200)  # made and removed without recursion
        argv += ["--rules-dir", str(tmp_path / "deep")]
    elif case == "integer key":
        rule = yaml.safe_load((ROOT / "rules" / "args" / "ARGS001.yaml").read_text())
        rule.pop("related", None)
        rule["fix"][1] = "one"
        rule["fix"]["zz"] = "mixed with text keys"
        (tmp_path / "ARGS001.yaml").write_text(yaml.safe_dump(rule))
        argv += ["--no-default-rules", "--rules-dir", str(tmp_path)]
    elif case == "quant types":
        argv += [
            "--model-config",
            quant_config(
                tmp_path,
                {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": "x"}}},
            ),
        ]
    elif case == "quant activations":
        argv += [
            "--model-config",
            quant_config(
                tmp_path,
                {
                    "quant_method": "compressed-tensors",
                    "config_groups": {"g": {"weights": {"num_bits": 8}, "input_activations": 4}},
                },
            ),
        ]
    elif case == "60 KB model id":
        argv = ["check", "--serve", "vllm serve " + "a" * 60_000, "-q"]
    else:
        argv = ["check", "--serve", "vllm serve org/" + "a" * 300, "-q"]
    try:
        code, _, err = in_process(argv)
    finally:
        if case == "deep rules tree":  # shutil.rmtree (pytest's clean-up too) recurses
            bad_inputs._remove_deep(tmp_path / "deep")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err[-500:])


# --- probes: the run directory, a reader that leaves, no GPU, an empty format -------------------


def test_a_probe_dir_that_is_a_link_or_open_to_others_is_refused(tmp_path):
    from vllm_doctor.errors import InputError
    from vllm_doctor.probes.launch import private_dir

    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(victim)
    with pytest.raises(InputError, match="symbolic link"):
        private_dir(link)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(InputError, match="written by others"):
        private_dir(shared)
    made = private_dir(tmp_path / "new" / "run")
    assert made.is_dir() and (made.stat().st_mode & 0o777) == 0o700
    env_run = run_cli(
        "probe", "selftest-ok", "--device", "cpu", env={"VLLM_DOCTOR_PROBE_DIR": str(link)}
    )
    assert "symbolic link" in one_line_exit_2(env_run)
    assert not list(victim.iterdir())  # nothing was written through the link


def test_a_stuck_probe_stops_when_stdout_closes(tmp_path):
    from vllm_doctor.probes.launch import pid_alive

    read_end, write_end = os.pipe()
    proc = subprocess.Popen(
        [
            console("vllm-doctor"),
            "probe",
            "selftest-sleep",
            "--device",
            "cpu",
            "--tp",
            "1",
            "--timeout",
            "600",
        ],
        stdout=write_end,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "VLLM_DOCTOR_PROBE_DIR": str(tmp_path / "run")},
    )
    os.close(write_end)
    events = tmp_path / "run"
    deadline = time.monotonic() + 60
    # until the worker is asleep in its probe (it says so in its log first)
    while time.monotonic() < deadline and not any(
        "sleeping forever" in log.read_text(errors="replace") for log in events.glob("rank0*.log")
    ):
        time.sleep(0.1)
    os.close(read_end)  # the reader leaves (`| head -1` that got its line)
    try:
        proc.wait(timeout=30)
    finally:
        proc.kill()
    pids = [int(p) for p in (events / "pids").read_text().split()]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.1)
    assert not [p for p in pids if pid_alive(p)]


def test_cuda_visible_devices_without_a_gpu_does_not_choose_cuda():
    import json

    if os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia/version"):
        pytest.skip("an NVIDIA driver is loaded here")
    run = run_cli("probe", "selftest-ok", "--format", "json", env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["device"] == "cpu"


@pytest.mark.parametrize("argv", [["check", "--serve", "vllm serve m"], ["explain", "MODEL001"]])
def test_an_empty_format_is_refused(argv):
    code, _, err = in_process([*argv, "-f", ""])
    assert code == 2 and "unknown format ''" in err
