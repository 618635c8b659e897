"""GPUs, driver and the links between GPUs, from NVML (``pynvml`` of nvidia-ml-py).

No CUDA context is created and nothing is imported from torch. No NVML (library missing, no
driver, no permission) is a normal state: the ``gpu``, ``driver`` and ``topology`` areas are
marked missing with the reason.

``CUDA_VISIBLE_DEVICES`` is honoured the way CUDA reads it: a comma-separated list of indices,
``GPU-<uuid>`` (a unique prefix is enough) or ``MIG-<uuid>`` ids; the first entry that names no
device ends the list. Indices are taken in NVML (PCI bus) order, which is CUDA's order under
``CUDA_DEVICE_ORDER=PCI_BUS_ID``; CUDA's default "fastest first" order can differ on machines
with mixed GPUs. MIG ids set ``gpu.mig_enabled``.

Links follow ``nvidia-smi topo -m``: ``NV#`` (# = NVLink links between the pair, or through
NVSwitch the links each GPU has to the switches), else the PCIe path from the common ancestor:
``PIX`` (one PCIe switch), ``PXB`` (several switches), ``PHB`` (host bridge), ``NODE`` (same
NUMA node, across host bridges), ``SYS`` (across the SMP interconnect between NUMA nodes).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vllm_doctor.facts.model import Facts, Source

# NVML topology levels (nvmlGpuTopologyLevel_t) → nvidia-smi topo names
_TOPOLOGY_NAMES = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
# nvidia-smi topo -m legend, fastest first (NV# ranks by link count, above every PCIe path)
_LINK_ORDER = {"NV": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}
_NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS in current NVML headers
_NVLINK_DEVICE_TYPE_SWITCH = 2  # NVML_NVLINK_DEVICE_TYPE_SWITCH
_P2P_CAPS_INDEX_READ = 0  # NVML_P2P_CAPS_INDEX_READ
_P2P_CAPS_INDEX_WRITE = 1  # NVML_P2P_CAPS_INDEX_WRITE
_P2P_STATUS_OK = 0  # NVML_P2P_STATUS_OK


def _load_nvml() -> Any:
    """pynvml, or raise RuntimeError with a readable reason.

    The NVML shared library is opened first with ctypes: on a machine without the NVIDIA
    driver this fails fast and the pynvml module is never imported.
    """
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as err:
        raise RuntimeError(f"NVML library not found (no NVIDIA driver?): {err}") from None
    try:
        import pynvml
    except ImportError as err:  # pragma: no cover - nvidia-ml-py is a dependency
        raise RuntimeError(f"nvidia-ml-py is not installed: {err}") from None
    return pynvml


def _s(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _bus_id(value: Any) -> str:
    """Normalised PCI bus id: ``0000:18:00.0`` (NVML pads the domain to 8 digits)."""
    text = _s(value).strip().lower()
    parts = text.split(":")
    if len(parts) == 3:
        parts[0] = parts[0][-4:].rjust(4, "0")
    return ":".join(parts)


def _cuda_version(value: int) -> str:
    return f"{value // 1000}.{(value % 1000) // 10}"


@dataclass
class _Device:
    index: int  # NVML index
    handle: Any
    uuid: str = ""
    name: str = ""
    bus_id: str = ""
    mig_device: bool = False  # a MIG instance named by CUDA_VISIBLE_DEVICES
    record: dict[str, Any] = field(default_factory=dict)


def parse_visible_devices(value: str) -> list[str]:
    """Entries of CUDA_VISIBLE_DEVICES, as CUDA splits them (empty string: no device)."""
    return [part.strip() for part in value.split(",")] if value.strip() else []


def _select_visible(
    nvml: Any, all_devices: list[_Device], entries: list[str], facts: Facts
) -> list[_Device]:
    """The devices CUDA_VISIBLE_DEVICES names, in its order; stops at the first bad entry."""
    chosen: list[_Device] = []
    for entry in entries:
        device: _Device | None = None
        if entry.startswith("MIG-"):
            device = _resolve_mig(nvml, entry, all_devices)
            if device is None:
                facts.notes.append(f"CUDA_VISIBLE_DEVICES entry {entry} is not a MIG device here")
                break
        elif entry.startswith("GPU-"):
            matches = [d for d in all_devices if d.uuid.startswith(entry)]
            device = matches[0] if len(matches) == 1 else None
        else:
            try:
                idx = int(entry)
            except ValueError:
                idx = -1
            if 0 <= idx < len(all_devices):
                device = all_devices[idx]
        if device is None or any(d is device for d in chosen):
            if device is None:
                facts.notes.append(
                    f"CUDA_VISIBLE_DEVICES entry {entry!r} names no device: CUDA ignores it "
                    "and every entry after it"
                )
            break
        chosen.append(device)
    return chosen


def _resolve_mig(nvml: Any, entry: str, all_devices: list[_Device]) -> _Device | None:
    try:
        handle = nvml.nvmlDeviceGetHandleByUUID(entry)
    except Exception:
        # legacy form MIG-GPU-<uuid>/<gi>/<ci>: the parent is known, the slice is not
        if entry.startswith("MIG-GPU-"):
            parent_uuid = entry[4:].split("/", 1)[0]
            for dev in all_devices:
                if dev.uuid == parent_uuid:
                    return _Device(
                        index=dev.index,
                        handle=dev.handle,
                        uuid=entry,
                        name=dev.name,
                        bus_id=dev.bus_id,
                        mig_device=True,
                    )
        return None
    parent_index = -1
    bus = ""
    try:
        parent = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
        parent_uuid = _s(nvml.nvmlDeviceGetUUID(parent))
        for dev in all_devices:
            if dev.uuid == parent_uuid:
                parent_index, bus = dev.index, dev.bus_id
    except Exception:
        pass
    try:
        name = _s(nvml.nvmlDeviceGetName(handle))
    except Exception:
        name = "MIG device"
    return _Device(
        index=parent_index, handle=handle, uuid=entry, name=name, bus_id=bus, mig_device=True
    )


def _try(fn: Any, *args: Any) -> Any:
    """Call an NVML function; None when it fails (not supported, no permission)."""
    try:
        return fn(*args)
    except Exception:
        return None


def _not_supported(nvml: Any, fn: Any, *args: Any) -> tuple[Any, bool]:
    """(value, not_supported): distinguishes NVML_ERROR_NOT_SUPPORTED from other failures."""
    try:
        return fn(*args), False
    except Exception as err:
        unsupported = getattr(nvml, "NVMLError_NotSupported", None)
        if unsupported is not None and isinstance(err, unsupported):
            return None, True
        return None, False


def _describe(nvml: Any, dev: _Device, position: int) -> dict[str, Any]:
    h = dev.handle
    rec: dict[str, Any] = {
        "index": position,
        "nvml_index": dev.index,
        "name": dev.name,
        "uuid": dev.uuid,
        "pci_bus_id": dev.bus_id or None,
    }
    cc = _try(nvml.nvmlDeviceGetCudaComputeCapability, h)
    if cc is None and dev.mig_device and dev.index >= 0:
        cc = _try(
            nvml.nvmlDeviceGetCudaComputeCapability,
            _try(nvml.nvmlDeviceGetHandleByIndex, dev.index),
        )
    rec["capability"] = int(cc[0]) * 10 + int(cc[1]) if cc else None
    mem = _try(nvml.nvmlDeviceGetMemoryInfo, h)
    rec["memory_total_mib"] = int(mem.total) // (1024 * 1024) if mem is not None else None
    rec["memory_free_mib"] = int(mem.free) // (1024 * 1024) if mem is not None else None
    mig, mig_unsupported = _not_supported(nvml, nvml.nvmlDeviceGetMigMode, h)
    if dev.mig_device:
        rec["mig"] = True
    elif mig_unsupported:
        rec["mig"] = False
    else:
        rec["mig"] = bool(mig[0]) if mig is not None else None
    pers, pers_unsupported = _not_supported(nvml, nvml.nvmlDeviceGetPersistenceMode, h)
    rec["persistence_mode"] = False if pers_unsupported else (None if pers is None else bool(pers))
    ecc, ecc_unsupported = _not_supported(nvml, nvml.nvmlDeviceGetEccMode, h)
    rec["ecc_enabled"] = False if ecc_unsupported else (None if ecc is None else bool(ecc[0]))
    rec["exclusive_compute"] = _exclusive_compute(nvml, h)
    return rec


# nvmlComputeMode_t: 0 default, 1 exclusive thread (gone since CUDA 8), 2 prohibited, 3
# exclusive process (nvidia-smi -c): only one process (none when prohibited) may hold a CUDA
# context, and the next one gets cudaErrorDevicesUnavailable
_SHARED_COMPUTE_MODE = 0


def _exclusive_compute(nvml: Any, handle: Any) -> bool | None:
    """Whether the GPU's compute mode refuses a second process (None: NVML did not say)."""
    get_mode = getattr(nvml, "nvmlDeviceGetComputeMode", None)
    if get_mode is None or handle is None:
        return None
    mode, unsupported = _not_supported(nvml, get_mode, handle)
    if unsupported:
        return False
    return None if mode is None else int(mode) != _SHARED_COMPUTE_MODE


