"""Calibration: known-good serve commands from vLLM itself draw no error finding.

tests/fixtures/calibration/corpus.json is built by tools/calibration_corpus.py from each
release's own tree (its docstrings and the ``--option value`` examples of its help texts and
messages) and from vLLM's documentation at a release tag (sources.txt). Every command is
judged in-process the way ``vllm-doctor check --vllm-version <its release>`` judges it, with
the hardware its source names; an error finding on a command vLLM itself documents for that
release is a defect of the doctor (or, written in exclusions.json, of vLLM's text).
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from pathlib import Path

import pytest

from vllm_doctor.commands.check import judge
from vllm_doctor.engine.loader import default_rules_dir, load_rules
from vllm_doctor.errors import InputError
from vllm_doctor.facts.collect import CollectOptions
from vllm_doctor.facts.hardware import TargetHardware

CORPUS = Path(__file__).parent / "fixtures" / "calibration" / "corpus.json"
ENTRIES = json.loads(CORPUS.read_text(encoding="utf-8"))["entries"]


def _errors(entry: dict, rules) -> list[str]:
    hardware = entry.get("hardware") or {}
    target = TargetHardware(gpu=hardware.get("gpu"), count=hardware.get("gpus")) \
        if hardware else None
    options = CollectOptions(serve_tokens=shlex.split(entry["command"]),
                             vllm_version=entry["release"], probe_machine=False, target=target)
    try:
        doc = judge(options, rules)
    except InputError as err:
        return [f"bad input (exit 2): {err}"]
    return [f"{f.rule.code}: " + "; ".join(f"{e.path} = {e.value}" for e in f.evidence)
            for f in doc.applies if f.rule.severity == "error"]


def test_the_corpus_is_broad():
    releases = Counter(e["release"] for e in ENTRIES)
    assert len(ENTRIES) >= 1000 and len(releases) >= 50
    assert all(e["source"] for e in ENTRIES)
    # every exclusion carries its reason
    assert all(len(e["exclude"]) > 40 for e in ENTRIES if "exclude" in e)


def test_known_good_commands_draw_no_error():
    rules = load_rules([default_rules_dir()])
    failures = []
    for entry in ENTRIES:
        if entry.get("exclude"):
            continue
        errors = _errors(entry, rules)
        if errors:
            failures.append(f"{entry['release']}: {entry['command']} ({entry['source']}): "
                            + " | ".join(errors))
    assert not failures, f"{len(failures)} known-good commands draw errors:\n" + "\n".join(
        failures[:20])


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.get("exclude")][:1],
                         ids=lambda e: f"{e['release']}")
def test_an_excluded_command_is_excluded_for_its_error(entry):
    # the reason is about a real refusal: the doctor reports it
    assert _errors(entry, load_rules([default_rules_dir()]))


def test_a_corrected_command_that_would_still_fail_is_not_printed(tmp_path):
    # a typo fixed on a two-GPU report keeps -tp 4: the corrected command would still be an
    # HW005 error there, so it is marked, and not offered as ready to run
    text = (Path(__file__).parent / "fixtures/reports/rtx5060ti_x2_pcie.txt").read_text()
    report = tmp_path / "collect-env.txt"
    report.write_text(text.replace("0.23.1rc1.dev20+g0d8097964 (git sha: 0d8097964)", "0.23.0"))
    rules = load_rules([default_rules_dir()])
    options = CollectOptions(serve_tokens=["vllm", "serve", "m", "--tensor-parallel-sise", "4"],
                             report=report, probe_machine=False)
    doc = judge(options, rules)
    [args100] = [f for f in doc.applies if f.rule.code == "ARGS100"]
    [evidence] = [e for e in args100.evidence if e.path == "release.corrected_command"]
    assert evidence.value.startswith("vllm serve m --tensor-parallel-size 4")
    assert "would still draw HW005" in evidence.value
    # on two GPUs with -tp 2 the corrected command passes and is printed as it is
    options = CollectOptions(serve_tokens=["vllm", "serve", "m", "--tensor-parallel-sise", "2"],
                             report=report, probe_machine=False)
    doc = judge(options, rules)
    [args100] = [f for f in doc.applies if f.rule.code == "ARGS100"]
    [evidence] = [e for e in args100.evidence if e.path == "release.corrected_command"]
    assert evidence.value == "vllm serve m --tensor-parallel-size 2"
