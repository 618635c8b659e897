"""Fuzzing: nothing but InputError may escape the serve-line and report parsers."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.report import parse_report
from vllm_doctor.redact import is_secret_option
from vllm_doctor.serve_args import (
    OPTIONS,
    parse_serve_argv,
    parse_serve_string,
    render_command,
)

REPORTS = sorted((Path(__file__).parent / "fixtures" / "reports").iterdir())
REPORT_TEXTS = [p.read_text(encoding="utf-8") for p in REPORTS]

# FUZZ_EXAMPLES=3000 for a longer hunt with fresh random examples (conftest.py)
FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "250")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

_names = sorted(OPTIONS)
_flag_words = st.one_of(
    st.sampled_from(_names).map(lambda n: "--" + n),
    st.sampled_from(_names).map(lambda n: "--no-" + n),
    st.sampled_from(_names).map(lambda n: "--" + n.replace("-", "_")),
    st.sampled_from(_names).map(lambda n: "--" + n[: max(3, len(n) // 2)]),
    st.sampled_from(
        [
            "-tp",
            "-pp",
            "-dp",
            "-cc",
            "-ac",
            "-q",
            "-O",
            "-O3",
            "-O=2",
            "-Odecode",
            "-sc",
            "-x",
            "-",
            "--",
            "-1",
            "-0.5",
            "--model",
            "--config",
        ]
    ),
    st.tuples(st.sampled_from(_names), st.text(max_size=8)).map(lambda t: f"--{t[0]}={t[1]}"),
    st.tuples(
        st.sampled_from(
            ["--speculative-config", "-cc", "--compilation-config", "--hf-overrides", "--foo"]
        ),
        st.lists(st.text(alphabet="abc_+.", min_size=0, max_size=4), max_size=3),
    ).map(lambda t: t[0] + "." + ".".join(t[1])),
)
_value_words = st.one_of(
    st.text(max_size=12),
    st.integers(-5, 10**6).map(str),
    st.sampled_from(
        [
            "32k",
            "1K",
            "2M",
            "1.5K",
            "25.6k",
            "auto",
            "true",
            "false",
            "null",
            "{}",
            '{"a": 1}',
            '{"method": "mtp"',
            "[1,2]",
            "x.yaml",
            "3",
            "0.9",
            "FULL",
            "nan",
            "inf",
            "1e309",
        ]
    ),
    st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4), max_size=3).map(
        json.dumps
    ),
)
_tokens = st.lists(st.one_of(_flag_words, _value_words), max_size=14)
_prefixes = st.sampled_from(
    [
        [],
        ["vllm", "serve"],
        ["serve"],
        ["vllm", "serve", "org/m"],
        ["python", "-m", "vllm.entrypoints.openai.api_server"],
        ["A=1", "vllm", "serve", "m"],
        ["vllm"],
        ["python", "-m", "x"],
    ]
)


def _exercise(line) -> None:
    facts = Facts()
    line.to_facts(facts)
    facts.to_json()
    for edits in (
        {},
        {"tensor-parallel-size": 1},
        {"compilation-config.cudagraph_mode": "NONE"},
        {"enforce-eager": False, "speculative-config": {"method": "ngram"}},
    ):
        text = render_command(line, changes=edits, remove=["port", "speculative-config.model"])
        try:
            again = parse_serve_string(text)  # what we render must parse again
        except InputError:
            # guaranteed only for lines vLLM accepts without complaint
            assert line.warnings or line.unknown_flags or line.duplicates, text
            return
        assert again.env == line.env
        # the model survives the round trip on lines vLLM accepts (one it refuses, such as
        # `--model - -- --model ''`, has no model vLLM would serve)
        refused = any("unrecognized" in w for w in line.warnings)
        if line.model is not None and line.origins.get("model") == "cli" and not refused:
            assert again.model == line.model


@FUZZ
@given(prefix=_prefixes, tokens=_tokens)
def test_serve_argv_fuzz(prefix, tokens, tmp_path_factory):
    cwd = tmp_path_factory.getbasetemp()
    try:
        line = parse_serve_argv(prefix + tokens, cwd=cwd)
    except InputError as err:
        assert "\n" not in err.source
        return
    _exercise(line)


@FUZZ
@given(
    text=st.one_of(
        st.text(max_size=200),
        st.lists(st.one_of(_flag_words, _value_words), max_size=12).map(
            lambda ws: "vllm serve m " + " ".join(ws)
        ),
        st.text(alphabet=" \\\n'\"-=.{}abcO3tp", max_size=80),
    )
)
def test_serve_string_fuzz(text):
    try:
        line = parse_serve_string(text)
    except InputError:
        return
    _exercise(line)


@FUZZ
@given(prefix=st.sampled_from(["", "vllm serve m "]), tokens=_tokens)
@example(prefix="", tokens=["--api-key="])
@example(prefix="", tokens=["--api-key", "k1", "k2", "--hf-token=hf_x"])
def test_render_round_trip_fuzz(prefix, tokens):
    """A rendered command parses again to the same options."""
    try:
        line = parse_serve_argv((prefix.split() or ["m"]) + tokens)
    except InputError:
        return
    if line.model is None or line.model.startswith("-"):
        return
    try:
        again = parse_serve_string(render_command(line))
    except InputError:
        return
    if line.duplicates or line.unknown_flags:
        return
    # a secret is printed as a reference to its variable, never as itself
    secret = {
        name
        for name, value in line.options.items()
        if is_secret_option(name) and not isinstance(value, bool)
    }
    assert set(again.options) == set(line.options)
    for name in secret:
        values = again.options[name]
        assert all(
            isinstance(v, str) and v.startswith("$")
            for v in (values if isinstance(values, list) else [values])
        ), (name, values)
    assert {k: v for k, v in again.options.items() if k not in secret} == {
        k: v for k, v in line.options.items() if k not in secret
    }


# -- reports ---------------------------------------------------------------------------------


def _mutate(text: str, ops: list[tuple[int, int, str]]) -> str:
    lines = text.splitlines()
    for kind, pos, junk in ops:
        if not lines:
            break
        i = pos % len(lines)
        if kind == 0:
            del lines[i]
        elif kind == 1:
            lines.insert(i, junk)
        elif kind == 2:
            lines[i] = lines[i][: len(lines[i]) // 2]
        elif kind == 3:
            lines[i] = lines[i].replace(":", junk[:1] or "")
        elif kind == 4:
            lines[i], lines[-1 - i] = lines[-1 - i], lines[i]
        elif kind == 5:
            lines[i] = lines[i].replace("\t", " " * (len(junk) % 4))
        else:
            lines = lines[:i]
    return "\n".join(lines)


@FUZZ
@given(
    base=st.sampled_from(REPORT_TEXTS),
    ops=st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 10**6), st.text(max_size=30)), max_size=12
    ),
)
def test_mutated_reports(base, ops):
    text = _mutate(base, ops)
    try:
        facts = parse_report(text, "mutated.txt")
    except InputError as err:
        assert err.source == "mutated.txt"
        return
    facts.to_json()


@FUZZ
@given(
    data=st.one_of(
        st.text(max_size=400),
        st.binary(max_size=200),
        st.lists(
            st.sampled_from(
                [
                    "PyTorch version: 2.6.0",
                    "vLLM Version: 0.9.1 (git sha: zz",
                    "GPU 0: ",
                    "GPU models and configuration:",
                    "GPU Topology:",
                    "\tGPU0\tGPU1",
                    "GPU0\t X \tNV4",
                    "GPU1\tSYS\t X ",
                    "[pip3] torch==",
                    "[conda] x",
                    "==============================",
                    "   Environment Variables",
                    "A=B",
                    "Link Type between two GPUs",
                    "GPU0 0 XGMI",
                    "",
                    "vLLM Build Flags:",
                    "CUDA Archs: ;",
                    "CUDA Version: 99.9",
                    "MIG 1g.5gb Device 0:",
                ]
            ),
            max_size=25,
        ).map("\n".join),
    )
)
def test_random_report_text(data):
    try:
        facts = parse_report(data, "random")
    except InputError as err:
        assert err.source == "random"
        return
    facts.to_json()


# -- differential: the same words through vLLM's own FlexibleArgumentParser ---------------------
#
# Set VLLM_DOCTOR_VLLM_SOURCE to an unpacked `vllm` package directory (any release with
# vllm/utils/argparse_utils.py); the test loads that one file with a stub logger (nothing of
# vLLM is imported), registers every option of the doctor's table with the doctor's value
# converters, and checks that both parsers agree on the model and every option value.

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import re as _re  # noqa: E402
import sys  # noqa: E402
import types  # noqa: E402

import pytest  # noqa: E402

from vllm_doctor.serve_args import _convert  # noqa: E402

_VLLM_SOURCE = os.environ.get("VLLM_DOCTOR_VLLM_SOURCE", "")


_CACHE: dict = {}


def _load_flexible_parser():
    if "module" in _CACHE:
        return _CACHE["module"]
    path = Path(_VLLM_SOURCE) / "utils" / "argparse_utils.py"
    if not path.is_file():
        pytest.skip("set VLLM_DOCTOR_VLLM_SOURCE to an unpacked vllm package to compare")
    saved = {k: sys.modules.get(k) for k in ("vllm", "vllm.logger", "regex")}
    logger = logging.getLogger("vllm-argparse-under-test")
    logger.warning_once = logger.warning  # type: ignore[attr-defined]
    stub_pkg = types.ModuleType("vllm")
    stub_logger = types.ModuleType("vllm.logger")
    stub_logger.init_logger = lambda name: logger  # type: ignore[attr-defined]
    sys.modules.update({"vllm": stub_pkg, "vllm.logger": stub_logger, "regex": _re})
    try:
        spec = importlib.util.spec_from_file_location("vllm_argparse_under_test", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    finally:
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value
    _CACHE["module"] = module
    return module


def _vllm_parser(module):
    parser = module.FlexibleArgumentParser(prog="vllm")
    sub = parser.add_subparsers(dest="subcommand")
    serve = sub.add_parser("serve", prog="vllm serve")
    serve.add_argument("model_tag", nargs="?")
    dests: dict[str, str] = {}
    for name, spec in OPTIONS.items():
        if spec.legacy:
            continue  # not in the current parser: the doctor reports it as legacy
        names = [f"--{name}", *spec.aliases]
        kwargs: dict = {"dest": "opt_" + name.replace("-", "_"), "default": None}
        dests[kwargs["dest"]] = name

        def conv(value, s=spec):
            return _convert(f"--{s.name}", s, value)

        if spec.kind == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        elif spec.kind == "flag":
            kwargs["action"] = "store_true"
        elif spec.kind == "bool_or_str":
            kwargs.update(type=str, nargs="?", const=True)
        elif spec.kind == "list":
            kwargs.update(type=str, nargs="+")
        elif spec.kind == "append":
            kwargs.update(type=str, action="append")
        else:
            kwargs["type"] = conv
        serve.add_argument(*names, **kwargs)
    return parser, dests


_DIFF_WORDS = st.one_of(
    st.sampled_from(
        [
            "-tp",
            "--tensor-parallel-size",
            "--tensor_parallel_size=4",
            "-pp",
            "2",
            "4",
            "--max-model-len",
            "--max_model_len=32k",
            "16k",
            "1K",
            "--enforce-eager",
            "--no-enforce-eager",
            "--enable-prefix-caching",
            "--disable-prefix-caching",
            "--served-model-name",
            "a",
            "b",
            "--speculative-config.method",
            "mtp",
            "--speculative-config.num_speculative_tokens",
            "3",
            "-cc.cudagraph_mode=FULL",
            "--compilation-config",
            '{"level": 3}',
            "-O3",
            "-O",
            "1",
            "-Odecode",
            "--quantization",
            "fp8",
            "-q",
            "awq",
            "--kv-cache-dtype",
            "fp8_e4m3",
            "--gpu-memory-utilization",
            "0.8",
            "--model",
            "org/model",
            "--max-model",
            "--hf-token",
            "--dtype",
            "half",
            "--compilation-config.cudagraph_capture_sizes+",
            "1,2",
            "--attention-backend",
            "FLASHINFER",
            "-ac.backend",
            "TRITON_ATTN",
            "--port",
            "8001",
            "--api-key",
            "k1",
            "-dp",
            "--data-parallel-size-local",
        ]
    ),
    st.integers(0, 64).map(str),
)


_DIFF_ANY = st.one_of(
    _DIFF_WORDS,
    _flag_words.filter(lambda w: "--config" not in w),
    st.sampled_from(["0", "1", "-1", "2k", "auto", "x", '{"a": 1}', "true"]),
)


@FUZZ
@given(words=st.lists(_DIFF_ANY, max_size=10), model_first=st.booleans())
def test_differential_against_vllm_parser(words, model_first):
    module = _load_flexible_parser()
    if "parser" not in _CACHE:
        _CACHE["parser"] = _vllm_parser(module)
    parser, dests = _CACHE["parser"]
    argv = (["org/first"] if model_first else []) + words
    if not argv:
        return  # vLLM serves its default model; the doctor asks for a model
    try:
        ns = parser.parse_args(["serve", *argv])
        theirs_error = None
    except SystemExit:
        theirs_error = "argparse error"
    except (InputError, ValueError, IndexError, AssertionError) as err:
        theirs_error = repr(err)
    try:
        ours = parse_serve_argv(["vllm", "serve", *argv])
        ours_error = None
    except InputError as err:
        ours = None
        ours_error = str(err)
    if theirs_error is not None:
        # vLLM rejects it: the doctor must reject it or flag what vLLM would not accept
        assert ours is None or ours.unknown_flags or ours.warnings or ours.legacy_flags, (
            argv,
            theirs_error,
        )
        return
    if ours is None and ours_error.startswith("--model: expected one argument"):
        return  # vLLM takes the next word as the model blindly, even a flag
    if ours is None and "NUL" in ours_error:
        return  # no real command line holds a NUL byte
    if ours is None and "negative decimal" in ours_error:
        return  # vLLM turns `-0.5` into a dotted option: rejected on purpose
    assert ours is not None, (argv, ours_error)
    assert not ours.unknown_flags, (argv, ours.unknown_flags)
    theirs = {dests[k]: v for k, v in vars(ns).items() if k in dests and v is not None}
    theirs_model = ns.model_tag or theirs.pop("model") if "model" in theirs else ns.model_tag
    assert ours.model == theirs_model, argv
    ours_options = dict(ours.options.items())
    assert ours_options == theirs, argv


def test_a_line_vllm_refuses_after_the_end_of_options_marker_is_exercised_without_error():
    # found by the fuzzer: `--model - -- --model ''` renders as `vllm serve - -- --model ''`;
    # an empty positional word is bad input now (vLLM refuses it too), so the rendering is
    # exercised with a word in its place
    with pytest.raises(InputError, match="empty word"):
        parse_serve_argv(["--model", "-", "--", "--model", ""])
    line = parse_serve_argv(["--model", "-", "--", "--model", "x"])
    assert any("unrecognized" in w for w in line.warnings)
    _exercise(line)
