"""The platform and the container's identity (facts/platform.py): WSL2, containers, the
system libstdc++, the UID and passwd, HOME and the caches; the GPUs' gfx targets and shared
memory from their names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vllm_doctor.facts import platform
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.facts.hardware import TargetHardware
from vllm_doctor.facts.model import Facts, Source

REPORTS = Path(__file__).parent / "fixtures" / "reports"


def fake_root(tmp_path: Path, kernel: str, docker: bool = False, libstdcxx: int | None = None):
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text(kernel + "\n")
    if docker:
        (tmp_path / ".dockerenv").write_text("")
    if libstdcxx is not None:
        lib = tmp_path / "usr/lib/x86_64-linux-gnu"
        lib.mkdir(parents=True)
        (lib / f"libstdc++.so.6.0.{libstdcxx}").write_bytes(b"\x7fELF")
        (lib / "libstdc++.so.6").symlink_to(f"libstdc++.so.6.0.{libstdcxx}")
    return tmp_path


def test_wsl2_kernel_container_and_libstdcxx(tmp_path):
    root = fake_root(tmp_path, "6.6.87.2-microsoft-standard-WSL2", docker=True, libstdcxx=30)
    facts = Facts()
    platform.collect_platform(facts, {"HOME": str(tmp_path)}, root)
    assert facts.value("platform.kernel") == "6.6.87.2-microsoft-standard-WSL2"
    assert facts.value("platform.wsl") is True
    assert facts.value("platform.container") is True
    assert facts.value("platform.glibcxx") == "3.4.30"
    assert facts.get("platform.glibcxx").source == Source.MACHINE


def test_a_plain_host(tmp_path):
    root = fake_root(tmp_path, "6.8.0-60-generic")
    facts = Facts()
    platform.collect_platform(facts, {"HOME": str(tmp_path)}, root)
    assert facts.value("platform.wsl") is False
    assert facts.value("platform.container") is False
    assert facts.why_missing("platform.glibcxx")
    # the distro variable alone says WSL too (vLLM's own in_wsl() reads uname)
    facts = Facts()
    platform.collect_platform(facts, {"WSL_DISTRO_NAME": "Ubuntu"}, root)
    assert facts.value("platform.wsl") is True


def test_arbitrary_uid_with_home_slash(tmp_path, monkeypatch):
    """OpenShift: a UID passwd does not know, HOME=/ — ~/.cache is /.cache."""
    import pwd

    def unknown(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", unknown)
    unwritable = tmp_path / "root-owned"
    unwritable.mkdir()
    unwritable.chmod(0o555)
    facts = Facts()
    try:
        platform.collect_platform(facts, {"HOME": str(unwritable)}, fake_root(tmp_path, "6.8.0"))
    finally:
        unwritable.chmod(0o755)
    assert facts.value("container.uid") == os.getuid()
    assert facts.value("container.uid_in_passwd") is False
    assert facts.value("container.user_known") is False
    if os.getuid() != 0:  # root writes anywhere: the modes say nothing then
        assert facts.value("container.home_writable") is False
        assert any(
            c.startswith("VLLM_CACHE_ROOT=") for c in facts.value("container.unwritable_caches")
        )


def test_user_variable_names_the_user_and_writable_caches(tmp_path):
    facts = Facts()
    environ = {"HOME": str(tmp_path / "home"), "USER": "vllm"}
    platform.collect_platform(facts, environ, fake_root(tmp_path, "6.8.0"))
    assert facts.value("container.user_known") is True
    assert facts.value("container.home_writable") is True  # creatable under tmp_path
    assert facts.value("container.unwritable_caches") == []
    detail = facts.get("container.unwritable_caches").detail
    assert f"VLLM_CACHE_ROOT={tmp_path}/home/.cache/vllm" in detail
    assert f"TRITON_CACHE_DIR={tmp_path}/home/.triton/cache" in detail


def test_report_names_the_kernel_and_leaves_the_container_unknowable(tmp_path):
    # the Python platform line of vllm-project/vllm#47387 (WSL2, RTX 4050 Laptop)
    facts = Facts()
    platform.platform_from_report(
        facts,
        "Python platform              : Linux-6.6.87.2-microsoft-standard-WSL2-x86_64-with-glibc2.39\n",
        "report.txt",
    )
    assert facts.value("platform.kernel") == "6.6.87.2-microsoft-standard-WSL2"
    assert facts.value("platform.wsl") is True
    assert facts.is_unknowable("container.uid_in_passwd")
    plain = Facts()
    report = (REPORTS / "h100x8_nvlink_nightly.txt").read_text()
    platform.platform_from_report(plain, report, "h100x8_nvlink_nightly.txt")
    assert plain.value("platform.wsl") is False


@pytest.mark.parametrize(
    ("gpu", "gfx", "unified"),
    [
        ("MI300X", ["gfx942"], False),
        ("Radeon 8060S", ["gfx1151"], True),
        ("GB10", None, True),
        ("H100", None, False),
    ],
)
def test_gpu_architecture_from_the_table(gpu, gfx, unified):
    facts = collect_facts(
        CollectOptions(probe_machine=False, target=TargetHardware(gpu=gpu, count=1))
    )
    assert facts.value("gpu.gfx_targets") == gfx
    assert facts.value("gpu.unified_memory") is unified
    assert facts.get("gpu.unified_memory").inferred


def test_a_reports_rocm_device_line_states_the_target():
    facts = Facts()
    facts.set("gpu.names", ["AMD Instinct MI300X"], Source.REPORT)
    facts.set(
        "gpu.devices",
        [{"index": 0, "name": "AMD Instinct MI300X", "arch": "gfx942"}],
        Source.REPORT,
    )
    platform.gpu_architecture(facts)
    assert facts.value("gpu.gfx_targets") == ["gfx942"]
    assert not facts.get("gpu.gfx_targets").inferred


def test_check_without_this_machine_says_why():
    facts = collect_facts(CollectOptions(probe_machine=False))
    assert "not examined" in facts.why_missing("platform.wsl")
    assert "not examined" in facts.why_missing("container.uid_in_passwd")


def test_hami_cores_libvgpu_preloaded_through_ld_so_preload(tmp_path):
    """HAMi's device plugin mounts /etc/ld.so.preload naming /usr/local/vgpu/libvgpu.so."""
    root = fake_root(tmp_path, "6.8.0-60-generic", docker=True)
    (root / "etc").mkdir()
    (root / "etc/ld.so.preload").write_text("/usr/local/vgpu/libvgpu.so\n")
    facts = Facts()
    platform.collect_platform(facts, {"HOME": str(tmp_path)}, root)
    fact = facts.get("platform.cuda_interposer")
    assert fact is not None and fact.value == "hami-core"
    assert fact.source == Source.MACHINE
    assert fact.detail == "/etc/ld.so.preload names /usr/local/vgpu/libvgpu.so"


def test_libvgpu_in_ld_preload_and_nothing_preloaded(tmp_path):
    root = fake_root(tmp_path, "6.8.0-60-generic")
    facts = Facts()
    platform.collect_platform(facts, {"LD_PRELOAD": "/opt/x/libvgpu.so.v2.9.0"}, root)
    assert facts.value("platform.cuda_interposer") == "hami-core"
    assert facts.get("platform.cuda_interposer").detail.startswith("LD_PRELOAD names")
    # another preloaded library (jemalloc) is no CUDA interposer: the fact is absent
    (root / "etc").mkdir()
    (root / "etc/ld.so.preload").write_text("/usr/lib/libjemalloc.so.2\n")
    facts = Facts()
    platform.collect_platform(facts, {"LD_PRELOAD": "libtcmalloc.so"}, root)
    assert "platform.cuda_interposer" not in facts
    assert facts.why_missing("platform.cuda_interposer") is None


def test_a_report_cannot_know_a_preloaded_interposer():
    facts = Facts()
    platform.platform_from_report(facts, "Python platform: Linux-6.8.0-x86_64-with-glibc2.35", "r")
    assert facts.is_unknowable("platform.cuda_interposer")
