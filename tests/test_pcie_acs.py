"""PCIe ACS redirect on the bridges above the GPUs (facts/pcie_acs.py), read from a sysfs
tree laid out as Linux lays it out."""

from __future__ import annotations

import struct
from pathlib import Path

from vllm_doctor.facts import pcie_acs
from vllm_doctor.facts.model import Facts

GPUS = {"0000:01:00.0": "0000:00:01.1", "0000:41:00.0": "0000:40:01.1"}  # GPU -> root port


def config_space(acs_control: int | None, size: int = 4096) -> bytes:
    """A bridge's configuration space: AER at 0x100, then ACS at 0x150 (when given)."""
    data = bytearray(size)
    if size > 0x100:
        struct.pack_into("<I", data, 0x100, 0x0001 | (1 << 16) | (0x150 << 20))
        if acs_control is not None:
            struct.pack_into("<I", data, 0x150, 0x000D | (1 << 16))
            struct.pack_into("<H", data, 0x156, acs_control)
    return bytes(data)


def sysfs(root: Path, controls: dict[str, int | None], size: int = 4096) -> Path:
    devices = root / "sys/bus/pci/devices"
    devices.mkdir(parents=True)
    for gpu, port in GPUS.items():
        domain = "pci" + port.rsplit(":", 1)[0]
        bridge = root / "sys/devices" / domain / port
        (bridge / gpu).mkdir(parents=True)
        (bridge / "config").write_bytes(config_space(controls[port], size))
        (devices / port).symlink_to(bridge)
        (devices / gpu).symlink_to(bridge / gpu)
    return root


def test_redirect_on_one_root_port_is_named_with_its_bits(tmp_path):
    # 0x001D: source validation, request redirect, completion redirect, upstream forwarding
    root = sysfs(tmp_path, {"0000:00:01.1": 0x001D, "0000:40:01.1": 0x0011})
    facts = Facts()
    pcie_acs.collect_acs(facts, GPUS, root)
    assert facts.value("topology.acs_redirect") == ["0000:00:01.1 (ReqRedir+ CmpltRedir+)"]
    assert "2 PCIe bridges" in facts.get("topology.acs_redirect").detail


def test_no_acs_capability_or_redirect_off_is_an_empty_list(tmp_path):
    root = sysfs(tmp_path, {"0000:00:01.1": None, "0000:40:01.1": 0x0000})
    facts = Facts()
    pcie_acs.collect_acs(facts, GPUS, root)
    assert facts.value("topology.acs_redirect") == []


def test_an_unprivileged_read_stops_at_the_header_and_the_fact_is_missing(tmp_path):
    root = sysfs(tmp_path, {"0000:00:01.1": 0x001D, "0000:40:01.1": 0x001D}, size=64)
    facts = Facts()
    pcie_acs.collect_acs(facts, GPUS, root)
    assert "topology.acs_redirect" not in facts
    assert "root only" in facts.why_missing("topology.acs_redirect")


def test_a_gpu_sysfs_does_not_list_is_missing(tmp_path):
    facts = Facts()
    pcie_acs.collect_acs(facts, ["0000:99:00.0"], tmp_path)
    assert "no PCI device 0000:99:00.0" in facts.why_missing("topology.acs_redirect")


def test_a_capability_list_that_loops_ends():
    data = bytearray(4096)
    struct.pack_into("<I", data, 0x100, 0x0001 | (0x100 << 20))  # points at itself
    assert pcie_acs.acs_control(bytes(data)) is None
