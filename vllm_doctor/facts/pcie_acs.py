"""PCIe Access Control Services on the bridges above the GPUs (``topology.acs_redirect``).

ACS P2P Request Redirect and Completion Redirect, enabled on a switch port or root port that
two GPUs' peer-to-peer traffic crosses, send that traffic up through the root complex and the
IOMMU. NCCL's troubleshooting guide asks for ACS off on bare metal: P2P then runs slowly or
hangs (NVIDIA/nccl#2079: two RTX 5880 Ada under AMD root-complex bridges with ReqRedir+ and
CmpltRedir+, the first all-reduce spinning forever).

Read from sysfs, nothing written or loaded: each GPU's device path
(``/sys/bus/pci/devices/BDF`` resolves to the chain of bridges above it) and each bridge's
configuration space (``/sys/bus/pci/devices/BRIDGE/config``). The ACS capability is an
extended capability (PCIe configuration space above 0x100), which the kernel shows to root
only: an unprivileged read stops at the standard header, and the fact is then missing.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

from vllm_doctor.facts.model import Facts, Source

PATH = "topology.acs_redirect"
SYSFS = "sys/bus/pci/devices"
# PCIe extended capabilities start at 0x100; the ACS capability's id and its control
# register's offset and redirect bits (linux/pci_regs.h: PCI_EXT_CAP_ID_ACS, PCI_ACS_CTRL,
# PCI_ACS_RR, PCI_ACS_CR)
EXTENDED_START = 0x100
CONFIG_SIZE = 4096
ACS_ID = 0x000D
ACS_CTRL = 0x06
REDIRECTS = ((0x0004, "ReqRedir+"), (0x0008, "CmpltRedir+"))


def acs_control(config: bytes) -> int | None:
    """The ACS control register of one device's configuration space, None without ACS."""
    offset, seen = EXTENDED_START, set()
    while EXTENDED_START <= offset <= len(config) - 8 and offset not in seen:
        seen.add(offset)
        (header,) = struct.unpack_from("<I", config, offset)
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == ACS_ID:
            (control,) = struct.unpack_from("<H", config, offset + ACS_CTRL)
            return int(control)
        offset = (header >> 20) & 0xFFC
    return None


def bridges_above(bus_id: str, root: Path = Path("/")) -> list[str]:
    """The PCI addresses of the bridges between the root complex and a device, nearest last."""
    device = (root / SYSFS / bus_id).resolve()
    return [
        part
        for part in device.parent.parts
        if part.count(":") == 2 and "." in part and part != bus_id
    ]


def collect_acs(facts: Facts, bus_ids: Iterable[str], root: Path = Path("/")) -> None:
    """``topology.acs_redirect``: the bridges above the GPUs with ACS redirect on, as
    ``BRIDGE (ReqRedir+ CmpltRedir+)``; empty when none; missing where sysfs cannot say."""
    bridges: list[str] = []
    for bus_id in bus_ids:
        if not bus_id or not (root / SYSFS / bus_id).exists():
            facts.mark_missing(PATH, f"sysfs has no PCI device {bus_id or '(no bus id)'}")
            return
        bridges += [b for b in bridges_above(bus_id, root) if b not in bridges]
    redirecting = []
    for bridge in bridges:
        try:
            config = (root / SYSFS / bridge / "config").read_bytes()[:CONFIG_SIZE]
        except OSError as err:
            facts.mark_missing(PATH, f"{bridge}'s configuration space: {err.strerror}")
            return
        if len(config) <= EXTENDED_START:
            facts.mark_missing(
                PATH,
                "the PCIe extended configuration space (ACS) is shown to root only: run "
                "`sudo vllm-doctor check`, or `sudo lspci -vvv | grep ACSCtl`",
            )
            return
        control = acs_control(config)
        on = [name for bit, name in REDIRECTS if control is not None and control & bit]
        if on:
            redirecting.append(f"{bridge} ({' '.join(on)})")
    detail = f"ACS control of the {len(bridges)} PCIe bridges above the GPUs (sysfs config)"
    facts.set(PATH, redirecting, Source.MACHINE, detail)
