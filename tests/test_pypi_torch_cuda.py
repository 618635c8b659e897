"""ENV001's warning from a bare torch version: an unlabelled torch (as PyPI's wheels are) is
judged by the CUDA its PyPI wheel requires (knowledge/data/cuda_compat.json) against the
driver's major; a labelled build or a stated CUDA is judged by ENV001's error branches."""

from __future__ import annotations

import json

import pytest
from test_inferred_hardware import doctor

from vllm_doctor.facts.derived import compute_derived
from vllm_doctor.facts.model import Facts, Source

PATH = "derived.driver_supports_pypi_torch_cuda"


def env001(*args: str) -> tuple[dict | None, dict]:
    result = doctor("check", "--format", "json", "--offline", "--select", "ENV001", *args)
    assert result.returncode in (0, 1), result.stderr
    data = json.loads(result.stdout)
    found = next((f for f in data["findings"] + data["undecided"] if f["code"] == "ENV001"), None)
    return found, data


def test_funasr_2973_bare_torch_2_11_on_driver_570_is_a_warning_naming_the_wheel():
    # modelscope/FunASR issue 2973: torch 2.11.0, driver 570.86.10 (nvidia-smi: CUDA 12.8)
    found, _ = env001("--torch-version", "2.11.0", "--driver", "570.86.10")
    assert found is not None and found["verdict"] == "applies"
    assert found["severity"] == "warning"  # the build is read from the number, not stated
    evidence = {e["fact"]: e for e in found["evidence"]}
    source = evidence[PATH]["source"]
    assert "no +cuXYZ label" in source and "cuda-toolkit" in source and "CUDA 12.8" in source


@pytest.mark.parametrize(
    "torch, driver",
    [
        ("2.11.0", "580.65.06"),  # the driver reaches CUDA 13
        ("2.11.0+cu128", "570.86.10"),  # a labelled cu128 build runs on CUDA 12.8
    ],
)
def test_no_warning_where_the_driver_or_the_label_says_otherwise(torch, driver):
    found, data = env001("--torch-version", torch, "--driver", driver)
    assert found is None and "ENV001" in data["not_applicable"]


def test_labelled_cu130_build_stays_an_error():
    found, _ = env001("--torch-version", "2.11.0+cu130", "--driver", "570.86.10")
    assert found is not None and found["severity"] == "error" and found["verdict"] == "applies"
    assert PATH not in {e["fact"] for e in found["evidence"] if e.get("value") is not None}


def derived_from(torch: str | None, driver_cuda: str | None, torch_cuda: str | None = None):
    facts = Facts()
    if torch is not None:
        facts.set("torch.version", torch, Source.USER, "--torch-version")
    if driver_cuda is not None:
        facts.set("driver.cuda_version", driver_cuda, Source.NVML, "nvidia-smi")
    if torch_cuda is not None:
        facts.set("torch.cuda_version", torch_cuda, Source.REPORT, "report")
    compute_derived(facts, only=(PATH,))
    return facts


def test_the_derived_fact_reads_the_wheel_table():
    assert derived_from("2.11.0", "12.8").value(PATH) is False
    assert derived_from("2.11.0", "13.0").value(PATH) is True
    assert derived_from("2.10.0", "12.8").value(PATH) is True  # PyPI's 2.10.0 is cu128


@pytest.mark.parametrize(
    "torch, torch_cuda",
    [
        ("2.11.0", "12.8"),  # the build is known: ENV001's own branches judge it
        ("2.11.0+cu128", None),  # a labelled build is not PyPI's wheel
        ("2.11.0a0+git1234", None),  # a pre-release (NGC, source): not a PyPI wheel
    ],
)
def test_the_derived_fact_is_absent_where_it_does_not_arise(torch, torch_cuda):
    facts = derived_from(torch, "12.8", torch_cuda)
    assert PATH not in facts and not facts.why_missing(PATH)


def test_the_derived_fact_names_what_it_needs():
    assert "driver.cuda_version" in (derived_from("2.11.0", None).why_missing(PATH) or "")
    assert "cuda_compat.json" in (derived_from("1.0.0", "12.8").why_missing(PATH) or "")
