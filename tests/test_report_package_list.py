"""A package list given as the report (`pip freeze`, `pip list`, `conda list`): the versions it
names stand for the machine's, vLLM's and torch's included; what it omits stays unknown."""

from __future__ import annotations

import pytest

from vllm_doctor.errors import InputError
from vllm_doctor.facts.report import parse_report

FREEZE = "vllm==0.11.0\ntorch==2.8.0+cu128\ntransformers==4.57.1\n"
PIP_LIST = (
    "Package                  Version\n"
    "------------------------ -----------\n"
    "torch                    2.8.0\n"
    "vllm                     0.11.1rc2.dev41+g3a1b2c3d4\n"
)
CONDA_LIST = (
    "# Name                    Version                   Build  Channel\n"
    "torch                     2.7.1                    pypi_0    pypi\n"
    "vllm                      0.10.1.1                 pypi_0    pypi\n"
)


@pytest.mark.parametrize(
    ("text", "vllm", "torch"),
    [(FREEZE, "0.11.0", "2.8.0+cu128"), (PIP_LIST, "0.11.1rc2.dev41+g3a1b2c3d4", "2.8.0"),
     (CONDA_LIST, "0.10.1.1", "2.7.1")],
)  # fmt: skip
def test_a_package_list_gives_vllm_and_torch(text, vllm, torch):
    facts = parse_report(text, "packages.txt")
    assert facts.value("vllm.version") == vllm
    assert facts.value("torch.version") == torch
    assert any("package list" in note for note in facts.notes)


def test_a_dev_build_in_the_list_is_judged_by_its_release():
    facts = parse_report(PIP_LIST, "packages.txt")
    assert facts.value("vllm.is_dev") is True
    assert facts.value("vllm.base_release") == "0.11.0"


def test_the_torch_build_label_gives_its_cuda():
    assert parse_report(FREEZE, "freeze.txt").value("torch.cuda_version") == "12.8"


def test_what_the_list_omits_is_not_known_and_the_gpus_are_not_shown():
    facts = parse_report(FREEZE, "freeze.txt")
    assert "packages.flashinfer-python" not in facts
    assert "package list" in (facts.why_missing("packages.flashinfer-python") or "")
    assert facts.why_missing("gpu.count") or facts.why_missing("gpu")


@pytest.mark.parametrize("text", ["numpy==2.1.0\nrequests==2.32.3\n", "torch==2.8.0\n"])
def test_a_list_without_vllm_or_torch_or_a_single_line_is_no_report(text):
    with pytest.raises(InputError, match="nor a package list"):
        parse_report(text, "x.txt")
