"""The stack around the judged vLLM release (facts/release_stack.py) over the shipped
knowledge read from the real wheels, a report's package list, explain --log's package
messages, and the rules ENV102/ENV103/HW009/HW100-HW102."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from doctor_forks import doctor_run
from judging import facts_with, verdict

from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.report import parse_report
from vllm_doctor.knowledge import load, stack

REPO = Path(__file__).resolve().parent.parent
REAL_REPORT = REPO / "tests" / "fixtures" / "reports" / "rtx5060ti_x2_pcie.txt"


def doctor(*args: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "FLASHINFER"))}
    return doctor_run(*args, env=environ, timeout=180)


def report_024(tmp_path: Path) -> Path:
    """The real RTX 5060 Ti report, as a vLLM 0.24.0 install whose flashinfer-cubin was left
    at 0.6.8.post1, with the `pip list | grep flashinfer` the user pasted below it."""
    text = REAL_REPORT.read_text()
    text = text.replace("[pip3] flashinfer-python==0.6.9", "[pip3] flashinfer-python==0.6.12")
    lines = [
        "vLLM Version                 : 0.24.0" if line.startswith("vLLM Version") else line
        for line in text.splitlines()
    ]
    lines += [
        "",
        "$ pip list | grep flashinfer",
        "flashinfer-cubin                  0.6.8.post1",
        "flashinfer-python                 0.6.12",
    ]
    path = tmp_path / "report.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


# -- the knowledge ------------------------------------------------------------------------------


def test_flashinfer_python_check_read_from_every_covered_wheel():
    table = stack.table("flashinfer-python")
    assert table is not None
    for version in ("0.5.3", "0.6.12", "0.6.14"):
        check = table.at(version)["check:flashinfer-cubin"]
        assert check["match"] == "equal"
        assert check["bypass"] == ["FLASHINFER_DISABLE_VERSION_CHECK"]
        assert check["file"] == "flashinfer/jit/env.py"
        assert table.at(version)["check:flashinfer-jit-cache"]["match"] == "prefix"
        assert check["fatal"] is True
    # 0.7.2.post1 catches its own check, logs it and ignores the cubin package
    assert table.at("0.7.2.post1")["check:flashinfer-cubin"]["fatal"] is False


def test_kernel_images_cover_every_release_on_both_machines():
    table = load("kernel_images")
    assert table.releases == load("releases").releases
    at = table.at("0.26.0")
    for machine in ("x86_64", "aarch64"):
        groups = at[f"vllm._C_stable_libtorch@{machine}"]["groups"]
        assert any("sm_120" in g["images"] for g in groups)
    # the x86_64 build carries sm_75 objects the aarch64 one does not, and the reverse sm_87
    images = {
        m: {i for g in at[f"vllm._C_stable_libtorch@{m}"]["groups"] for i in g["images"]}
        for m in ("x86_64", "aarch64")
    }
    assert "sm_75" in images["x86_64"] - images["aarch64"]
    assert "sm_87" in images["aarch64"] - images["x86_64"]


# -- a report's package list --------------------------------------------------------------------


def test_report_reads_pasted_pip_list_and_the_machine(tmp_path):
    facts = parse_report(report_024(tmp_path).read_text(), "report")
    assert facts.value("packages.flashinfer-cubin") == "0.6.8.post1"
    assert facts.value("packages.flashinfer-python") == "0.6.12"
    assert facts.value("vllm.machine") == "x86_64"
    # collect-env never lists flashinfer-jit-cache: unknown, not absent
    assert "flashinfer-jit-cache" in (facts.why_missing("packages.flashinfer-jit-cache") or "")


def test_report_pip_list_ignores_prose_and_unknown_names(tmp_path):
    text = REAL_REPORT.read_text() + "\nsomepackage 1.0\nthe version 2.0 is fine\n"
    facts = parse_report(text, "report")
    assert facts.get("packages.somepackage") is None


# -- the pair FlashInfer refuses (the example) -----------------------------------------------


def test_check_report_flashinfer_pair_is_an_error_naming_versions_and_pins(tmp_path):
    run = doctor(
        "check", "--report", str(report_024(tmp_path)), "--format", "json",
        "--select", "ENV10", "--", "vllm", "serve", "Qwen/Qwen3-8B",
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    findings = {f["code"]: f for f in json.loads(run.stdout)["findings"]}
    env103 = findings["ENV103"]
    assert env103["severity"] == "error"
    said = json.dumps(env103["evidence"])
    assert "flashinfer-cubin 0.6.8.post1" in said and "flashinfer-python 0.6.12" in said
    assert "flashinfer-python==0.6.12, flashinfer-cubin==0.6.12" in said
    assert "pip install 'flashinfer-cubin==0.6.12'" in said
    # the refused partner is that finding, not a second one (ENV102 may still name the
    # report's NCCL, older than the one torch 2.11.0's wheel requires)
    assert "flashinfer-cubin" not in json.dumps(findings.get("ENV102", {}).get("evidence"))


def test_pair_with_partner_unknown_cannot_decide():
    facts = facts_with({"vllm.version": "0.24.0", "packages.flashinfer-python": "0.6.12"})
    assert verdict("ENV103", facts) == UNDECIDED
    assert "flashinfer-cubin" in facts.why_missing("release.stack.pair_mismatches")


def test_companion_requirements_between_companions():
    facts = facts_with(
        {"vllm.version": "0.26.0", "packages.instanttensor": "0.1.8", "vllm.machine": "x86_64"}
    )
    # instanttensor 0.1.8 is outside >=0.1.9, and its safe_open lacks the copy keyword 0.26.0
    # passes: one cause, one finding, the precise one (ENV104, release.api.missing)
    assert facts.value("release.stack.unmet_requirements") == []
    assert verdict("ENV102", facts) == NOT_APPLIES
    assert verdict("ENV104", facts) == APPLIES
    # ahead of the pin, with every name and keyword 0.26.0 uses: the requirement alone
    ahead = facts_with({"vllm.version": "0.26.0", "packages.flashinfer-python": "0.6.16.post3"})
    assert ahead.value("release.stack.unmet_requirements") == [
        "flashinfer-python 0.6.16.post3: vLLM 0.26.0 requires flashinfer-python==0.6.14"
    ]
    assert verdict("ENV102", ahead) == APPLIES
    assert verdict("ENV104", ahead) == NOT_APPLIES


# -- compiled kernels on the GPU ---------------------------------------------------------------------


def test_gb10_on_0_26_0_names_extensions_without_an_image():
    facts = facts_with(
        {"vllm.version": "0.26.0", "gpu.capabilities": [121], "gpu.min_capability": 121,
         "vllm.machine": "aarch64"}
    )  # fmt: skip
    extensions = facts.value("release.kernels.extensions")
    assert extensions["vllm._C_stable_libtorch"] == "partial"
    assert extensions["vllm._flashmla_C"] == "none"
    without = " | ".join(facts.value("release.kernels.without_image"))
    for module in ("vllm._flashmla_C", "vllm._qutlass_C", "vllm.vllm_flash_attn._vllm_fa3_C"):
        assert module in without
    assert "sm_90a" in without and "sm_121" in without
    assert facts.value("release.kernels.core_without_image") is False
    assert verdict("HW102", facts) == APPLIES
    assert verdict("HW100", facts) == NOT_APPLIES


def test_rtx_5090_on_0_8_0_has_no_image_for_the_core_kernels():
    facts = facts_with(
        {"vllm.version": "0.8.0", "gpu.capabilities": [120], "gpu.min_capability": 120,
         "vllm.machine": "x86_64"}
    )  # fmt: skip
    assert facts.value("release.kernels.core_without_image") is True
    assert "images sm_70 + sm_75 + sm_80" in facts.get("release.kernels.core_without_image").detail
    assert verdict("HW100", facts) == APPLIES


def test_h100_on_0_26_0_core_runs():
    facts = facts_with(
        {"vllm.version": "0.26.0", "gpu.capabilities": [90], "gpu.min_capability": 90,
         "vllm.machine": "x86_64"}
    )  # fmt: skip
    assert facts.value("release.kernels.core_without_image") is False
    assert facts.value("release.kernels.extensions")["vllm.vllm_flash_attn._vllm_fa3_C"] == "sass"
    assert verdict("HW100", facts) == NOT_APPLIES
    assert verdict("HW101", facts) == NOT_APPLIES


def test_machine_unknown_is_judged_where_both_builds_agree():
    facts = facts_with(
        {"vllm.version": "0.26.0", "gpu.capabilities": [75], "gpu.min_capability": 75}
    )
    assert facts.value("release.kernels.machine") == "unknown"
    # x86_64 has sm_75 machine code in the core, aarch64 does not
    assert facts.value("release.kernels.extensions")["vllm._C_stable_libtorch"].startswith(
        "unknown ("
    )


def test_no_gpu_capability_cannot_decide():
    facts = facts_with({"vllm.version": "0.26.0"})
    assert verdict("HW102", facts) == UNDECIDED


# -- explain --log ---------------------------------------------------------------------------------


def test_explain_names_flashinfer_and_deepgemm_messages(tmp_path):
    log = tmp_path / "crash.log"
    log.write_text(
        "RuntimeError: Could not find nvcc and default cuda_home='/usr/local/cuda' doesn't exist\n"
        "RuntimeError: CUDA driver error (/workspace/deep_gemm/jit/handle.hpp:141): 200 "
        "(CUDA_ERROR_INVALID_IMAGE, device kernel image is invalid)\n"
    )
    run = doctor("explain", "--log", str(log), "--vllm-version", "0.26.0", "--format", "json")
    assert run.returncode == 1, run.stderr
    data = json.loads(run.stdout)
    assert "HW009" in {f["code"] for f in data["known_failures"]}
    (nvcc,) = [m for m in data["package_messages"] if "Could not find nvcc" in m["template"]]
    assert nvcc["package"] == "flashinfer-python"
    assert nvcc["raised_at"][0]["file"] == "flashinfer/jit/cpp_ext.py"
    assert "pins flashinfer-python==0.6.14" in nvcc["note"]


@pytest.mark.parametrize("code", ["ENV102", "ENV103", "HW009", "HW010", "HW100", "HW101", "HW102"])
def test_rule_cases_pass(code):
    run = doctor("rules", "test", code)
    assert run.returncode == 0, run.stdout + run.stderr


def test_what_if_release_judges_only_the_packages_named_with_it():
    """--vllm-version 0.26.0 --package instanttensor==0.1.8: the same what-if, judged against
    the release's Requires-Dist (extra instanttensor: >=0.1.9, vllm-project/vllm#46868); a
    version installed on this machine is not, since installing 0.26.0 replaces it."""

    def what_if(packages: dict | None, seen: dict) -> Facts:
        given = Facts()
        for path, value in seen.items():
            given.set(path, value, Source.MACHINE, "test")
        return collect_facts(
            CollectOptions(
                serve_string="vllm serve Qwen/Qwen3-8B",
                probe_machine=False,
                environ={},
                given=given,
                vllm_version="0.26.0",
                packages=packages,
            )
        )

    named = what_if({"instanttensor": "0.1.8"}, {})
    # outside the requirement, and lacking the copy keyword 0.26.0 passes: ENV104's finding
    # (one cause, one finding), so the requirement leaves instanttensor out
    assert named.value("release.stack.unmet_requirements") == []
    assert any("safe_open takes no keyword copy" in line
               for line in named.value("release.api.missing"))  # fmt: skip
    assert verdict("ENV104", named) == APPLIES
    assert verdict("ENV102", named) == NOT_APPLIES
    assert verdict("ENV102", what_if({"instanttensor": "0.1.9"}, {})) == NOT_APPLIES
    assert verdict("ENV104", what_if({"instanttensor": "0.1.9"}, {})) == NOT_APPLIES
    seen = what_if(None, {"packages.instanttensor": "0.1.8"})
    assert seen.value("release.stack.unmet_requirements") is None
    assert "--package NAME==VERSION" in seen.why_missing("release.stack.unmet_requirements")
    assert verdict("ENV102", seen) == UNDECIDED
    assert verdict("ENV104", seen) == UNDECIDED


def test_jetson_core_without_published_image_is_not_decided():
    """vLLM 0.19.0's published aarch64 build has no sm_110 image (vllm-project/vllm#39233),
    NVIDIA's Jetson Thor build has: on a Jetson the prediction does not decide."""
    values = {
        "vllm.version": "0.19.0",
        "vllm.machine": "aarch64",
        "gpu.capabilities": [110],
        "gpu.min_capability": 110,
    }
    thor = facts_with({**values, "gpu.names": ["NVIDIA Jetson AGX Thor"]})
    assert thor.value("release.kernels.core_without_image") is None
    assert "Jetson" in thor.why_missing("release.kernels.core_without_image")
    assert "sm_110" in thor.why_missing("release.kernels.core_without_image")
    assert verdict("HW100", thor) == UNDECIDED
    # the same images judged for a GPU whose name the table does not place on a Jetson
    unnamed = facts_with(values)
    assert unnamed.value("release.kernels.core_without_image") is True
    assert verdict("HW100", unnamed) == APPLIES


