"""What must agree across the nodes of one deployment: the one table of compared quantities.

Each quantity is read from every node's facts (the paths below, joined when there are several)
and becomes two fleet facts (``vllm_doctor/fleet/fleetfacts.py`` writes them, the schema lists
them from this table):

- ``fleet.<name>.distinct``: how many different values the nodes have (a node without the fact
  counts with the value ``absent``: "not installed", "unset"); unknown when a node's value could
  not be collected and the known values agree;
- ``fleet.<name>.nodes``: the nodes grouped by value, ``"0.24.0: head (10.0.0.1), w1
  (10.0.0.2)"``, one entry per value, the most common first.

A fleet rule tests ``fleet.<name>.distinct`` (``gt: 1``: the nodes differ); its finding shows
the groups. This module is plain data: the schema (facts/schema_observed.py) imports it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Quantity:
    name: str  # the fact name: fleet.<name>.distinct / fleet.<name>.nodes
    what: str  # how a report names it
    paths: tuple[str, ...]  # the node facts it is read from (joined by " build " when two)
    absent: str  # the value of a node without the fact
    # how a node's value is shown: "value" as it is, "major" the part before the first dot
    # (a driver's branch), "devices" a list of GPU names counted ("4 x NVIDIA H200")
    shape: str = "value"
    # a fact whose value False means "not installed here" (the value is then ``absent``)
    installed: str | None = None


# NCCL, Gloo and vLLM settings whose value must be meant for every node of the group
COMPARED_ENV = (
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "NCCL_IB_HCA",
    "NCCL_IB_DISABLE",
    "NCCL_IB_GID_INDEX",
    "NCCL_NET",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_P2P_DISABLE",
    "NCCL_CROSS_NIC",
    "NCCL_CUMEM_ENABLE",
    "VLLM_USE_V1",
)

COMPARED: tuple[Quantity, ...] = (
    Quantity(
        "vllm_version",
        "vLLM version",
        ("vllm.version",),
        "not installed",
        installed="vllm.installed",
    ),
    Quantity("torch_version", "torch version", ("torch.version",), "not installed"),
    Quantity("torch_cuda", "CUDA runtime torch is built for", ("torch.cuda_version",), "none"),
    Quantity(
        "nccl_library",
        "NCCL library (version and build ID)",
        ("nccl.version", "nccl.build_id"),
        "not found",
    ),
    Quantity("driver_branch", "NVIDIA driver branch", ("driver.version",), "none", "major"),
    Quantity(
        "transformers_version", "transformers version", ("packages.transformers",), "not installed"
    ),
    Quantity(
        "flashinfer_version", "FlashInfer version", ("packages.flashinfer-python",), "not installed"
    ),
    Quantity("ray_version", "Ray version", ("packages.ray",), "not installed"),
    Quantity("gpu_model", "GPUs", ("gpu.names",), "no GPU", "devices"),
    Quantity("shm_mib", "/dev/shm size (MiB)", ("host.shm_mib",), "none"),
    *(Quantity(f"env_{name}", name, (f"env.{name}",), "unset") for name in COMPARED_ENV),
)

BY_NAME = {q.name: q for q in COMPARED}
