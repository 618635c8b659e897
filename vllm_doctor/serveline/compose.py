"""docker-compose services that run vLLM: each one a ``manifest.Target``.

Compose interpolates ``${VAR}``/``$VAR`` from the host's environment or ``.env`` (neither is
in the file: unsettled; ``${VAR:-default}`` names the default only), and asks for GPUs in
several forms (device reservations, ``gpus:``, CDI devices, the nvidia runtime).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from typing import Any

from vllm_doctor.serveline.target import (
    Placed,
    Target,
    _get,
    _gpu_count,
    _line,
    _new_target,
    _Refs,
    entrypoint,
    quantity_mib,
)

_COMPOSE_REF = re.compile(r"\$\$|\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*")


def _compose_interpolate(text: str, refs: _Refs) -> str:
    """Compose replaces ``${VAR}``/``$VAR`` from the host's environment or .env file (neither
    is in the file: unsettled); ``$$`` is a literal ``$`` for the container."""
    return _COMPOSE_REF.sub(lambda m: "$" if m.group(0) == "$$" else refs.mark(m.group(0)), text)


def _compose_default(text: str) -> str:
    """``${VAR:-default}``/``${VAR-default}`` replaced by the default: what the file means
    when the variable is unset."""
    return re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-([^}]*)\}", r"\1", text)


def _compose_words(value: Any, refs: _Refs) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return shlex.split(_compose_interpolate(value, refs))
        except ValueError:
            return None
    return [_compose_interpolate(str(v), refs) for v in value]


def compose_targets(name: str, doc: dict) -> Iterator[Target]:
    services = doc["services"]
    for service_name, service in services.items():
        if not isinstance(service, dict):
            continue
        refs = _Refs()
        image = service.get("image")
        if isinstance(image, str) and "$" in image:  # ${VLLM_IMAGE:-vllm/vllm-openai:v0.6.6}
            image = _compose_default(image)
        env = _compose_env(service.get("environment"), refs)
        entry = _compose_words(service.get("entrypoint"), refs)
        command = _compose_words(service.get("command"), refs)
        entry = entrypoint(entry, image, command)
        if entry is None:
            continue
        # the container's shell sees the compose-time result: `$$VAR` is its variable
        words = entry + (command or [])
        target = _new_target(
            name,
            "compose service",
            f"compose service {service_name}",
            service,
            _line(services, service_name),
            ("entrypoint", "command"),
            words,
            env,
            refs,
        )
        if target is None:
            continue
        if isinstance(service.get("image"), str) and "$" in service["image"]:
            target.image = None
            target.image_unknown = (
                f"the image is {service['image']}: the host's environment or .env decides "
                "which (the file's default is only used when the variable is unset)"
            )
        if service.get("env_file"):
            target.env_elsewhere = "the service also reads an env_file the check does not open"
        _compose_gpus(target, service)
        if service.get("ipc") == "host":
            target.shm = Placed("ipc: host", _line(service, "ipc"), "ipc: host")
        elif service.get("shm_size") is not None:
            size = quantity_mib(
                service["shm_size"],
                docker=True,
                where=f"{target.file}:{_line(service, 'shm_size')} shm_size",
            )
            target.shm = Placed(
                size if size is not None else str(service["shm_size"]),
                _line(service, "shm_size"),
                f"shm_size {service['shm_size']}",
            )
        target.gpu_product_unknown = (
            f"{target.where}: a compose file does not name the GPU product; pass --gpu NAME"
        )
        yield target


def _compose_env(value: Any, refs: _Refs) -> dict[str, Placed]:
    env: dict[str, Placed] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            text = None if item is None else _compose_interpolate(str(item), refs)
            env[str(key)] = Placed(
                None if text is None or refs.find(text) else text,
                _line(value, key),
                f"environment {key}",
            )
    elif isinstance(value, list):
        for i, item in enumerate(value):
            key, eq, text = str(item).partition("=")
            text = _compose_interpolate(text, refs) if eq else None
            env[key] = Placed(
                None if text is None or refs.find(text) else text,
                value.lines[i] if hasattr(value, "lines") else 0,
                f"environment {key}",
            )
    return env


_ALL = "all"


def _device_count(request: dict, where: str) -> int | str | None:
    """The GPUs one compose device request reserves: a count, ``all``, or None when it is
    not a GPU request. Compose reserves every matching device when neither ``count`` nor
    ``device_ids`` is given. A count no service can have is bad input naming ``where``."""
    ids = request.get("device_ids")
    if isinstance(ids, list):
        return len([i for item in ids for i in str(item).split(",") if i.strip()])
    count = request.get("count")
    if count is None or str(count).strip().lower() == _ALL or str(count).strip() == "-1":
        return _ALL
    if not str(count).strip().isdigit():
        return None
    return _gpu_count(count, f"{where} count")


def _compose_gpus(target: Target, service: dict) -> None:
    """The GPUs a service asks for, in each form Compose defines: ``deploy.resources.
    reservations.devices`` (count, device_ids, neither), ``gpus:`` (all, or device
    requests), CDI ``devices:`` (nvidia.com/gpu=0), ``runtime: nvidia`` with
    NVIDIA_VISIBLE_DEVICES."""
    found: list[tuple[int | str, int, str]] = []
    devices = _get(service, "deploy", "resources", "reservations", "devices")
    for i, device in enumerate(devices if isinstance(devices, list) else ()):
        if not isinstance(device, dict):
            continue
        capabilities = [str(c) for c in device.get("capabilities") or ()]
        if "gpu" not in capabilities and device.get("driver") not in ("nvidia", "amd"):
            continue
        line = _line(device, "count", _line(device, "device_ids", devices.lines[i]))
        count = _device_count(device, f"{target.file}:{line}")
        if count is not None:
            found.append((count, line, "deploy.resources.reservations.devices"))
    gpus = service.get("gpus")
    if gpus is not None:
        line = _line(service, "gpus")
        if isinstance(gpus, list):
            for request in gpus:
                count = (
                    _device_count(request, f"{target.file}:{line}")
                    if isinstance(request, dict)
                    else None
                )
                found.append((_ALL if count is None else count, line, "gpus"))
        else:
            found.append((_ALL, line, f"gpus: {gpus}"))
    cdi = [
        str(d)
        for d in service.get("devices") or ()
        if str(d).startswith(("nvidia.com/gpu=", "amd.com/gpu="))
    ]
    if cdi:
        ids = [d.split("=", 1)[1] for d in cdi]
        found.append(
            (_ALL if _ALL in ids else len(ids), _line(service, "devices"), "devices (CDI)")
        )
    visible = target.env.get("NVIDIA_VISIBLE_DEVICES")
    if not found and service.get("runtime") == "nvidia" and visible is not None:
        value = str(visible.value or "").strip().lower()
        if visible.value is not None and value not in (_ALL, ""):
            count = 0 if value in ("none", "void") else len([v for v in value.split(",") if v])
            found.append((count, visible.line, "runtime: nvidia, NVIDIA_VISIBLE_DEVICES"))
        else:
            found.append((_ALL, visible.line, "runtime: nvidia, NVIDIA_VISIBLE_DEVICES"))
    if not found:
        return
    if any(count == _ALL for count, _, _ in found):
        line, what = next((ln, w) for c, ln, w in found if c == _ALL)
        target.gpus_unknown = (
            f"{target.file}:{line}: {what} asks for all the host's GPUs, a number the file "
            "does not state; pass --gpus N"
        )
        return
    total = sum(int(count) for count, _, _ in found)
    where = f"{target.file}:{found[0][1]} {found[0][2]}"
    target.gpus = Placed(_gpu_count(total, where), found[0][1], found[0][2])
