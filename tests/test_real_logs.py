"""`explain --log` on the three samples of real crash logs in bench/explain (logs-1, logs-2,
logs-3; each log's source in its index.json).

Each index entry carries the review of that log against its thread: ``right``, the curated
rules whose cause the thread bears out, and ``wrong``, the rules once seen naming a cause the
thread does not support. A curated rule outside ``right`` fails the test (a cause nobody checked
against the thread is not counted as a cause with a fix), as does a log that loses all of its
``right`` rules: the figure "cause with a fix" of real-logs*.md cannot drop unnoticed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "explain"
SAMPLES = ("logs-1", "logs-2", "logs-3")


def _entries():
    for sample in SAMPLES:
        for entry in json.loads((BENCH / sample / "index.json").read_text(encoding="utf-8")):
            yield pytest.param(sample, entry, id=f"{sample}/{entry['file']}")


@pytest.mark.parametrize("sample, entry", list(_entries()))
def test_no_log_gets_a_cause_its_thread_does_not_support(sample, entry, capsys):
    from vllm_doctor.commands.explain import explain_log

    explain_log(BENCH / sample / entry["file"], None, "json")
    named = [f["code"] for f in json.loads(capsys.readouterr().out)["known_failures"]]
    assert not set(named) & set(entry.get("wrong", {})), f"a cause known to be wrong: {named}"
    unreviewed = [code for code in named if code not in entry["right"]]
    assert not unreviewed, f"{unreviewed} not reviewed against {entry['url']}"
    if entry["right"]:
        assert set(named) & set(entry["right"]), f"no longer named ({entry['url']})"


def test_every_stored_log_is_in_its_index_with_a_source():
    for sample in SAMPLES:
        index = json.loads((BENCH / sample / "index.json").read_text(encoding="utf-8"))
        assert sorted(e["file"] for e in index) == sorted(
            p.name for p in (BENCH / sample).glob("*.log")
        )
        assert all(e["url"].startswith("https://github.com/") and e["kind"] for e in index)


def test_a_message_raised_from_a_variable_is_named_in_a_real_log(capsys):
    """logs-2/44411: the engine core's `Exception: WorkerProc initialization failed ...`
    (built into `e`, then `raise e from None`) is the catalogue's message for that log."""
    from vllm_doctor.commands.explain import explain_log

    explain_log(BENCH / "logs-2" / "44411.log", None, "json")
    messages = json.loads(capsys.readouterr().out)["vllm_messages"]
    assert messages[0]["template"].startswith(
        "WorkerProc initialization failed due to an exception"
    )
