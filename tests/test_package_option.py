"""`--package NAME==VERSION`: a companion package's what-if version, set where a report's pip
list or this machine's metadata would set it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vllm_doctor.cli import app
from vllm_doctor.commands.inputs import parse_packages
from vllm_doctor.errors import InputError
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.facts.model import Source

REPORT = Path(__file__).parent / "fixtures" / "reports" / "h100x8_nvlink_nightly.txt"


def facts_json(*args: str) -> dict:
    done = CliRunner().invoke(app, ["facts", "--format", "json", *args])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)["facts"]


def test_package_replaces_the_reports_pip_line_and_adds_unlisted_ones():
    plain = facts_json("--report", str(REPORT))
    assert plain["packages.flashinfer-python"]["value"] == "0.6.18"
    assert "packages.flashinfer-cubin" not in plain
    facts = facts_json(
        "--report",
        str(REPORT),
        "--package",
        "flashinfer-python==0.6.12",
        "--package",
        "FlashInfer_Cubin==0.6.8.post1",
    )
    assert facts["packages.flashinfer-python"] == {
        "value": "0.6.12",
        "source": Source.USER,
        "detail": "--package flashinfer-python==0.6.12",
    }
    # the canonical name, as the report's pip list and the metadata give it
    assert facts["packages.flashinfer-cubin"]["value"] == "0.6.8.post1"
    # the rest of the report stays
    assert facts["vllm.version"]["value"] == "0.29.1rc1.dev350+gd5f0a6e82"


def test_vllm_and_torch_go_through_their_own_what_if_options():
    facts = collect_facts(
        CollectOptions(probe_machine=False, **_options("vllm==0.26.0", "torch==2.11.0+cu130"))
    )
    assert facts.value("vllm.version") == "0.26.0"
    assert facts.get("vllm.version").detail == "--vllm-version"
    assert facts.value("torch.cuda_version") == "13.0"
    assert "packages.vllm" not in facts


def _options(*words: str) -> dict:
    from vllm_doctor.commands.inputs import collect_options

    made = collect_options(None, None, None, None, None, None, None, None, packages=words)
    return {
        "vllm_version": made.vllm_version,
        "torch_version": made.torch_version,
        "packages": made.packages,
    }


@pytest.mark.parametrize(
    "word",
    [
        "flashinfer-python",
        "flashinfer-python>=0.6",
        "flashinfer-python==0.6.*",
        "flashinfer-python==banana",
        "flashinfer-python[jit]==0.6.12",
        "flashinfer-python==0.6.12; python_version>'3'",
        "==0.6.12",
    ],
)
def test_bad_words_are_refused(word):
    with pytest.raises(InputError, match="--package"):
        parse_packages([word])


def test_contradictions_are_refused():
    with pytest.raises(InputError, match="given twice"):
        parse_packages(["lmcache==0.3.8", "LMCache==0.3.9"])
    with pytest.raises(InputError, match=r"contradicts --vllm-version 0\.25\.0"):
        app(
            args=["check", "--package", "vllm==0.24.0", "--vllm-version", "0.25.0"],
            standalone_mode=False,
        )


def test_check_help_names_the_option():
    # bench/reports2026/measure.py passes a report's packages through it once help shows it
    done = CliRunner().invoke(app, ["check", "--help"], env={"COLUMNS": "200"})
    assert "--package" in done.stdout
