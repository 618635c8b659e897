"""The fault suite: hostile inputs never pass a gate by accident, hang, blow up or leak.

Every case of tests/fixtures/bad_inputs.py runs as a process of its own under 5 s and 1 GiB of
address space and must end with the right answer (exit 0/1, required output present) or a
clean error (exit 2/3, one line on stderr), never a traceback, and no planted secret canary
may appear in any output (text, json, markdown, sarif, junit, facts, -o files). The same
list drives bench/hardening/tally.py. The rest are in-process tests of the error policy,
the bounds and the redaction, with hypothesis where inputs can be generated.
"""

from __future__ import annotations

import io
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))

import bad_inputs
from doctor_forks import process_forks

from vllm_doctor import bounds, yaml_io
from vllm_doctor.cli import main
from vllm_doctor.errors import InputError
from vllm_doctor.redact import (
    REDACTED,
    is_secret_name,
    redact_text,
    redact_value,
    redact_words,
    shell_words,
)

CASES = bad_inputs.cases()
KINDS = sorted({c.kind for c in CASES})
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- every bad input, as a subprocess under the limits -------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_bad_inputs_end_cleanly(kind):
    """The group's first case starts a fresh interpreter as every case did before; the rest are
    forked from a server that has imported the doctor (the same limits, streams, working
    directory and environment, one process each), but for the cases that judge the start."""
    cases = [c for c in CASES if c.kind == kind]
    # a case that waits out a deadline (a Hub that drips) has a thread of its own, started
    # first, so that the waits overlap each other and the other cases' work
    waiting = [c for c in cases if bad_inputs.waits(c)]
    ordered = waiting + [c for c in cases if not bad_inputs.waits(c)]
    forks = process_forks()  # kept for the next group (each case is still a child of its own)
    with ThreadPoolExecutor(2 + len(waiting)) as pool:
        outcomes = list(
            pool.map(
                lambda case: bad_inputs.run_case(case, forks=None if case is cases[0] else forks),
                ordered,
            )
        )
    bad = [
        f"{o.case.name}: {o.verdict} (exit {o.exit_code}, {o.seconds:.1f} s) {o.detail}"
        for o in outcomes
        if o.verdict not in ("clean-error", "right-answer")
    ]
    assert not bad, "\n".join(bad)


# --- the error policy ------------------------------------------------------------------------


