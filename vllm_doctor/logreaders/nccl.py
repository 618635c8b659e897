"""An NCCL setting printed in the log that the failure beside it points at.

NCCL prints the settings it takes from the environment (``NCCL INFO NCCL_SOCKET_IFNAME set by
environment to eth2``); a failure that follows from one of them is named with it: an interface
name no interface of the machine has (NCCL then connects to an empty address), an InfiniBand
device name without a real device. Shared memory and generic socket failures without such a
setting stay HW205's.
"""

from __future__ import annotations

import re

from vllm_doctor.logreaders import LogReading

_SETTING = re.compile(
    r"NCCL INFO (NCCL_[A-Z0-9_]{2,40}) set (?:by environment )?to ([^\s<]{1,200})"
)
_EMPTY_ADDRESS = re.compile(
    r"connecting to address\s+with family \d+ is neither AF_INET|"
    r"no socket interface found|Bootstrap : no socket interface"
)
_NO_IB_DEVICE = re.compile(
    r"NCCL WARN Could not find real path of (\S{1,80}) \(/sys/class/infiniband/"
)


def settings(text: str) -> dict[str, str]:
    """The NCCL settings the log shows NCCL taking from the environment."""
    found: dict[str, str] = {}
    for name, value in _SETTING.findall(text[:20_000_000]):
        found.setdefault(name, value)
    return found


def read(text: str, version: str | None) -> LogReading | None:
    env = settings(text)
    ifname = env.get("NCCL_SOCKET_IFNAME")
    if ifname and _EMPTY_ADDRESS.search(text):
        return LogReading(
            f"NCCL_SOCKET_IFNAME={ifname} matches no network interface of this machine: NCCL found "
            "no address to bootstrap from and connected to an empty one",
            [
                "ip -brief addr   # the interface that carries this node's address",
                "export NCCL_SOCKET_IFNAME=<that interface>   # on every node; or unset NCCL_SOCKET_IFNAME",
            ],
            [
                f"NCCL took NCCL_SOCKET_IFNAME={ifname} from the environment",
                "NCCL then failed to connect: an empty address (no interface matched)",
            ],
        )
    hca = env.get("NCCL_IB_HCA")
    missing = _NO_IB_DEVICE.search(text)
    if hca and missing:
        return LogReading(
            f"NCCL_IB_HCA={hca} names an InfiniBand device NCCL cannot find a real device for "
            f"({missing.group(1)}: no /sys/class/infiniband/{missing.group(1)}/device)",
            [
                "ibv_devices   # the RDMA devices of this machine",
                "export NCCL_IB_HCA=<one of them>   # or NCCL_IB_DISABLE=1 to use TCP sockets",
            ],
            [
                f"NCCL took NCCL_IB_HCA={hca} from the environment",
                f"NCCL WARN Could not find real path of {missing.group(1)}",
            ],
        )
    return None
