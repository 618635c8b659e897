"""GPU, driver and link facts from a fake NVML (the pynvml functions the collector calls).

Machines are described in tests/fixtures/nvml/*.json: GPUs (name, capability, memory, MIG,
persistence, ECC, NVLinks with the remote PCI bus id and device type), the PCIe common
ancestor level per pair and P2P status per pair.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from vllm_doctor.facts import gpus
from vllm_doctor.facts.model import Facts

FIXTURES = Path(__file__).parent / "fixtures" / "nvml"
# nvmlGpuP2PCapsIndex_t → the key of a pair's status in a machine description
P2P_CAPS = {0: "read", 1: "write", 2: "nvlink", 3: "atomics", 4: "prop"}


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_InvalidArgument(NVMLError):
    pass


class NVMLError_FunctionNotFound(NVMLError):
    """A function the driver's libnvidia-ml lacks (pynvml has the wrapper, the C symbol is gone)."""


class FakeNVML:
    """Just enough of pynvml, driven by a machine description: every name and signature here is
    the installed nvidia-ml-py's (test_the_fake_is_a_subset_of_the_installed_pynvml)."""

    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_InvalidArgument = NVMLError_InvalidArgument
    NVMLError_FunctionNotFound = NVMLError_FunctionNotFound
    NVML_P2P_CAPS_INDEX_READ = (0,)  # as nvidia-ml-py 13.x defines it (a tuple)
    NVML_P2P_CAPS_INDEX_WRITE = 1
    NVML_P2P_STATUS_OK = 0

    def __init__(self, machine: dict, init_error: Exception | None = None):
        self.m = machine
        self.init_error = init_error
        self.calls: list[str] = []
        self.shutdown = False
        self.gpus = [SimpleNamespace(kind="gpu", idx=i, **g) for i, g in enumerate(machine["gpus"])]
        self.migs = [SimpleNamespace(kind="mig", **d) for d in machine.get("mig_devices", [])]

    # -- library ----------------------------------------------------------------------
    def nvmlInit(self):
        if self.init_error:
            raise self.init_error

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlSystemGetDriverVersion(self):
        return self.m["driver"]

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return self.m["cuda"]

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        return self.gpus[index]

    def nvmlDeviceGetHandleByUUID(self, uuid):
        for h in self.gpus + self.migs:
            if h.uuid == uuid:
                return h
        raise NVMLError("Not Found")

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, migDevice):
        return self.gpus[migDevice.parent]

    # -- per device ------------------------------------------------------------------------
    def nvmlDeviceGetUUID(self, handle):
        return handle.uuid

    def nvmlDeviceGetName(self, handle):
        return handle.name

    def nvmlDeviceGetPciInfo(self, handle):
        return SimpleNamespace(busId=handle.bus)

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        h = handle
        if h.kind == "mig":
            raise NVMLError_NotSupported
        return tuple(h.cc)

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        h = handle
        return SimpleNamespace(
            total=h.total_mib * 2**20,
            free=h.free_mib * 2**20,
            used=(h.total_mib - h.free_mib) * 2**20,
        )

    def _maybe(self, value):
        if value == "unsupported":
            raise NVMLError_NotSupported
        return value

    def nvmlDeviceGetMigMode(self, device):
        return self._maybe(getattr(device, "mig", (0, 0)))

    def nvmlDeviceGetPersistenceMode(self, handle):
        return self._maybe(getattr(handle, "persistence", 0))

    def nvmlDeviceGetEccMode(self, handle):
        return self._maybe(getattr(handle, "ecc", (0, 0)))

    def nvmlDeviceGetComputeMode(self, handle):
        return self._maybe(getattr(handle, "compute_mode", 0))

    def nvmlDeviceGetNvLinkState(self, device, link):
        links = getattr(device, "nvlinks", [])
        if link >= len(links):
            raise NVMLError_InvalidArgument
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, device, link):
        return SimpleNamespace(busId=device.nvlinks[link]["remote"])

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle, link):
        kind = handle.nvlinks[link]["type"]
        if kind == "function-not-found":  # a driver older than the call
            raise NVMLError_FunctionNotFound
        return kind

    def _pair(self, a, b):
        i, j = sorted((a.idx, b.idx))
        return f"{i}-{j}"

    def nvmlDeviceGetTopologyCommonAncestor(self, device1, device2):
        return self.m["ancestor"].get(self._pair(device1, device2), self.m["ancestor_default"])

    def nvmlDeviceGetP2PStatus(self, device1, device2, p2pIndex):
        if not isinstance(p2pIndex, int):  # ctypes rejects a tuple
            raise TypeError("an integer is required")
        status = self.m["p2p"].get(self._pair(device1, device2), {})
        value = status.get(P2P_CAPS[p2pIndex], 0)
        if value == "error":
            raise NVMLError("Unknown Error")
        return value


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def collect(name: str, environ: dict | None = None, **kw) -> tuple[Facts, FakeNVML]:
    nvml = FakeNVML(load(name), **kw)
    facts = Facts()
    gpus.collect_gpus(facts, environ or {}, nvml=nvml)
    return facts, nvml


