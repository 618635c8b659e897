"""Fuzzing: nothing but InputError may escape the serve-line and report parsers."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.report import parse_report
from vllm_doctor.serve_args import (
    OPTIONS,
    parse_serve_argv,
    parse_serve_string,
    render_command,
)

REPORTS = sorted((Path(__file__).parent / "fixtures" / "reports").iterdir())
REPORT_TEXTS = [p.read_text(encoding="utf-8") for p in REPORTS]

FUZZ = settings(max_examples=250, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

_names = sorted(OPTIONS)
_flag_words = st.one_of(
    st.sampled_from(_names).map(lambda n: "--" + n),
    st.sampled_from(_names).map(lambda n: "--no-" + n),
    st.sampled_from(_names).map(lambda n: "--" + n.replace("-", "_")),
    st.sampled_from(_names).map(lambda n: "--" + n[: max(3, len(n) // 2)]),
    st.sampled_from(["-tp", "-pp", "-dp", "-cc", "-ac", "-q", "-O", "-O3", "-O=2", "-Odecode",
                     "-sc", "-x", "-", "--", "-1", "-0.5", "--model", "--config"]),
    st.tuples(st.sampled_from(_names), st.text(max_size=8)).map(lambda t: f"--{t[0]}={t[1]}"),
    st.tuples(st.sampled_from(["--speculative-config", "-cc", "--compilation-config",
                               "--hf-overrides", "--foo"]),
              st.lists(st.text(alphabet="abc_+.", min_size=0, max_size=4), max_size=3))
    .map(lambda t: t[0] + "." + ".".join(t[1])),
)
_value_words = st.one_of(
    st.text(max_size=12),
    st.integers(-5, 10**6).map(str),
    st.sampled_from(["32k", "1K", "2M", "1.5K", "25.6k", "auto", "true", "false", "null",
                     "{}", '{"a": 1}', '{"method": "mtp"', "[1,2]", "x.yaml", "3", "0.9",
                     "FULL", "nan", "inf", "1e309"]),
    st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4), max_size=3)
    .map(json.dumps),
)
_tokens = st.lists(st.one_of(_flag_words, _value_words), max_size=14)
_prefixes = st.sampled_from([[], ["vllm", "serve"], ["serve"], ["vllm", "serve", "org/m"],
                             ["python", "-m", "vllm.entrypoints.openai.api_server"],
                             ["A=1", "vllm", "serve", "m"], ["vllm"], ["python", "-m", "x"]])


def _exercise(line) -> None:
    facts = Facts()
    line.to_facts(facts)
    facts.to_json()
    for edits in ({}, {"tensor-parallel-size": 1}, {"compilation-config.cudagraph_mode": "NONE"},
                  {"enforce-eager": False, "speculative-config": {"method": "ngram"}}):
        text = render_command(line, set=edits, remove=["port", "speculative-config.model"])
        again = parse_serve_string(text)  # what we render must parse again
        assert again.env == line.env
        if line.model is not None and line.origins.get("model") == "cli":
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
@given(text=st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(_flag_words, _value_words), max_size=12).map(
        lambda ws: "vllm serve m " + " ".join(ws)),
    st.text(alphabet=" \\\n'\"-=.{}abcO3tp", max_size=80),
))
def test_serve_string_fuzz(text):
    try:
        line = parse_serve_string(text)
    except InputError:
        return
    _exercise(line)


@FUZZ
@given(prefix=st.sampled_from(["", "vllm serve m "]), tokens=_tokens)
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
    if not line.duplicates and not line.unknown_flags:
        assert again.options == line.options


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
    ops=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 10**6), st.text(max_size=30)),
                 max_size=12),
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
@given(data=st.one_of(st.text(max_size=400), st.binary(max_size=200),
                      st.lists(st.sampled_from([
                          "PyTorch version: 2.6.0", "vLLM Version: 0.9.1 (git sha: zz", "GPU 0: ",
                          "GPU models and configuration:", "GPU Topology:", "\tGPU0\tGPU1",
                          "GPU0\t X \tNV4", "GPU1\tSYS\t X ", "[pip3] torch==", "[conda] x",
                          "==============================", "   Environment Variables",
                          "A=B", "Link Type between two GPUs", "GPU0 0 XGMI", "", "vLLM Build Flags:",
                          "CUDA Archs: ;", "CUDA Version: 99.9", "MIG 1g.5gb Device 0:",
                      ]), max_size=25).map("\n".join)))
def test_random_report_text(data):
    try:
        facts = parse_report(data, "random")
    except InputError as err:
        assert err.source == "random"
        return
    facts.to_json()
