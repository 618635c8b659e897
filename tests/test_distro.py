"""The distribution's release (``platform.os``) and the system libstdc++ inferred from it
(facts/distro.py): from a collect-env report's OS line, from ``check --platform os=ID-V``, and
the ``inferred`` condition operator that lets a rule warn, not err, on an inferred value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from doctor_forks import doctor_run

from vllm_doctor.engine.conditions import ConditionError, compile_condition
from vllm_doctor.facts.distro import os_from_text, os_from_word
from vllm_doctor.facts.model import Facts, Source

REPORTS = Path(__file__).resolve().parent / "fixtures" / "reports"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("Ubuntu 22.04.5 LTS (x86_64)", "ubuntu 22.04"),
        ("Debian GNU/Linux 12 (bookworm) (x86_64)", "debian 12"),
        ("Red Hat Enterprise Linux 9.4 (Plow) (x86_64)", "rhel 9"),
        ("Rocky Linux 8.10 (Green Obsidian) (x86_64)", "rocky 8"),
        ("Arch Linux (x86_64)", None),
    ],
)
def test_a_distribution_release_is_read_as_os_release_names_it(line, expected):
    assert os_from_text(line) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("ubuntu-22.04", "ubuntu 22.04"), ("RHEL-9", "rhel 9"), ("ubuntu", None)],
)
def test_the_stated_word_is_an_id_and_a_version(value, expected):
    assert os_from_word(value) == expected


def facts_of(*args: str) -> dict:
    run = doctor_run("facts", "--format", "json", *args, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.parametrize(
    ("report", "os_release", "level"),
    [
        # real reports (tests/fixtures/reports/SOURCES.md)
        ("rocm_mi300x.txt", "ubuntu 22.04", "3.4.30"),
        ("rtx5060ti_x2_pcie.txt", "debian 12", "3.4.30"),
        ("t4_old_layout.txt", "ubuntu 20.04", "3.4.28"),
    ],
)
def test_a_reports_os_line_gives_the_release_and_an_inferred_glibcxx(report, os_release, level):
    doc = facts_of("--report", str(REPORTS / report))
    assert doc["facts"]["platform.os"]["value"] == os_release
    assert doc["facts"]["platform.os"]["source"] == Source.REPORT
    glibcxx = doc["facts"]["platform.glibcxx"]
    assert glibcxx["value"] == level
    assert glibcxx["inferred"] is True
    assert os_release in glibcxx["detail"] and "libstdc++.so.6.0." in glibcxx["detail"]


def test_a_stated_release_infers_and_a_stated_level_wins():
    doc = facts_of("--platform", "os=ubuntu-24.04")
    assert doc["facts"]["platform.glibcxx"]["value"] == "3.4.33"
    assert doc["facts"]["platform.glibcxx"]["inferred"] is True
    doc = facts_of("--platform", "os=ubuntu-22.04", "--platform", "glibcxx=3.4.32")
    assert doc["facts"]["platform.glibcxx"]["value"] == "3.4.32"
    assert doc["facts"]["platform.glibcxx"]["source"] == Source.USER


def test_a_release_the_table_does_not_know_leaves_glibcxx_unknown_and_says_why():
    doc = facts_of("--platform", "os=fedora-41")
    assert doc["facts"]["platform.os"]["value"] == "fedora 41"
    assert "platform.glibcxx" not in doc["facts"]
    assert "fedora 41" in doc["missing"]["platform.glibcxx"]


def test_a_malformed_os_word_is_one_line_and_exit_2():
    run = doctor_run("check", "--offline", "--no-config", "--platform", "os=ubuntu", timeout=60)
    assert run.returncode == 2
    assert "'os=ubuntu' is not one of" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def env022(*words: str) -> dict:
    run = doctor_run(
        "check", "--format", "json", "--offline", "--no-config", "--elsewhere",
        "--fail-on", "never", "--gpu", "MI300X", "--package", "amd-aiter==0.1.12.post1",
        "--select", "ENV022", *[x for w in words for x in ("--platform", w)], timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    return next(f for f in doc["findings"] + doc["undecided"] if f["code"] == "ENV022")


def test_env022_warns_on_a_level_inferred_from_the_release_and_errs_on_one_given():
    inferred = env022("os=ubuntu-22.04")
    assert (inferred["verdict"], inferred["severity"]) == ("applies", "warning")
    glibcxx = next(e for e in inferred["evidence"] if e["fact"] == "platform.glibcxx")
    assert glibcxx["value"] == "3.4.30" and glibcxx["inferred"] is True
    given = env022("glibcxx=3.4.30")
    assert (given["verdict"], given["severity"]) == ("applies", "error")


def test_env022_does_not_apply_on_a_release_with_a_new_enough_libstdcxx():
    run = doctor_run(
        "check", "--format", "json", "--offline", "--no-config", "--elsewhere",
        "--fail-on", "never", "--gpu", "MI300X", "--package", "amd-aiter==0.1.12.post1",
        "--select", "ENV022", "--platform", "os=ubuntu-24.04", timeout=120,
    )  # fmt: skip
    doc = json.loads(run.stdout)
    assert "ENV022" in doc["not_applicable"]


def test_the_inferred_operator_tells_an_inferred_value_from_one_read():
    test = compile_condition({"fact": "platform.glibcxx", "inferred": True})
    facts = Facts()
    facts.infer("platform.glibcxx", "3.4.30", "the system libstdc++ of ubuntu 22.04")
    assert test.evaluate(facts).value is True
    facts = Facts()
    facts.set("platform.glibcxx", "3.4.30", Source.MACHINE, "/usr/lib/libstdc++.so.6")
    assert test.evaluate(facts).value is False
    facts = Facts()
    facts.mark_missing("platform.glibcxx", "not examined")
    assert test.evaluate(facts).value is None
    with pytest.raises(ConditionError, match="takes true or false"):
        compile_condition({"fact": "platform.glibcxx", "inferred": "yes"})
