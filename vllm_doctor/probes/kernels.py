"""kernels: can this GPU run the installed stack's compiled kernels? Found in seconds, before a
model load, instead of at the first kernel launch minutes into `vllm serve`.

Everything runs in one isolated child (the ``load`` part), because a broken extension can
poison or kill the process that loads it. For each kind of GPU present (one device of each
name and compute capability), the child:

* runs a tiny torch operation (torch's own kernels: ``no kernel image`` for a torch build
  without this architecture);
* hands every fatbin of every compiled library of the installed stack (found by
  kernel_inventory.py in the doctor's process: vLLM's ``_C``, ``_moe_C``, its FlashAttention and
  FlashMLA builds, FlashInfer, DeepGEMM, …, and the files given with ``--extension``) to the
  CUDA driver (``cuModuleLoadData``), which picks the image for this GPU or compiles the PTX:
  ``no kernel image is available`` (no image for this architecture), ``device kernel image is
  invalid``, or ``the provided PTX was compiled with an unsupported toolchain`` (PTX newer than
  the driver) come from the driver itself;
* imports each library that is a Python extension module after torch (an ``undefined symbol``
  is an extension built against another torch) and runs one tiny operation of the ones whose
  operation it knows (vLLM's ``_C``: ``silu_and_mul``).

The outcomes confirm HW201 (no kernel image), HW211 (PTX newer than the driver), ENV002
(vLLM's ``_C`` against another torch) or ENV212 (another extension), and refute them when
everything that was checked loaded and ran.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

from vllm_doctor.probes._common import Ctx, err_text, result
from vllm_doctor.probes.cuda_driver import Driver

# CUDA driver error codes (cuda.h) and the rule each confirms
NO_BINARY_FOR_GPU, INVALID_IMAGE, INVALID_PTX, UNSUPPORTED_PTX_VERSION = 209, 200, 218, 222
RULE_OF_ERROR = {
    NO_BINARY_FOR_GPU: "HW201",
    INVALID_IMAGE: "HW201",
    UNSUPPORTED_PTX_VERSION: "HW211",
}
# the time the child gives the driver for one library's fatbins (PTX compiled at load time
# can be slow); what is not loaded by then is reported as not checked
LIBRARY_BUDGET_S = 30.0
KINDS_LIMIT = 8


def gpu_kinds(torch: Any) -> list[dict]:
    """One device of each GPU kind present (name and compute capability)."""
    kinds: dict[tuple[str, int], dict] = {}
    for i in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(i)
        name = torch.cuda.get_device_name(i)
        key = (name, major * 10 + minor)
        if key not in kinds:
            kinds[key] = {"device": i, "name": name, "capability": major * 10 + minor, "count": 0}
        kinds[key]["count"] += 1
    return list(kinds.values())[:KINDS_LIMIT]


def _torch_op(torch: Any, device: int) -> str | None:
    """torch's own kernels on this device: None when they run, else the error."""
    try:
        x = torch.arange(64, device=f"cuda:{device}", dtype=torch.float32)
        total = float((x * 2 + 1).sum().item())
        if total != 64 * 64:
            return f"torch.arange(64) * 2 + 1 sums to {total}, not {64 * 64}"
        torch.cuda.synchronize(device)
    except Exception as err:
        return err_text(err)
    return None


def _op_vllm_c(torch: Any, device: int) -> str | None:
    """vLLM's ``_C``: silu_and_mul(out, x) against torch's own."""
    op = getattr(torch.ops._C, "silu_and_mul", None)
    if op is None:
        return None
    x = torch.randn(4, 256, device=f"cuda:{device}", dtype=torch.float16)
    out = torch.empty(4, 128, device=f"cuda:{device}", dtype=torch.float16)
    op(out, x)
    ref = torch.nn.functional.silu(x[:, :128].float()) * x[:, 128:].float()
    err = float((out.float() - ref).abs().max())
    return None if err < 1e-2 else f"silu_and_mul differs from torch by {err:.3g}"


# the one tiny operation run for an extension module whose interface the doctor knows
TINY_OPS = {"vllm._C": ("silu_and_mul", _op_vllm_c)}


def _classify_import(module: str, text: str) -> str | None:
    """The rule an import failure confirms: an undefined symbol is an ABI mismatch."""
    if "undefined symbol" not in text:
        return None
    return "ENV002" if module == "vllm._C" else "ENV212"