def run_cli(argv: list[str], monkeypatch=None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def _crash_model_collector(monkeypatch):
    import vllm_doctor.facts.model_source as model_source

    def deep(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(model_source, "collect_model", deep)


def test_a_crashed_collector_fails_the_gate_with_exit_3(monkeypatch):
    """The gemma example exits 1; a crash in the model collector must not turn it into 0,
    nor into 1: the run could not finish."""
    assert run_cli(["check", "--example", "diffusion-gemma-tp2"])[0] == 1
    _crash_model_collector(monkeypatch)
    code, out, err = run_cli(["check", "--example", "diffusion-gemma-tp2", "--fail-on", "never"])
    assert code == 3
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("vllm-doctor: could not finish: model config: RecursionError")
    assert "--debug" in lines[0] and "Traceback" not in err
    assert "could not finish: model config" in out  # the report says so too
    # the undecided rules say a crash kept them undecided, not that an input is missing
    code, out, _ = run_cli(["check", "--example", "diffusion-gemma-tp2", "--format", "json"])
    undecided = json.loads(out)["undecided"]
    crashed = [m for f in undecided for m in f["missing"] if "collector crashed" in m["reason"]]
    assert crashed and all("crashed" in m["how_to_supply"] for m in crashed)


def test_a_crash_in_a_collector_no_rule_needs_still_fails(monkeypatch):
    """Fail closed: even with --select naming rules that read no model fact."""
    _crash_model_collector(monkeypatch)
    code, _, err = run_cli(
        [
            "check",
            "--serve",
            "vllm serve m --task embed",
            "--select",
            "ARGS001",
            "--vllm-version",
            "0.14.0",
        ]
    )
    assert code == 3 and "model config" in err


def test_facts_exits_3_on_a_crash(monkeypatch):
    _crash_model_collector(monkeypatch)
    code, out, err = run_cli(["facts", "--format", "json", "--serve", "vllm serve m"])
    assert code == 3
    assert "collector crashed (model)" in json.loads(out)["notes"][-1]
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("how", ["flag-first", "flag-after", "env"])
def test_debug_prints_the_traceback(monkeypatch, how):
    _crash_model_collector(monkeypatch)
    argv = ["check", "--example", "diffusion-gemma-tp2"]
    if how == "flag-first":
        argv = ["--debug", *argv]
    elif how == "flag-after":
        argv = [*argv, "--debug"]
    else:
        monkeypatch.setenv("VLLM_DOCTOR_DEBUG", "1")
    code, _, err = run_cli(argv)
    assert code == 3
    assert "Traceback (most recent call last)" in err and "RecursionError" in err
    from vllm_doctor import errors

    errors.set_debug(False)


def test_an_unexpected_error_outside_the_collectors_names_its_step(monkeypatch):
    import vllm_doctor.engine.evaluate as evaluate

    def broken(*args, **kwargs):
        raise KeyError("severity")

    monkeypatch.setattr(evaluate, "evaluate_rules", broken)
    code, _, err = run_cli(["check", "--serve", "vllm serve m"])
    assert code == 3
    assert err.strip() == (
        "vllm-doctor: could not finish: rule evaluation: KeyError: 'severity' "
        "(rerun with --debug for the traceback)"
    )


def test_a_crash_message_carries_no_secret(monkeypatch):
    import vllm_doctor.engine.evaluate as evaluate

    def broken(*args, **kwargs):
        raise ValueError("bad url https://me:hunter2secret@hub.example/x")

    monkeypatch.setattr(evaluate, "evaluate_rules", broken)
    code, _, err = run_cli(["check", "--serve", "vllm serve m"])
    assert code == 3 and "hunter2secret" not in err and REDACTED in err


def test_debug_is_not_taken_from_the_serve_line():
    """`--debug` after `--` belongs to the serve line (an unknown vLLM flag), not to us."""
    code, out, _ = run_cli(["facts", "--format", "json", "--", "vllm", "serve", "m", "--debug"])
    assert code == 0
    assert "--debug" in json.loads(out)["facts"]["serve.unknown_flags"]["value"]


# --- bounds ---------------------------------------------------------------------------------


def test_anchor_bomb_is_refused_fast():
    start = time.process_time()
    with pytest.raises(yaml_io.YAMLError, match="aliases are expanded"):
        yaml_io.safe_load(bad_inputs._ANCHOR_BOMB.decode())
    assert time.process_time() - start < 1.0


@pytest.mark.parametrize(
    "text, match",
    [
        ("a: &x [*x]\n", "refers to itself"),
        ("a: !!binary aGVsbG8=\n", "!!binary"),
        ("a: !!set {x, y}\n", "!!set"),
        ("a: !!python/object:os.system x\n", "could not determine a constructor"),
        ("a: " + "[" * 300 + "]" * 300, "nested"),
        ("a: 1e999\n", None),  # YAML reads this as a string, which is fine
        ("a: .inf\n", "not finite"),
        ("a: " + "9" * 30 + "\n", "out of range"),
    ],
)
def test_yaml_refusals(text, match):
    if match is None:
        assert yaml_io.safe_load(text) == {"a": "1e999"}
        return
    with pytest.raises(yaml_io.YAMLError, match=match):
        yaml_io.safe_load(text)


def test_yaml_dates_stay_text():
    assert yaml_io.safe_load("d: 2024-01-01\nt: 2024-01-01 10:00:00\nbad: 2024-13-45\n") == {
        "d": "2024-01-01",
        "t": "2024-01-01 10:00:00",
        "bad": "2024-13-45",
    }


@pytest.mark.parametrize(
    "text, match",
    [
        ("[" * 100_000 + "]" * 100_000, "nested"),
        ('{"a": NaN}', "NaN"),
        ('{"a": Infinity}', "Infinity"),
        ('{"a": 1e999}', "too large"),
        ('{"a": ' + "9" * 5000 + "}", "out of range"),
        ('{"a": ' + "9" * 19 + "}", "out of range"),
    ],
)
def test_json_refusals(text, match):
    with pytest.raises(ValueError, match=match):
        bounds.json_loads(text)


def test_json_within_bounds_is_unchanged():
    data = {"a": [1, 2.5, None, True, "x"], "b": {"c": -(2**63)}}
    assert bounds.json_loads(json.dumps(data)) == data


@pytest.mark.parametrize(
    "path, match",
    [
        ("/dev/zero", "character device"),
        ("/dev/urandom", "character device"),
        ("/", "is a directory"),
        ("~nosuchuser-x/y", "no such user"),
    ],
)
def test_files_that_are_not_regular_are_refused(path, match):
    with pytest.raises(InputError, match=match):
        bounds.read_bytes(path, "report file", "report")


def test_fifo_and_sparse_files_are_refused_without_reading(tmp_path):
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="FIFO"):
        bounds.read_bytes(fifo, "log file", "log")
    sparse = tmp_path / "big"
    with open(sparse, "wb") as handle:
        handle.truncate(4 << 30)
    with pytest.raises(InputError, match=r"at most 64\.0 MiB"):
        bounds.read_bytes(sparse, "log file", "log")


@FUZZ
@given(st.text(alphabet="[]{}:,-&*!ab01\n \"'#?|>.%@`\\t", max_size=200))
def test_yaml_loader_raises_only_yaml_errors(text):
    try:
        data = yaml_io.safe_load(text)
    except yaml_io.YAMLError:
        return
    json.dumps(data)  # plain data: always serialisable


@FUZZ
@given(st.text(alphabet='[]{}:,"\\0123456789.eE+-aNInfity ', max_size=120))
def test_json_loader_raises_only_value_errors(text):
    try:
        data = bounds.json_loads(text)
    except ValueError:
        return
    json.dumps(data, allow_nan=False)


_plain = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.text(max_size=5)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4)
    ),
    max_leaves=30,
)