def _nvlink_peers(nvml: Any, dev: _Device, gpu_bus_ids: set[str]) -> tuple[dict[str, int], int]:
    """(links per peer bus id, links to NVSwitches) of one device's active NVLinks."""
    peers: dict[str, int] = {}
    switch_links = 0
    get_state = getattr(nvml, "nvmlDeviceGetNvLinkState", None)
    get_remote = getattr(nvml, "nvmlDeviceGetNvLinkRemotePciInfo", None)  # calls the C _v2
    get_type = getattr(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", None)
    if get_state is None or get_remote is None or dev.mig_device:
        return peers, 0
    for link in range(_NVLINK_MAX_LINKS):
        try:
            if not get_state(dev.handle, link):
                continue
        except Exception:
            continue  # link not present (NVML_ERROR_INVALID_ARGUMENT / NOT_SUPPORTED)
        remote_type = _try(get_type, dev.handle, link) if get_type else None
        info = _try(get_remote, dev.handle, link)
        remote = _bus_id(getattr(info, "busId", "")) if info is not None else ""
        if remote_type == _NVLINK_DEVICE_TYPE_SWITCH or (
            remote_type is None and remote and remote not in gpu_bus_ids
        ):
            switch_links += 1
        elif remote:
            peers[remote] = peers.get(remote, 0) + 1
    return peers, switch_links


def link_rank(link: str) -> tuple[int, int]:
    """Sort key of a link type, larger is slower: ``max(links, key=link_rank)`` is the worst.
    Fewer NVLinks is slower; a type outside the legend ranks below SYS."""
    m = re.fullmatch(r"NV(\d+)", link)
    if m:
        return (0, -int(m.group(1)))
    return (_LINK_ORDER.get(link, 6), 0)


def _links(nvml: Any, devices: list[_Device], all_devices: list[_Device]) -> list[dict[str, Any]]:
    gpu_bus_ids = {d.bus_id for d in all_devices if d.bus_id}
    nvlink = [_nvlink_peers(nvml, d, gpu_bus_ids) for d in devices]
    # nvmlGpuP2PCapsIndex_t values from nvml.h; nvidia-ml-py 13.x defines
    # NVML_P2P_CAPS_INDEX_READ as the tuple (0,), so its constants are not used
    read_idx, write_idx, status_ok = _P2P_CAPS_INDEX_READ, _P2P_CAPS_INDEX_WRITE, _P2P_STATUS_OK
    links = []
    for i in range(len(devices)):
        for j in range(i + 1, len(devices)):
            a, b = devices[i], devices[j]
            rec: dict[str, Any] = {"a": i, "b": j}
            if a.mig_device or b.mig_device:
                rec.update(
                    link="SYS",
                    nvlinks=0,
                    p2p_read=False,
                    p2p_write=False,
                    p2p=False,
                    note="MIG instances have no P2P access",
                )
                links.append(rec)
                continue
            direct = nvlink[i][0].get(b.bus_id, 0) or nvlink[j][0].get(a.bus_id, 0)
            switched = min(nvlink[i][1], nvlink[j][1])
            count = direct or switched
            if count:
                link = f"NV{count}"
            else:
                level = _try(nvml.nvmlDeviceGetTopologyCommonAncestor, a.handle, b.handle)
                link = _TOPOLOGY_NAMES.get(int(level), "SYS") if level is not None else "unknown"
            read = _try(nvml.nvmlDeviceGetP2PStatus, a.handle, b.handle, read_idx)
            write = _try(nvml.nvmlDeviceGetP2PStatus, a.handle, b.handle, write_idx)
            rec.update(
                link=link,
                nvlinks=count,
                nvswitch=bool(count and not direct),
                p2p_read=None if read is None else read == status_ok,
                p2p_write=None if write is None else write == status_ok,
            )
            rec["p2p"] = (
                None
                if rec["p2p_read"] is None or rec["p2p_write"] is None
                else rec["p2p_read"] and rec["p2p_write"]
            )
            links.append(rec)
    return links


def collect_gpus(facts: Facts, environ: Mapping[str, str] | None = None, nvml: Any = None) -> None:
    """Write gpu.*, driver.* and topology.* (or mark them missing with the reason)."""
    env = os.environ if environ is None else environ
    try:
        if nvml is None:
            nvml = _load_nvml()
        nvml.nvmlInit()
    except Exception as err:
        reason = (
            str(err)
            if isinstance(err, RuntimeError)
            else (f"NVML could not be initialised: {_s(err) or type(err).__name__}")
        )
        for area in ("gpu", "driver", "topology"):
            facts.mark_missing(area, reason)
        return
    try:
        _collect(nvml, facts, env)
    finally:
        _try(nvml.nvmlShutdown)


def _collect(nvml: Any, facts: Facts, env: Mapping[str, str]) -> None:
    driver = _try(nvml.nvmlSystemGetDriverVersion)
    if driver is not None:
        facts.set("driver.version", _s(driver), Source.NVML)
    else:
        facts.mark_missing("driver.version", "NVML did not report the driver version")
    cuda = None
    for name in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
        fn = getattr(nvml, name, None)
        cuda = _try(fn) if fn is not None else None
        if cuda:
            break
    if cuda:
        facts.set("driver.cuda_version", _cuda_version(int(cuda)), Source.NVML)
    else:
        facts.mark_missing("driver.cuda_version", "NVML did not report the driver's CUDA version")

    count = int(nvml.nvmlDeviceGetCount())
    all_devices: list[_Device] = []
    for idx in range(count):
        h = nvml.nvmlDeviceGetHandleByIndex(idx)
        pci = _try(nvml.nvmlDeviceGetPciInfo, h)
        all_devices.append(
            _Device(
                index=idx,
                handle=h,
                uuid=_s(_try(nvml.nvmlDeviceGetUUID, h) or ""),
                name=_s(_try(nvml.nvmlDeviceGetName, h) or "unknown"),
                bus_id=_bus_id(getattr(pci, "busId", "")) if pci is not None else "",
            )
        )

    visible_env = env.get("CUDA_VISIBLE_DEVICES")
    if visible_env is not None:
        facts.set("gpu.visible_devices", visible_env, Source.ENV, "CUDA_VISIBLE_DEVICES")
        entries = parse_visible_devices(visible_env)
        devices = _select_visible(nvml, all_devices, entries, facts)
    else:
        devices = all_devices
    detail = (
        f"CUDA_VISIBLE_DEVICES={visible_env}" if visible_env is not None else f"all {count} GPUs"
    )

    records = [_describe(nvml, dev, pos) for pos, dev in enumerate(devices)]
    facts.set("gpu.count", len(records), Source.NVML, detail)
    facts.set("gpu.devices", records, Source.NVML, detail)
    facts.set("gpu.names", [r["name"] for r in records], Source.NVML, detail)
    uses_mig_ids = any(d.mig_device for d in devices)
    if not records:
        reason = (
            "CUDA_VISIBLE_DEVICES hides every GPU"
            if visible_env is not None and count
            else "NVML reports no GPU"
        )
        for path in (
            "gpu.capabilities",
            "gpu.min_capability",
            "gpu.max_capability",
            "gpu.memory_total_mib",
            "gpu.memory_free_mib",
            "gpu.persistence_mode",
            "gpu.ecc_enabled",
            "gpu.exclusive_compute",
        ):
            facts.mark_missing(path, reason)
        facts.set("gpu.mig_enabled", False, Source.NVML, detail)
        facts.mark_missing("topology", reason)
        return

    def aggregate(key: str, path: str, fn: Any, what: str) -> None:
        values = [r[key] for r in records]
        if any(v is None for v in values):
            facts.mark_missing(path, f"NVML did not report the {what} of every visible GPU")
        else:
            facts.set(path, fn(values), Source.NVML, detail)

    caps = [r["capability"] for r in records]
    if all(c is not None for c in caps):
        facts.set("gpu.capabilities", caps, Source.NVML, detail)
    aggregate("capability", "gpu.min_capability", min, "compute capability")
    aggregate("capability", "gpu.max_capability", max, "compute capability")
    aggregate("memory_total_mib", "gpu.memory_total_mib", min, "total memory")
    aggregate("memory_free_mib", "gpu.memory_free_mib", min, "free memory")
    aggregate("persistence_mode", "gpu.persistence_mode", all, "persistence mode")
    aggregate("ecc_enabled", "gpu.ecc_enabled", all, "ECC mode")
    aggregate("exclusive_compute", "gpu.exclusive_compute", any, "compute mode")
    mig_values = [r["mig"] for r in records]
    if uses_mig_ids or any(mig_values):
        facts.set(
            "gpu.mig_enabled",
            True,
            Source.NVML,
            "MIG ids in CUDA_VISIBLE_DEVICES" if uses_mig_ids else "MIG mode is on",
        )
    elif any(v is None for v in mig_values):
        facts.mark_missing("gpu.mig_enabled", "NVML did not report the MIG mode of every GPU")
    else:
        facts.set("gpu.mig_enabled", False, Source.NVML, detail)

    links = _links(nvml, devices, all_devices)
    facts.set("topology.links", links, Source.NVML, detail)
    if not links:
        facts.mark_missing("topology", "only one GPU is visible: there are no links between GPUs")
        return
    from vllm_doctor.facts.pcie_acs import collect_acs

    collect_acs(facts, [dev.bus_id for dev in devices])
    kinds = [link["link"] for link in links]
    if "unknown" in kinds:
        facts.mark_missing("topology.worst_link", "NVML did not report every PCIe path")
        facts.mark_missing("topology.all_nvlink", "NVML did not report every PCIe path")
    else:
        facts.set("topology.all_nvlink", all(k.startswith("NV") for k in kinds), Source.NVML)
        facts.set("topology.worst_link", max(kinds, key=link_rank), Source.NVML)
    p2p = [link["p2p"] for link in links]
    if any(v is False for v in p2p):
        facts.set("topology.p2p_all", False, Source.NVML)
    elif any(v is None for v in p2p):
        facts.mark_missing("topology.p2p_all", "NVML did not report P2P status for every pair")
    else:
        facts.set("topology.p2p_all", True, Source.NVML)
