"""GPU names as people type them on the command line (``--gpu 4090``, ``rtx4090``,
``h100-80gb``, ``MI300X``, ``gb10``), ``--gpu list`` and a family named without its size."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from doctor_forks import doctor_run

from vllm_doctor.errors import InputError
from vllm_doctor.facts.hardware import resolve_gpu
from vllm_doctor.knowledge import gpus

ROOT = Path(__file__).resolve().parents[1]
QWEN3_8B = ROOT / "tests" / "fixtures" / "memory-logs" / "configs" / "Qwen3-8B"
LLAMA_70B = (
    ROOT / "tests" / "fixtures" / "memory-logs" / "configs" / "Llama-3.1-Nemotron-70B-Instruct-HF"
)


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return doctor_run(*args, timeout=120, cwd=ROOT)


# (typed, the table's spelling the facts carry, family, memory GiB or None when open)
TYPED = [
    ("4090", "RTX 4090", "GeForce RTX 4090 (and 4090 D)", 24),
    ("RTX 4090", "RTX 4090", "GeForce RTX 4090 (and 4090 D)", 24),
    ("rtx4090", "RTX 4090", "GeForce RTX 4090 (and 4090 D)", 24),
    ("RTX-4090", "RTX 4090", "GeForce RTX 4090 (and 4090 D)", 24),
    ("4090D", "RTX 4090 D", "GeForce RTX 4090 (and 4090 D)", 24),
    ("3090", "RTX 3090", "GeForce RTX 3090 / 3090 Ti", 24),
    ("3090ti", "RTX 3090 Ti", "GeForce RTX 3090 / 3090 Ti", 24),
    ("4060", "RTX 4060", "GeForce RTX 4060 / 4050", None),
    ("1080", "GTX 1080", "GeForce GTX 10 series", None),
    ("A6000", "RTX A6000", "RTX A6000", 48),
    ("H100", "H100", "H100", None),
    ("h100-80gb", "H100 80GB", "H100", 80),
    ("H100 80G", "H100 80GB", "H100", 80),
    ("a100-80g", "A100 80GB", "A100", 80),
    ("H100 PCIe", "H100 PCIe", "H100 PCIe", 80),
    ("MI300X", "MI300X", "Instinct MI300X", 192),
    ("mi300x", "MI300X", "Instinct MI300X", 192),
    ("gb10", "GB10", "GB10 (DGX Spark)", 128),
    ("l40s", "L40S", "L40S", 48),
    ("rx7900xtx", "RX 7900 XTX", "Radeon RX 7900 XTX", 24),
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "H100", 80),
]


@pytest.mark.parametrize("typed, spelled, family, memory", TYPED)
def test_typed_names_resolve(typed, spelled, family, memory):
    match = resolve_gpu(typed)
    assert (match.name, match.family.name, match.memory_gib) == (spelled, family, memory)


@pytest.mark.parametrize(
    "typed, families",
    [
        ("6000", {"RTX PRO 6000 Blackwell", "RTX 6000 Ada Generation", "Quadro RTX 6000"}),
        ("7900", {"Radeon RX 7900 XTX", "Radeon RX 7900 XT", "Radeon RX 7900 GRE"}),
    ],
)
def test_a_number_several_families_have_names_them(typed, families):
    with pytest.raises(InputError) as err:
        resolve_gpu(typed)
    assert "could be any of" in str(err.value)
    for family in families:
        assert family in str(err.value)


@pytest.mark.parametrize(
    "typed, close",
    [("4095", "RTX 4090"), ("H1OO", "H100"), ("RTX 9999", None), ("Zorblax 9000", None)],
)
def test_unknown_names_name_the_closest_spellings(typed, close):
    with pytest.raises(InputError) as err:
        resolve_gpu(typed)
    assert "not a GPU the GPU table knows" in str(err.value) and "--gpu list" in str(err.value)
    if close:
        assert close in str(err.value).split("close matches:")[1]
    # never the unrelated families difflib found from the bare characters before
    assert "P40" not in str(err.value) and "B300" not in str(err.value)


def test_every_spelling_resolves_to_its_own_family():
    for family in gpus.families():
        assert family.spellings, family.name
        for spelling in family.spellings:
            match = gpus.resolve(spelling)
            assert isinstance(match, gpus.GpuMatch), spelling
            assert match.family == family, (spelling, match.family.name)


def test_check_reads_4090_as_the_rtx_4090():
    result = doctor(
        "check",
        "--gpu",
        "4090",
        "--gpus",
        "1",
        "--offline",
        "--model-config",
        str(QWEN3_8B),
        "--format",
        "json",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-8B",
    )
    assert result.returncode in (0, 1), result.stderr
    facts = json.loads(result.stdout)["facts"]["facts"]
    assert facts["gpu.names"]["value"] == ["RTX 4090"]
    assert facts["gpu.names"]["detail"].startswith("--gpu 4090 (read as RTX 4090)")
    assert facts["gpu.capabilities"]["value"] == [89]
    assert facts["gpu.memory_total_mib"]["value"] == 24 * 1024


def test_a_bare_family_names_its_sizes_and_decides_nothing_on_the_smallest():
    """--gpu H100: 64, 80 or 94 GiB. The note names the sizes and how to say which; the
    memory line gives each size its own figures (the 64 GiB card computed as 64 GiB, not as
    the 80 GiB row of the usable-memory table)."""
    result = doctor(
        "check",
        "--gpu",
        "H100",
        "--gpus",
        "2",
        "--offline",
        "--model-config",
        str(LLAMA_70B),
        "--",
        "vllm",
        "serve",
        "nvidia/Llama-3.1-Nemotron-70B-Instruct-HF",
        "-tp",
        "2",
        "--max-model-len",
        "65536",
    )
    assert result.returncode in (0, 1), result.stderr
    out = result.stdout
    assert "the H100 comes with 64, 80 or 94 GiB" in out
    assert '--gpu "H100 80GB"' in out
    memory = next(line for line in out.splitlines() if "Memory" in line)
    with_64, with_80 = memory.split("; with 80 GiB: ")[0], memory.split("; with 80 GiB: ")[1]
    assert with_64.split("with 64 GiB: ")[1] != with_80.split("; with 94 GiB")[0]
    assert "no KV cache" in with_64  # 65.7 GiB of weights per GPU do not leave any on 64 GiB
    # the sizes disagree (none on 64 GiB, room on 94 GiB): no memory error is decided
    assert "MEM003" not in out.split("Cannot decide")[0]


def test_gpu_list_prints_the_table():
    result = doctor("check", "--gpu", "list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["family", "memory", "GiB"]
    rows = {line.split("  ")[0].strip(): line for line in lines[1:]}
    assert "64, 80, 94" in rows["H100"] and "sm_90" in rows["H100"]
    assert "gfx942" in rows["Instinct MI300X"] and "192" in rows["Instinct MI300X"]
    assert "sm_89" in rows["GeForce RTX 4090 (and 4090 D)"]
    assert len([r for r in rows if r]) >= len(gpus.families())
    assert doctor("facts", "--gpu", "list").stdout == result.stdout


@pytest.mark.parametrize(
    "typed, size, write",
    [("A100 48GB", 48, "A100 40GB"), ("H100 96GB", 96, "H100 80GB"), ("h100-32g", 32, "H100 80GB")],
)
def test_a_size_the_family_does_not_come_with_is_refused(typed, size, write):
    """Judged as typed it would be a GPU that does not exist; judged for every size it would
    drop what was typed: exit 2 naming the sizes, with a name that works."""
    result = doctor("check", "--offline", "--gpu", typed)
    assert result.returncode == 2, result.stdout
    assert f"not {size} GiB" in result.stderr and f'(--gpu "{write}")' in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1


def test_a_product_total_in_the_name_is_read_as_the_family_alone():
    """ "GH200 480GB" states CPU+GPU memory: the family's GPU sizes stay open, and the size to
    name is written without the 480GB."""
    result = doctor("check", "--offline", "--gpu", "GH200 480GB", "-q")
    assert result.returncode in (0, 1), result.stderr
    first = result.stdout.splitlines()[0]
    assert '96 or 144 GiB: name one (--gpu "GH200 96GB")' in first
    assert "480GB 96GB" not in result.stdout


def test_the_leonardo_a100_64gb_is_a_size_the_a100_comes_with():
    """CINECA's Leonardo runs a custom A100 SXM4 64GB (its HPC system page): a real size,
    judged as typed, never refused as a GPU that does not exist."""
    result = doctor("check", "--offline", "--gpu", "A100 64GB", "--format", "json")
    assert result.returncode in (0, 1), result.stderr
    import json

    memory = json.loads(result.stdout)["facts"]["facts"]["gpu.memory_total_mib"]
    assert memory["value"] == 64 * 1024 and memory["inferred"] is True