@FUZZ
@given(_plain)
def test_check_value_accepts_plain_data_in_bounds(value):
    assert bounds.check_value(value) is value


# --- redaction ------------------------------------------------------------------------------

SECRET = "s3cr3tVALUE9"


@pytest.mark.parametrize(
    "words",
    [
        ["vllm", "serve", "m", "--api-key", "k1", SECRET],
        ["vllm", "serve", "m", "--api-key", SECRET, "-tp", "2"],
        ["vllm", "serve", "m", f"--api-key={SECRET}"],
        ["vllm", "serve", "m", "--hf-tok", SECRET],
        ["vllm", "serve", "m", "--hf_token", SECRET],
        ["vllm", "serve", "m", "--openai-secret-token", SECRET],
        ["vllm", "serve", "m", "--my-db-password", "x", SECRET],
        ["vllm", "serve", "m", "--hf-overrides.api_key", SECRET],
        ["sudo", f"HF_TOKEN={SECRET}", "vllm", "serve", "m"],
        ["env", f"MY_PASSWORD={SECRET}", "vllm", "serve", "m"],
        ["vllm", "serve", "m", "--hf-overrides", f'{{"url": "https://u:{SECRET}@h/"}}'],
        ["vllm", "serve", "m", "--served-model-name", f"https://{SECRET}@h/"],
    ],
)
def test_secrets_in_command_words_are_hidden(words):
    assert SECRET not in " ".join(redact_words(words))
    runnable = shell_words(words)
    assert SECRET not in runnable and "<redacted>'" not in runnable


def test_suggested_commands_use_placeholders():
    assert (
        shell_words(["vllm", "serve", "m", "--hf-tok", SECRET, "--api-key", "a", "b"])
        == 'vllm serve m --hf-tok "$HF_TOKEN" --api-key "$VLLM_API_KEY"'
    )
    assert (
        shell_words(["HF_TOKEN=x", "NCCL_DEBUG=INFO x", "vllm", "serve", "m"])
        == "HF_TOKEN=\"$HF_TOKEN\" NCCL_DEBUG='INFO x' vllm serve m"
    )


@pytest.mark.parametrize(
    "name",
    [
        "--tokenizer",
        "--max-num-batched-tokens",
        "--ssl-keyfile",
        "--api-server-count",
        "VLLM_USE_V1",
        "--kv-cache-dtype",
    ],
)
def test_names_that_are_not_secrets(name):
    assert not is_secret_name(name)
    assert redact_words(["vllm", "serve", "m", name, "value-x"])[-1] == "value-x"


@pytest.mark.parametrize(
    "line",
    [
        f"token={SECRET}",
        f"Authorization: Bearer {SECRET}",
        f"https://user:{SECRET}@host/x",
        f'"api_key": "{SECRET}"',
        f"--api-key {SECRET}",
        f"HF_TOKEN={SECRET}",
        "hf_" + "a" * 34,
        "sk-" + "b" * 40,
    ],
)
def test_secrets_in_log_lines_are_hidden(line):
    assert redact_text(f"ERROR failed: {line} (retrying)").count(REDACTED) >= 1
    assert SECRET not in redact_text(line)
    assert ("a" * 34) not in redact_text(line) and ("b" * 40) not in redact_text(line)


def test_redact_value_keeps_the_shape():
    value = {"url": f"https://u:{SECRET}@h", "api_key": SECRET, "n": 3, "list": [f"token={SECRET}"]}
    assert redact_value(value) == {
        "url": f"https://{REDACTED}@h",
        "api_key": REDACTED,
        "n": 3,
        "list": [f"token={REDACTED}"],
    }


_secret_names = st.sampled_from(
    [
        "HF_TOKEN",
        "API_KEY",
        "MY_SECRET",
        "DB_PASSWORD",
        "authToken",
        "openai-secret-token",
        "x_credentials",
    ]
)
_secret_values = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789_.", min_size=6, max_size=24
).map(lambda s: "Q9" + s)


@FUZZ
@given(_secret_names, _secret_values, st.sampled_from(["=", ": ", "="]), st.text(max_size=20))
def test_any_secret_assignment_in_text_is_hidden(name, value, sep, noise):
    line = f"{noise} {name}{sep}{value} {noise}"
    assert value not in redact_text(line).replace(noise, "")


@FUZZ
@given(_secret_names, _secret_values)
def test_any_secret_flag_in_a_command_is_hidden(name, value):
    flag = "--" + name.replace("_", "-").lower()
    words = ["vllm", "serve", "org/m", flag, value, "-tp", "2"]
    assert value not in " ".join(redact_words(words))
    assert value not in shell_words(words)
    assert redact_words(words)[-2:] == ["-tp", "2"]


def test_redaction_is_linear():
    start = time.process_time()  # CPU time: a loaded CI machine does not make it fail
    redact_text("a=" * 200_000 + "https://" + "u" * 100_000 + "@" + ":" * 100_000)
    redact_text("Bearer " * 50_000)
    redact_text("key=" * 250_000)
    redact_text("x_token: " * 100_000)
    assert time.process_time() - start < 2.0