def test_h100_nvswitch_all_nvlink():
    facts, nvml = collect("h100_nvswitch_x8")
    assert nvml.shutdown
    assert facts.value("driver.version") == "580.95.05"
    assert facts.value("driver.cuda_version") == "13.0"
    assert facts.value("gpu.count") == 8
    assert facts.value("gpu.capabilities") == [90] * 8
    assert facts.value("gpu.min_capability") == 90
    assert facts.value("gpu.memory_total_mib") == 81559
    assert facts.value("gpu.memory_free_mib") == 60000  # the smallest
    assert facts.value("gpu.mig_enabled") is False
    assert facts.value("gpu.persistence_mode") is True
    assert facts.value("gpu.ecc_enabled") is True
    links = facts.value("topology.links")
    assert len(links) == 28
    assert {link["link"] for link in links} == {"NV18"}
    assert facts.value("topology.all_nvlink") is True
    assert facts.value("topology.worst_link") == "NV18"
    assert facts.value("topology.p2p_all") is True
    assert "gpu.visible_devices" not in facts


def test_the_fake_is_a_subset_of_the_installed_pynvml():
    # Whatever the fake offers, nvidia-ml-py has under the same name: functions with the same
    # signature, constants with the same value, exceptions in the same hierarchy.
    import pynvml

    fake = FakeNVML(load("h100_nvswitch_x8"))
    offered = [name for name in vars(FakeNVML) if not name.startswith("_")]
    assert len(offered) > 20
    for name in offered:
        assert hasattr(pynvml, name), f"{name} is not in nvidia-ml-py {pynvml.__file__}"
        real, ours = getattr(pynvml, name), getattr(fake, name)
        if isinstance(ours, type):
            for base in ours.__mro__:
                if base.__name__.startswith("NVMLError"):
                    assert issubclass(real, getattr(pynvml, base.__name__)), (name, base)
        elif callable(ours):
            assert inspect.signature(ours) == inspect.signature(real), name
        else:
            assert ours == real, name


class _Asked:
    """A fake NVML that records every name the collector looks up (getattr with a default too)."""

    def __init__(self, inner):
        self._inner, self.asked = inner, set()

    def __getattr__(self, name):
        self.asked.add(name)
        return getattr(self._inner, name)


def test_the_collector_asks_only_for_what_pynvml_has():
    import pynvml

    asked = set()
    for machine in sorted(FIXTURES.glob("*.json")):
        nvml = _Asked(FakeNVML(load(machine.stem)))
        gpus.collect_gpus(Facts(), {}, nvml=nvml)
        asked |= nvml.asked
    assert len(asked) > 15
    assert not {name for name in asked if not hasattr(pynvml, name)}


def test_a_driver_without_the_remote_device_type_call(monkeypatch):
    # nvmlDeviceGetNvLinkRemoteDeviceType is in every nvidia-ml-py the doctor accepts; an old
    # driver lacks the C function (NVML_ERROR_FUNCTION_NOT_FOUND): a remote that is no GPU of
    # this machine is then an NVSwitch
    for name in ("a100_pcie_bridged_x4", "h100_nvswitch_x8"):
        machine = load(name)
        for gpu in machine["gpus"]:
            for link in gpu["nvlinks"]:
                link["type"] = "function-not-found"
        facts = Facts()
        gpus.collect_gpus(facts, {}, nvml=FakeNVML(machine))
        by_pair = {(link["a"], link["b"]): link["link"] for link in facts.value("topology.links")}
        if name == "a100_pcie_bridged_x4":
            assert by_pair[(0, 1)] == "NV4" and by_pair[(0, 2)] == "NODE"
        else:
            assert set(by_pair.values()) == {"NV18"}


