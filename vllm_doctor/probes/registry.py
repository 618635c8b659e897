"""What probes exist, what each needs, and which rules each confirms. No torch here.

A probe runs in the shared worker processes (one per rank, all probes in sequence). A probe
may also have *parts*: sub-checks that must run in their own isolated child process (a
different allocator setting, state that must not leak into the other probes); the runner
starts those beside the worker group and folds their results into the probe's.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Part:
    """A sub-check run in its own single-process child."""

    name: str
    needs_cuda: bool = False
    env: dict[str, str] = field(default_factory=dict)
    cacheable: bool = False  # deterministic for a given torch: its result may be reused
    cache_params: tuple[str, ...] = ()  # the probe parameters its result depends on
    imports: tuple[str, ...] = ()  # modules it imports beyond the worker's (bytecode.py compiles them)


@dataclass(frozen=True)
class ProbeSpec:
    name: str
    title: str
    module: str  # module under vllm_doctor.probes with run(ctx) (and part functions)
    rules: tuple[str, ...] = ()
    min_world: int = 1  # ranks the probe needs
    needs_cuda: bool = False  # skipped with --device cpu
    collective: bool = False  # uses torch.distributed (NCCL on GPUs, gloo on CPU)
    needs_torch: bool = True
    parts: tuple[Part, ...] = ()
    hidden: bool = False  # self-test probes for the runner's own tests

    def skip_reason(self, world: int, device: str) -> str | None:
        """Why the probe cannot run with these settings (decided before launching anything)."""
        if self.needs_cuda and device != "cuda":
            return "needs a CUDA GPU (--device cpu)"
        if world < self.min_world:
            if device == "cuda":
                return f"needs {self.min_world} GPUs (tensor-parallel {self.min_world}); running at --tp {world}"
            return f"needs {self.min_world} ranks; running at --tp {world}"
        return None


PROBES: tuple[ProbeSpec, ...] = (
    ProbeSpec(
        name="p2p-nccl",
        title="GPU peer access, copies and NCCL collectives between every pair",
        module="p2p_nccl", rules=("HW001",), min_world=2, needs_cuda=True, collective=True,
    ),
    ProbeSpec(
        name="tp-softembed",
        title="Vocab-parallel soft embedding (DiffusionGemma self-conditioning) at TP > 1",
        module="tp_softembed", rules=("MODEL001",), min_world=2, collective=True,
        parts=(Part("compile", cacheable=True, cache_params=("tp",), imports=("torch._dynamo", "torch._dynamo.polyfills.*")),),
    ),
    ProbeSpec(
        name="cudagraph-replay",
        title="CUDA-graph replay over an all-gathered LM-head weight (Gemma 4 MTP centroids)",
        module="cudagraph_replay", rules=("SPEC001",), needs_cuda=True, collective=True,
        parts=(Part("transient", needs_cuda=True, env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}),),
    ),
    ProbeSpec(
        name="pp-handoff",
        title="Sampled-token handoff between pipeline stages (int64 broadcast)",
        module="pp_handoff", rules=("MODEL002",), min_world=2, collective=True,
    ),
    ProbeSpec(
        name="padded-batch",
        title="Padded decode batch: block table and sparse-indexer top-k write-back",
        module="padded_batch", rules=("SPEC002", "SPEC003"),
    ),
    ProbeSpec(
        name="fp8-scaled-mm-3d",
        title="FP8 torch._scaled_mm on a 3-D activation: output narrowing",
        module="fp8_scaled_mm_3d", rules=("QUANT001", "QUANT002"), needs_cuda=True,
    ),
    # Self-test probes: they exercise the runner (deadline, crash, teardown hang, Ctrl-C).
    ProbeSpec(name="selftest-ok", title="self-test: passes", module="selftest",
              needs_torch=False, hidden=True),
    ProbeSpec(name="selftest-sleep", title="self-test: never returns", module="selftest",
              needs_torch=False, hidden=True),
    ProbeSpec(name="selftest-crash", title="self-test: the process dies", module="selftest",
              needs_torch=False, hidden=True),
    ProbeSpec(name="selftest-raise", title="self-test: raises", module="selftest",
              needs_torch=False, hidden=True),
    ProbeSpec(name="selftest-poison", title="self-test: a sticky CUDA-like error",
              module="selftest", needs_torch=False, hidden=True),
    ProbeSpec(name="selftest-teardown-hang", title="self-test: teardown never returns",
              module="selftest", needs_torch=False, hidden=True),
    ProbeSpec(name="selftest-hold", title="self-test: holds a process group open", module="selftest",
              collective=True, hidden=True),
    ProbeSpec(name="selftest-part", title="self-test: an isolated part", module="selftest",
              needs_torch=False, hidden=True, parts=(Part("child"),)),
)

BY_NAME: dict[str, ProbeSpec] = {p.name: p for p in PROBES}
PROBE_NAMES: list[str] = [p.name for p in PROBES if not p.hidden]

PROBES_FOR_RULE: dict[str, list[str]] = {}
for _spec in PROBES:
    for _code in _spec.rules:
        PROBES_FOR_RULE.setdefault(_code, []).append(_spec.name)