def test_a_gpu_sold_only_in_aarch64_systems_judges_the_aarch64_build():
    facts = facts_with(
        {"vllm.version": "0.26.0", "gpu.names": ["NVIDIA GB10"], "gpu.capabilities": [121],
         "gpu.min_capability": 121}
    )  # fmt: skip
    assert facts.value("release.kernels.machine") == "aarch64"
    facts = facts_with(
        {"vllm.version": "0.26.0", "gpu.names": ["Tesla T4"], "gpu.capabilities": [75],
         "gpu.min_capability": 75}
    )  # fmt: skip
    assert facts.value("release.kernels.machine") == "unknown"


def test_jetson_thor_published_wheels_of_0_19_0_lack_sm_110():
    facts = facts_with(
        {"vllm.version": "0.19.0", "gpu.names": ["NVIDIA Thor"], "gpu.capabilities": [110],
         "gpu.min_capability": 110}
    )  # fmt: skip
    # HW100 stays undecided on a Jetson module; the published build's lack is said apart
    assert facts.value("release.kernels.core_without_image") is None
    published = " | ".join(facts.value("release.kernels.published_core_without_image"))
    assert "vllm._C" in published and "judged for sm_110" in published
    assert verdict("HW100", facts) == UNDECIDED
    assert verdict("HW120", facts) == APPLIES