@pytest.mark.parametrize(
    "read, write, p2p",
    [
        (0, 0, True),
        (0, 2, False),
        (2, 0, False),
        (2, 2, False),
        (0, "error", None),
        ("error", 0, None),
    ],
)
def test_p2p_needs_both_read_and_write(read, write, p2p):
    # NVML reports P2P read and write separately: a pair that can only read cannot run
    # vLLM's custom all-reduce, which writes into the peer's buffer
    machine = load("a100_pcie_bridged_x4")
    machine["p2p"]["0-2"] = {"read": read, "write": write}
    facts = Facts()
    gpus.collect_gpus(facts, {}, nvml=FakeNVML(machine))
    pair = next(link for link in facts.value("topology.links") if (link["a"], link["b"]) == (0, 2))
    assert pair["p2p_read"] is (None if read == "error" else read == 0)
    assert pair["p2p_write"] is (None if write == "error" else write == 0)
    assert pair["p2p"] is p2p
    if p2p is None:
        assert "topology.p2p_all" not in facts and facts.why_missing("topology.p2p_all")
    else:
        assert facts.value("topology.p2p_all") is p2p


def test_pcie_consumer_gpus_without_p2p():
    facts, _ = collect("rtx4090_pcie_x2")
    assert facts.value("driver.cuda_version") == "12.8"
    assert facts.value("gpu.capabilities") == [89, 89]
    assert facts.value("topology.links")[0]["link"] == "SYS"
    assert facts.value("topology.links")[0]["p2p_read"] is False
    assert facts.value("topology.all_nvlink") is False
    assert facts.value("topology.worst_link") == "SYS"
    assert facts.value("topology.p2p_all") is False
    assert facts.value("gpu.ecc_enabled") is False  # not supported on GeForce
    assert facts.value("gpu.persistence_mode") is False
    assert facts.value("gpu.mig_enabled") is False


def test_nvlink_bridges_and_pcie_paths():
    facts, _ = collect("a100_pcie_bridged_x4")
    by_pair = {(link["a"], link["b"]): link["link"] for link in facts.value("topology.links")}
    assert by_pair[(0, 1)] == "NV4"
    assert by_pair[(2, 3)] == "NV4"
    assert by_pair[(0, 2)] == "NODE"
    assert by_pair[(1, 3)] == "NODE"
    assert facts.value("topology.all_nvlink") is False
    assert facts.value("topology.worst_link") == "NODE"


def test_visible_devices_by_index_keeps_cuda_order():
    facts, _ = collect("a100_pcie_bridged_x4", {"CUDA_VISIBLE_DEVICES": "3,2"})
    assert facts.value("gpu.visible_devices") == "3,2"
    assert facts.value("gpu.count") == 2
    devices = facts.value("gpu.devices")
    assert [d["nvml_index"] for d in devices] == [3, 2]
    assert [d["index"] for d in devices] == [0, 1]
    assert facts.value("topology.all_nvlink") is True  # 2-3 are bridged
    assert facts.value("topology.worst_link") == "NV4"


def test_visible_devices_by_uuid_prefix_and_stop_at_bad_entry():
    facts, _ = collect("a100_pcie_bridged_x4", {"CUDA_VISIBLE_DEVICES": "GPU-01aa01bb,7,0"})
    assert facts.value("gpu.count") == 1  # CUDA stops at the first entry naming no device
    assert facts.value("gpu.devices")[0]["nvml_index"] == 1
    assert any("'7'" in note for note in facts.notes)
    assert "only one GPU" in facts.why_missing("topology.all_nvlink")


def test_visible_devices_empty_hides_all():
    facts, _ = collect("rtx4090_pcie_x2", {"CUDA_VISIBLE_DEVICES": ""})
    assert facts.value("gpu.count") == 0
    assert "hides every GPU" in facts.why_missing("gpu.min_capability")
    assert facts.why_missing("topology.links")
    assert facts.value("driver.version") == "570.86.10"  # the driver is still known


