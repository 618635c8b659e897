"""What pip check would say before serving: each released version's Requires-Dist
(knowledge/requires.py, tools/pypi_requires.py) against the installed or reported versions
(facts/installed_requires.py, rule ENV070)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from judging import facts_with, verdict
from scripts import load_script

from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.report import parse_report
from vllm_doctor.knowledge import requires

REPO = Path(__file__).resolve().parent.parent


# -- the knowledge ------------------------------------------------------------------------------


def test_torchvision_pins_its_torch_release_in_every_version_read():
    table = requires.table("torchvision")
    assert "0.24.0" in table.releases and "0.25.0" in table.releases
    assert table.at("0.24.0")["requires:torch"] == ["==2.9.0"]
    assert table.at("0.25.0")["requires:torch"] == ["==2.10.0"]


def test_torch_cuda_wheel_pins_carry_their_platform_marker():
    keys = requires.table("torch").at("2.9.0")
    (cudnn,) = keys["requires:nvidia-cudnn-cu12"]
    assert cudnn.startswith("==9.10.2.21 ;") and 'platform_machine == "x86_64"' in cudnn
    assert keys.get("platform") == "x86_64"  # read from the x86_64 wheel


def test_extras_are_left_out():
    # transformers' torch requirement exists only under its [torch] extra
    assert "requires:torch" not in requires.table("transformers").at("4.57.6")


def test_named_distributions_are_looked_up_on_the_host():
    from vllm_doctor.facts.packages import packages_of_interest

    names = packages_of_interest()
    assert {"torchvision", "tokenizers", "pydantic-core", "nvidia-cudnn-cu12"} <= set(names)


# -- the facts ------------------------------------------------------------------------------------


def test_broken_pair_names_both_versions_the_requirement_and_what_it_admits():
    facts = facts_with({"packages.torchvision": "0.25.0", "packages.torch": "2.11.0"})
    (line,) = facts.value("stack.requirements.broken")
    assert line.startswith("torchvision 0.25.0 requires torch==2.10.0, but torch 2.11.0")
    assert "torch 2.10.0 of those read" in line
    fix = facts.value("stack.requirements.fix")
    assert "pip install 'torch==2.10.0'" in fix and "torchvision 0.26.0" in fix
    assert verdict("ENV070", facts) == APPLIES


def test_local_labels_compare_as_their_release():
    facts = facts_with({"packages.torchvision": "0.24.0+cu128", "packages.torch": "2.9.0+cu128"})
    assert facts.value("stack.requirements.broken") == []
    assert verdict("ENV070", facts) == NOT_APPLIES


def test_prerelease_is_admitted_as_pip_check_does():
    # transformers 4.57.6 requires tokenizers<=0.23.0,>=0.22.0
    facts = facts_with({"packages.transformers": "4.57.6", "packages.tokenizers": "0.23.0rc0"})
    assert facts.value("stack.requirements.broken") == []
    behind = facts_with({"packages.transformers": "4.57.6", "packages.tokenizers": "0.22.0rc0"})
    assert "tokenizers<=0.23.0,>=0.22.0" in behind.value("stack.requirements.broken")[0]


def test_local_build_cuda_wheel_pins_are_not_judged():
    values = {"vllm.machine": "x86_64", "packages.nvidia-cudnn-cu12": "9.1.0.70"}
    built = facts_with({**values, "packages.torch": "2.9.0+cu126"})
    assert built.value("stack.requirements.broken") == []
    released = facts_with({**values, "packages.torch": "2.9.0"})
    (line,) = released.value("stack.requirements.broken")
    assert "nvidia-cudnn-cu12==9.10.2.21" in line


def test_platform_marker_needs_the_machine():
    facts = facts_with({"packages.torch": "2.9.0", "packages.nvidia-cudnn-cu12": "9.1.0.70"})
    assert facts.value("stack.requirements.broken") == []  # a report that names no machine
    arm = facts_with(
        {"vllm.machine": "aarch64", "packages.torch": "2.9.0", "packages.nvidia-cudnn-cu12": "9.1"}
    )
    assert arm.value("stack.requirements.broken") == []  # the x86_64 wheel's are not aarch64's


def test_inferred_version_never_decides():
    given = Facts()
    given.set("packages.torchvision", "0.25.0", Source.REPORT, "test")
    given.infer("packages.torch", "2.11.0", "a test's guess")
    facts = collect_facts(
        CollectOptions(
            serve_string="vllm serve Qwen/Qwen3-8B", probe_machine=False, environ={}, given=given
        )
    )
    assert facts.value("stack.requirements.broken") == []
    assert verdict("ENV070", facts) == NOT_APPLIES


def test_no_version_known_cannot_decide():
    facts = facts_with({})
    assert "pip list" in facts.why_missing("stack.requirements.broken")
    assert verdict("ENV070", facts) == UNDECIDED


def test_vllm_own_pin_is_left_to_its_rules():
    # vLLM 0.26.0 pins torch==2.11.0: a torch 2.10.0 is ENV101's finding, so torchaudio
    # 2.11.0's requirement on torch 2.11.0 is not a second one
    values = {"vllm.version": "0.26.0", "packages.torch": "2.10.0", "torch.version": "2.10.0"}
    facts = facts_with({**values, "packages.torchaudio": "2.11.0"})
    assert verdict("ENV101", facts) == APPLIES
    assert not any(
        line.startswith("torchaudio") for line in facts.value("stack.requirements.broken") or []
    )
    # a torch within the pin under a torchvision built for another: this rule's alone
    within = facts_with(
        {"vllm.version": "0.26.0", "packages.torch": "2.11.0", "packages.torchvision": "0.25.0"}
    )
    assert verdict("ENV070", within) == APPLIES


def test_report_pip3_lines_are_judged():
    text = (
        "PyTorch version: 2.11.0+cpu\n"
        "[pip3] torch==2.11.0+cpu\n[pip3] torchaudio==2.10.0+cpu\n[pip3] torchvision==0.25.0+cpu\n"
    )
    facts = collect_facts(
        CollectOptions(
            serve_string="vllm serve Qwen/Qwen3-8B",
            probe_machine=False,
            environ={},
            given=parse_report(text, "report"),
        )
    )
    broken = facts.value("stack.requirements.broken")
    assert {line.split(" requires ")[0] for line in broken} == {
        "torchaudio 2.10.0+cpu",
        "torchvision 0.25.0+cpu",
    }


# -- the generator ---------------------------------------------------------------------------------


def test_requirements_keep_versions_and_markers_and_drop_extras():
    tool = load_script(REPO / "tools" / "pypi_requires.py", "pypi_requires_tool")
    text = (
        "Metadata-Version: 2.1\nName: x\nVersion: 1\n"
        "Requires-Dist: torch==2.9.0\n"
        'Requires-Dist: numpy>=1.26; python_version >= "3.12"\n'
        'Requires-Dist: numpy>=1.23; python_version < "3.12"\n'
        "Requires-Dist: filelock\n"
        'Requires-Dist: accelerate>=1.0; extra == "train"\n'
        "Requires-Dist: somethingelse>=1\n"
    )
    found = tool.requirements(text)
    assert found == {
        "torch": ["==2.9.0"],
        "numpy": ['>=1.23 ; python_version < "3.12"', '>=1.26 ; python_version >= "3.12"'],
    }


def test_range_file_reads_a_zip_member_without_the_whole_archive(tmp_path, monkeypatch):
    import io
    import zipfile

    tool = load_script(REPO / "tools" / "pypi_requires.py", "pypi_requires_tool")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("big.bin", bytes(300_000))
        archive.writestr("x-1.dist-info/METADATA", "Name: x\nRequires-Dist: torch==2.9.0\n")
    blob = buffer.getvalue()
    asked: list[tuple[int, int]] = []

    def fetch(self, first, last):
        asked.append((first, last))
        return blob[first:last]

    monkeypatch.setattr(tool._RangeFile, "_fetch", fetch)
    text = tool.wheel_metadata(
        {"url": "https://example.invalid/x-1-py3-none-any.whl", "size": len(blob)}
    )
    assert "torch==2.9.0" in text
    assert sum(last - first for first, last in asked) < len(blob)


@pytest.mark.skipif(sys.platform != "linux", reason="the x86_64 choice is a Linux wheel's")
def test_choose_files_prefers_cp312_x86_64_and_skips_yanked_and_old():
    tool = load_script(REPO / "tools" / "pypi_requires.py", "pypi_requires_tool")
    files = [
        {"filename": "x-1.0-cp312-cp312-manylinux_2_28_aarch64.whl", "upload-time": "2025-01-01"},
        {"filename": "x-1.0-cp311-cp311-manylinux_2_28_x86_64.whl", "upload-time": "2025-01-01"},
        {"filename": "x-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", "upload-time": "2025-01-01"},
        {"filename": "x-2.0-py3-none-any.whl", "upload-time": "2025-01-01", "yanked": True},
        {"filename": "x-0.1-py3-none-any.whl", "upload-time": "2020-01-01"},
    ]
    chosen = tool.choose_files({"files": files})
    assert {v: f["filename"] for v, f in chosen.items()} == {
        "1.0": "x-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    }


# -- a bare package list as the report -----------------------------------------------------------


def test_bare_pip_list_is_a_report_of_its_packages():
    text = (
        "Package        Version\n-------------- -----------\n"
        "torch          2.11.0+cpu\ntorchvision    0.25.0+cpu\ntqdm           4.67.3\n"
    )
    facts = parse_report(text, "pip-list.txt")
    assert facts.value("packages.torchvision") == "0.25.0+cpu"
    assert "package list pip-list.txt" in facts.notes[0]


@pytest.mark.parametrize(
    "text",
    [
        "torch 2.9.0\n",  # one line is no list
        "INFO 05-12 10:00:00 [api_server.py:1] started\nINFO 05-12 10:00:01 x\nWARN 05-12 1 y\n",
    ],
)
def test_text_that_is_not_a_package_list_is_refused(text):
    from vllm_doctor.errors import InputError

    with pytest.raises(InputError, match="does not look like"):
        parse_report(text, "input.txt")


# -- on the host: the installed metadata ----------------------------------------------------------


class _Installed:
    def __init__(self, version: str, requires: list[str]):
        self.version, self.requires = version, requires


def test_host_reads_the_installed_builds_own_requirements(monkeypatch):
    from importlib import metadata

    # a git build of torchvision no index has, which requires the torch it was built with
    builds = {
        "torchvision": _Installed(
            "0.26.0a0+git1234abc", ["torch==2.12.0", 'scipy; extra == "scipy"', "numpy"]
        ),
    }

    def distribution(name):
        if name in builds:
            return builds[name]
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", distribution)
    values = {"packages.torchvision": "0.26.0a0+git1234abc", "packages.torch": "2.11.0"}
    on_host = facts_with(values, source=Source.MACHINE)
    (line,) = on_host.value("stack.requirements.broken")
    assert line.startswith("torchvision 0.26.0a0+git1234abc requires torch==2.12.0")
    # the same versions from a report: the index never published that build, nothing to judge
    assert facts_with(values).value("stack.requirements.broken") == []
