"""Helpers shared by the probe modules. Imported only inside worker processes (torch lives here)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Ctx:
    """What a probe function gets: who it is, where it runs, and how to report progress."""

    rank: int
    world: int
    local_rank: int
    device_kind: str  # "cuda" | "cpu"
    params: dict[str, Any]
    emit: Callable[[dict[str, Any]], None]
    dist_backend: str | None = None  # "nccl" | "gloo" | None
    store: Any = None  # the store the ranks meet through, before the process group forms
    init: dict[str, Any] = field(default_factory=dict)
    probe: str = ""
    part: str | None = None  # set in a forked sub-check
    stop_after: bool = False  # set by a probe whose failure poisons the process
    hang_teardown: str | None = None  # self-tests: "soft" | "hard"
    # What each probe's prepare(ctx) returned (or raised), run while the process group forms.
    prepared: dict[str, Any] = field(default_factory=dict)
    prepare_s: dict[str, float] = field(default_factory=dict)

    def take_prepared(self) -> Any:
        """This probe's prepared state; re-raises what its prepare raised."""
        state = self.prepared.pop(self.probe, None)
        if isinstance(state, BaseException):
            raise state
        return state

    @property
    def device(self):  # torch.device, imported lazily
        import torch

        if self.device_kind == "cuda":
            return torch.device("cuda", self.local_rank)
        return torch.device("cpu")

    @property
    def small(self) -> bool:
        """CPU runs use small shapes so that CI stays fast (results say so)."""
        return self.device_kind != "cuda" or bool(self.params.get("small"))

    def progress(self, message: str) -> None:
        self.emit({"ev": "progress", "probe": self.probe, "msg": message})

    def report_and_exit(self, res: dict[str, Any]) -> None:
        """For a sub-check whose CUDA context may be poisoned: report, then leave at once
        (tensor destructors would call cudaFree on a broken context and abort the process)."""
        import os
        import sys

        res.setdefault("metrics", {})
        self.emit({"ev": "result", "probe": self.probe, "part": self.part, "result": res})
        self.emit({"ev": "done"})
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    def model_dim(self, key: str, default: int) -> tuple[int, str]:
        """A model dimension from the model config when given, else the default; and its source."""
        model = self.params.get("model") or {}
        value = model.get(key)
        if isinstance(value, int) and value > 0:
            return value, "model config"
        return default, "default"

    def vocab_and_hidden(self, vocab_default: int, hidden_default: int) -> tuple[int, int, str]:
        """Vocabulary and hidden size (the model config's, else the defaults) and their source."""
        vocab, vsrc = self.model_dim("vocab_size", vocab_default)
        hidden, hsrc = self.model_dim("hidden_size", hidden_default)
        return vocab, hidden, vsrc if vsrc == hsrc else f"{vsrc}/{hsrc}"


def result(
    status: str,
    reason: str = "",
    metrics: dict[str, Any] | None = None,
    confirmed: list[str] | tuple[str, ...] = (),
    refuted: list[str] | tuple[str, ...] = (),
    notes: list[str] | None = None,
) -> dict[str, Any]:
    return {
        "status": status,
        "reason": reason,
        "metrics": metrics or {},
        "rules_confirmed": list(confirmed),
        "rules_refuted": list(refuted),
        "notes": list(notes or []),
    }


def err_text(err: BaseException, limit: int = 400) -> str:
    """``Type: message`` on one line (first lines of long messages), as a user would quote it."""
    msg = str(err).strip()
    msg = msg.split("\nSearch for `", 1)[0].split(" Search for `", 1)[0]  # CUDA's boilerplate
    lines = [ln for ln in msg.splitlines() if ln.strip()]
    text = " ".join(lines[:3]) if lines else ""
    out = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return out if len(out) <= limit else out[: limit - 3] + "..."


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def rel_err(out, ref) -> float:
    """‖out − ref‖ / ‖ref‖ in float64 (NaN if ``out`` has a NaN)."""
    import torch

    a = out.detach().to(torch.float64)
    b = ref.detach().to(torch.float64)
    denom = torch.linalg.vector_norm(b).item()
    num = torch.linalg.vector_norm(a - b).item()
    return num / denom if denom else num


def max_abs_err(out, ref) -> float:
    import torch

    return (out.detach().to(torch.float64) - ref.detach().to(torch.float64)).abs().max().item()


def time_op(fn: Callable[[], Any], device, iters: int = 5, warmup: int = 2) -> float:
    """Median seconds of ``fn`` (CUDA events on a GPU, the host clock on the CPU)."""
    import torch

    for _ in range(warmup):
        fn()
    times: list[float] = []
    if device.type == "cuda":
        for _ in range(iters):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
    else:
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


class _Background:
    def __init__(self, fn: Callable[[], Any]):
        self.box: dict[str, Any] = {}
        self.t0 = time.perf_counter()

        def target() -> None:
            try:
                fn()
            except BaseException as err:
                self.box["err"] = err
            self.box["seconds"] = time.perf_counter() - self.t0

        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()

    def join(self, timeout: float) -> tuple[bool, float, BaseException | None]:
        """(returned within ``timeout`` seconds of the start, seconds, exception raised)."""
        remaining = max(0.0, timeout - (time.perf_counter() - self.t0))
        self.thread.join(None if remaining == float("inf") else remaining)
        done = not self.thread.is_alive()
        seconds = (
            self.box.get("seconds", time.perf_counter() - self.t0)
            if done
            else time.perf_counter() - self.t0
        )
        return done, seconds, self.box.get("err")


def call_in_thread(fn: Callable[[], Any]) -> _Background:
    """Start ``fn`` in a daemon thread; ``.join(timeout)`` tells whether it returned in time."""
    return _Background(fn)


GIB = 1024**3