def test_mig_ids_in_visible_devices():
    machine = load("a100_mig")
    env = {"CUDA_VISIBLE_DEVICES": ",".join(d["uuid"] for d in machine["mig_devices"])}
    facts, _ = collect("a100_mig", env)
    assert facts.value("gpu.mig_enabled") is True
    assert facts.value("gpu.count") == 2
    assert facts.value("gpu.memory_total_mib") == 19968
    assert facts.value("gpu.capabilities") == [80, 80]  # from the parent GPU
    assert facts.value("topology.p2p_all") is False
    assert facts.value("gpu.names")[0].endswith("MIG 3g.20gb")


def test_mig_mode_without_mig_ids():
    facts, _ = collect("a100_mig")
    assert facts.value("gpu.mig_enabled") is True
    assert facts.get("gpu.mig_enabled").detail == "MIG mode is on"


def test_nvml_init_failure_marks_areas_missing():
    facts, _ = collect("h100_nvswitch_x8", init_error=NVMLError("Driver Not Loaded"))
    for path in ("gpu.count", "driver.version", "topology.links"):
        assert path not in facts
        assert "Driver Not Loaded" in facts.why_missing(path)


def test_no_nvml_library(monkeypatch):
    import ctypes

    def no_library(name, *a, **k):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", no_library)
    facts = Facts()
    gpus.collect_gpus(facts, {})
    assert "NVML library not found" in facts.why_missing("gpu.min_capability")
    assert facts.why_missing("driver.cuda_version") == facts.why_missing("topology.links")


@pytest.mark.parametrize(
    "value, expected",
    [
        ("0,1", ["0", "1"]),
        (" 2 , 3 ", ["2", "3"]),
        ("", []),
        ("MIG-abc", ["MIG-abc"]),
    ],
)
def test_parse_visible_devices(value, expected):
    assert gpus.parse_visible_devices(value) == expected


def test_bus_id_normalisation():
    assert gpus._bus_id(b"00000000:18:00.0") == "0000:18:00.0"
    assert gpus._bus_id("0000:18:00.0") == gpus._bus_id("00000000:18:00.0")


@pytest.mark.parametrize("current, pending, enabled", [(0, 1, False), (1, 0, True), (1, 1, True)])
def test_mig_mode_is_the_current_one_not_the_pending_one(current, pending, enabled):
    # nvmlDeviceGetMigMode returns (current, pending): MIG switched on but not yet applied (the
    # GPU awaits a reset) is not MIG mode
    machine = load("h100_nvswitch_x8")
    for gpu in machine["gpus"]:
        gpu["mig"] = [current, pending]
    facts = Facts()
    gpus.collect_gpus(facts, {}, nvml=FakeNVML(machine))
    assert facts.value("gpu.mig_enabled") is enabled


def test_every_fact_names_nvml_as_its_source():
    facts, _ = collect("h100_nvswitch_x8")
    for path in (
        "driver.version",
        "driver.cuda_version",
        "gpu.count",
        "gpu.names",
        "gpu.ecc_enabled",
        "topology.links",
        "topology.p2p_all",
    ):
        assert facts.get(path).source == "NVML", path
    facts, _ = collect(
        "a100_mig",
        {"CUDA_VISIBLE_DEVICES": ",".join(d["uuid"] for d in load("a100_mig")["mig_devices"])},
    )
    (pair,) = facts.value("topology.links")
    assert (pair["p2p_read"], pair["p2p_write"], pair["p2p"]) == (False, False, False)


def test_exclusive_compute_mode_of_any_visible_gpu():
    """nvidia-smi -c EXCLUSIVE_PROCESS (3) on one GPU: a second process gets "CUDA-capable
    device(s) is/are busy or unavailable" there (HW296's confirming fact)."""
    machine = load("h100_nvswitch_x8")
    nvml = FakeNVML(machine)
    facts = Facts()
    gpus.collect_gpus(facts, {}, nvml=nvml)
    assert facts.value("gpu.exclusive_compute") is False
    nvml.gpus[3].compute_mode = 3
    facts = Facts()
    gpus.collect_gpus(facts, {}, nvml=nvml)
    assert facts.value("gpu.exclusive_compute") is True
    nvml.gpus[3].compute_mode = "unsupported"  # a GPU without compute modes shares
    facts = Facts()
    gpus.collect_gpus(facts, {}, nvml=nvml)
    assert facts.value("gpu.exclusive_compute") is False