def _load_fatbins(driver: Driver, lib: dict, kinds: list[dict], ctx: Ctx) -> dict:
    """Every fatbin of ``lib`` through the driver on each GPU kind: how many loaded, the
    errors (with the images the failing fatbins carry)."""
    from vllm_doctor.fatbin import fatbin_bytes, read_fatbins

    path = lib["path"]
    out: dict[str, Any] = {}
    if path.endswith((".ptx", ".cubin")):
        with open(path, "rb") as fh:
            images = [(fh.read(), ["ptx" if path.endswith(".ptx") else "cubin"])]
    else:
        images = [(fatbin_bytes(path, f), f.images) for f in read_fatbins(path)]
    for kind in kinds:
        driver.use(kind["device"])
        started = time.monotonic()
        loaded, unchecked = 0, 0
        errors: dict[int, str] = {}
        failing: list[str] = []
        for n, (image, names) in enumerate(images):
            if time.monotonic() - started > LIBRARY_BUDGET_S:
                unchecked = len(images) - n
                break
            code = driver.load(image)
            if code == 0:
                loaded += 1
                continue
            errors.setdefault(code, driver.error(code))
            if len(failing) < 5:
                failing.append(", ".join(names) or "no image")
        out[str(kind["capability"])] = {
            "images_total": len(images),
            "loaded": loaded,
            "errors": {str(k): v for k, v in errors.items()},
            "failing_images": failing,
            "unchecked": unchecked,
            "seconds": round(time.monotonic() - started, 3),
        }
    return out


def part_load(ctx: Ctx) -> dict:
    import torch

    given = (ctx.params.get("kernels") or {}).get("libraries")
    if given is None:  # started without the doctor's inventory (check --probe, torchrun)
        from vllm_doctor.probes.kernel_inventory import installed_libraries

        given = installed_libraries()
    libs = list(given)
    kinds = gpu_kinds(torch)
    metrics: dict[str, Any] = {
        "gpu_kinds": [f"{k['name']} (sm_{k['capability']}) ×{k['count']}" for k in kinds],
        "libraries_checked": len(libs),
    }
    confirmed: list[str] = []
    problems: list[str] = []
    torch_fail = {}
    for kind in kinds:
        ctx.progress(f"torch's kernels on {kind['name']}")
        said = _torch_op(torch, kind["device"])
        if said:
            torch_fail[kind["name"]] = said
    metrics["torch"] = {"version": torch.__version__, "cuda": torch.version.cuda}
    if torch_fail:
        metrics["torch"]["errors"] = torch_fail
        for name, said in torch_fail.items():
            problems.append(f"torch {torch.__version__} on {name}: {said}")
            if "no kernel image" in said:
                confirmed.append("HW201")
    driver = Driver()
    records = []
    imported_ok: list[str] = []
    for lib in libs:
        label = lib.get("module") or lib["path"]
        record: dict[str, Any] = {
            "library": label,
            "package": lib.get("package"),
            "version": lib.get("version"),
            "images": lib.get("images"),
        }
        ctx.progress(f"loading {label} through the driver")
        try:
            record["load"] = _load_fatbins(driver, lib, kinds, ctx)
        except Exception as err:
            record["load_error"] = err_text(err)
            problems.append(f"{label}: {record['load_error']}")
        for cap, seen in (record.get("load") or {}).items():
            for code, said in seen["errors"].items():
                problems.append(
                    f"{label} on sm_{cap}: {said} ({len(seen['failing_images'])} failing "
                    f"fatbin(s) of {seen['images_total']}; they carry {seen['failing_images'][0]})"
                )
                rule = RULE_OF_ERROR.get(int(code))
                if rule and rule not in confirmed:
                    confirmed.append(rule)
        module = lib.get("module")
        if module:
            ctx.progress(f"importing {module}")
            try:
                importlib.import_module(module)
                imported_ok.append(module)
                record["import"] = "ok"
            except Exception as err:
                said = err_text(err)
                record["import"] = said
                problems.append(f"import {module}: {said}")
                rule = _classify_import(module, said)
                if rule and rule not in confirmed:
                    confirmed.append(rule)
            if module in TINY_OPS and record["import"] == "ok":
                op_name, op = TINY_OPS[module]
                for kind in kinds:
                    try:
                        said = op(torch, kind["device"])
                    except Exception as err:
                        said = err_text(err)
                    record.setdefault("ops", {})[f"{op_name} sm_{kind['capability']}"] = (
                        said or "ok"
                    )
                    if said:
                        problems.append(f"{module}.{op_name} on {kind['name']}: {said}")
                        if "no kernel image" in said and "HW201" not in confirmed:
                            confirmed.append("HW201")
        records.append(record)
    metrics["libraries"] = records
    refuted = []
    if not problems:
        refuted.append("HW201")
        if any((r.get("load") or {}) for r in records):
            refuted.append("HW211")
        if "vllm._C" in imported_ok:
            refuted.append("ENV002")
        if imported_ok:
            refuted.append("ENV212")
    checked = f"torch and {len(libs)} compiled librar{'y' if len(libs) == 1 else 'ies'}"
    where = ", ".join(metrics["gpu_kinds"])
    if problems:
        # a failure a rule names is the mechanism shown (the verdict joins it with the rule);
        # one no rule names is a warning in its own right
        status = "pass" if confirmed else "warn"
        return result(status, "; ".join(problems[:4]), metrics, confirmed, refuted)
    note = "" if libs else " (no compiled library of vLLM's stack is installed here)"
    return result("pass", f"{checked} load and run on {where}{note}", metrics, confirmed, refuted)


def run(ctx: Ctx) -> dict:
    """The ranks do nothing: the check runs in its isolated child (the ``load`` part)."""
    return result("skip", "checked in its isolated child")