@pytest.mark.parametrize(
    ("triton", "environ", "lacking"),
    [
        ("3.5.1", {}, "sm_121a"),  # CUDA 12.8's ptxas
        ("3.6.0", {}, ""),  # ptxas-blackwell from CUDA 12.9
        ("3.5.1", {"env.TRITON_PTXAS_PATH": "/usr/local/cuda/bin/ptxas"}, ""),
    ],
)
def test_triton_bundled_ptxas_against_a_gb10(triton, environ, lacking):
    facts = facts_with(
        {"gpu.names": ["NVIDIA GB10"], "gpu.capabilities": [121], "gpu.min_capability": 121,
         "packages.triton": triton, **environ}
    )  # fmt: skip
    found = facts.value("release.kernels.triton_ptxas_lacks_gpu")
    assert found is not None
    assert (lacking in found) if lacking else found == ""
    assert verdict("HW121", facts) == (APPLIES if lacking else NOT_APPLIES)


def test_triton_version_unknown_leaves_its_ptxas_undecided():
    facts = facts_with({"gpu.names": ["NVIDIA GB10"], "gpu.capabilities": [121]})
    assert facts.value("release.kernels.triton_ptxas_lacks_gpu") is None
    assert verdict("HW121", facts) == UNDECIDED


def test_flashinfer_cubins_are_judged_on_an_aarch64_gpu():
    """FlashInfer's cubin package is one pure-Python wheel (read once, as x86_64): its cubins
    are judged on a GB10 although the aarch64 build is the one judged there."""
    facts = facts_with(
        {"vllm.version": "0.26.0", "gpu.names": ["NVIDIA GB10"], "gpu.capabilities": [121],
         "gpu.min_capability": 121, "packages.flashinfer-python": "0.6.8.post1",
         "packages.flashinfer-cubin": "0.6.8.post1"}
    )  # fmt: skip
    assert facts.value("release.kernels.machine") == "aarch64"
    companions = facts.value("release.kernels.companions")
    assert companions["flashinfer-cubin 0.6.8.post1 flashinfer_cubin/cubins/batched_gemm"] == "none"
