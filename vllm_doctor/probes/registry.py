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
    imports: tuple[
        str, ...
    ] = ()  # modules it imports beyond the worker's (bytecode.py compiles them)


HARDWARE, TORCH = "hardware", "torch"

# The model config's sizes the probes take (from the collected ``model.*`` facts).
MODEL_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "num_hidden_layers",
)


@dataclass(frozen=True)
class Check:
    """One thing a probe measures, and what its outcome is a property of: ``hardware`` (the
    GPUs, their links, NCCL, the CUDA driver and allocator) or ``torch`` (torch's own shapes,
    dtypes and checks, the same on any device). ``cpu``: what the CPU (gloo) variant runs in
    its place, or None where it runs nothing of it."""

    what: str
    depends: str
    cpu: str | None = None


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
    on_request: bool = False  # a measurement, not a rule's check: runs only when named
    checks: tuple[Check, ...] = ()  # what it measures (shown with its results)
    # per rule: what decides whether the failure's mechanism exists (HARDWARE or TORCH)
    mechanism: tuple[tuple[str, str], ...] = ()
    verifies: str = ""  # the fix's (or workaround's) approach that the probe checks here

    def mechanism_of(self, code: str) -> str:
        return dict(self.mechanism).get(code, HARDWARE)

    def skip_reason(self, world: int, device: str) -> str | None:
        """Why the probe cannot run with these settings (decided before launching anything)."""
        if self.needs_cuda and device != "cuda":
            return "needs a CUDA GPU; this is the CPU (gloo) variant"
        if world < self.min_world:
            if device == "cuda":
                return f"needs {self.min_world} GPUs (tensor-parallel {self.min_world}); running at --tp {world}"
            return f"needs {self.min_world} ranks; running at --tp {world}"
        return None


PROBES: tuple[ProbeSpec, ...] = (
    ProbeSpec(
        name="p2p-nccl",
        title="GPU peer access, copies and NCCL collectives between every pair",
        module="p2p_nccl",
        rules=("HW001",),
        min_world=2,
        needs_cuda=True,
        collective=True,
        checks=(
            Check(
                "peer access and copies between every pair of the ranks' GPUs, checked on "
                "the destination",
                HARDWARE,
            ),
            Check(
                "NCCL all-reduce and all-gather correctness, and bus bandwidth against the "
                "floor of the slowest link class",
                HARDWARE,
            ),
        ),
        mechanism=(("HW001", HARDWARE),),
        verifies="copies and NCCL collectives deliver the right data over these links",
    ),
    ProbeSpec(
        name="tp-softembed",
        title="Vocab-parallel soft embedding (DiffusionGemma self-conditioning) at TP > 1",
        module="tp_softembed",
        rules=("MODEL001",),
        min_world=2,
        collective=True,
        parts=(
            Part(
                "compile",
                cacheable=True,
                cache_params=("tp",),
                imports=("torch._dynamo", "torch._dynamo.polyfills.*"),
            ),
        ),
        checks=(
            Check(
                "full-vocab probabilities × a [vocab/tp, hidden] weight shard: the shape "
                "error, eager and traced by torch.compile",
                TORCH,
                cpu="the same, small shapes",
            ),
            Check(
                "both fixes (all-gather the weight; slice the probabilities and all-reduce) "
                "against the TP=1 product, across the ranks",
                HARDWARE,
                cpu="over gloo between CPU processes, not NCCL between GPUs",
            ),
            Check(
                "memory the all-gather replicates per rank, and its bus bandwidth",
                HARDWARE,
                cpu="gloo over loopback: not a GPU link's bandwidth",
            ),
        ),
        mechanism=(("MODEL001", TORCH),),
        verifies="slicing the probabilities to each rank's vocab range and all-reducing the "
        "partial products (PR 46177) matches the TP=1 result",
    ),
    ProbeSpec(
        name="cudagraph-replay",
        title="CUDA-graph replay over an all-gathered LM-head weight (Gemma 4 MTP centroids)",
        module="cudagraph_replay",
        rules=("SPEC001",),
        needs_cuda=True,
        collective=True,
        parts=(Part("transient", needs_cuda=True, env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}),),
        checks=(
            Check(
                "a CUDA graph of logits + top-k over the kept all-gathered weight replays "
                "identical to eager (the fix)",
                HARDWARE,
            ),
            Check("an NCCL all-gather captured in a CUDA graph replays identical", HARDWARE),
            Check(
                "replay over the freed weight with the caching allocator off: illegal "
                "memory access, wrong values or nothing visible (the bug)",
                HARDWARE,
            ),
        ),
        mechanism=(("SPEC001", HARDWARE),),
        verifies="keeping the gathered weight alive for the graphs (PR 43909) replays identical "
        "to eager",
    ),
    ProbeSpec(
        name="pp-handoff",
        title="Sampled-token handoff between pipeline stages (int64 broadcast)",
        module="pp_handoff",
        rules=("MODEL002",),
        min_world=2,
        collective=True,
        checks=(
            Check(
                "the int64 guard on int32 and float sampler output; int32 bytes read as "
                "int64; bf16 token ids",
                TORCH,
                cpu="the same",
            ),
            Check(
                "the int64 broadcast from the sampling stage to the others",
                HARDWARE,
                cpu="over gloo between CPU processes, not NCCL between GPUs",
            ),
        ),
        mechanism=(("MODEL002", TORCH),),
        verifies="casting the sampled ids to int64 before the broadcast delivers exact ids",
    ),
    ProbeSpec(
        name="collectives",
        title="All-reduce and all-gather across every rank and node of the group",
        module="collectives",
        min_world=2,
        collective=True,
        on_request=True,
        checks=(
            Check(
                "all-reduce and all-gather correctness across the ranks, wherever each runs "
                "(`probe --ray`: one Ray actor per GPU, placed as vLLM places its workers)",
                HARDWARE,
                cpu="over gloo between CPU processes, not NCCL between GPUs",
            ),
            Check(
                "bus bandwidth against the floor of the slowest link between two ranks: the "
                "GPUs' link on one host, InfiniBand or sockets between hosts",
                HARDWARE,
                cpu="gloo over loopback or TCP: reported, not judged",
            ),
        ),
        verifies="",
    ),
    ProbeSpec(
        name="padded-batch",
        title="Padded decode batch: block table and sparse-indexer top-k write-back",
        module="padded_batch",
        rules=("SPEC002", "SPEC003"),
        checks=(
            Check(
                "padded decode batches with the unsliced and the sliced block table through "
                "varlen flash attention",
                HARDWARE,
                cpu="SDPA over pages gathered with the table, not the flash kernel",
            ),
            Check(
                "sparse-indexer top-k write-back sized by the padded count vs the unpacked rows",
                TORCH,
                cpu="the same",
            ),
        ),
        mechanism=(("SPEC002", HARDWARE), ("SPEC003", TORCH)),
        verifies="the block table sliced to the real batch (PR 43982) and the write-back sized "
        "by the unpacked rows (PR 39542) match the unpadded reference",
    ),
    ProbeSpec(
        name="fp8-scaled-mm-3d",
        title="FP8 torch._scaled_mm on a 3-D activation: output narrowing",
        module="fp8_scaled_mm_3d",
        rules=("QUANT001", "QUANT002"),
        needs_cuda=True,
        checks=(
            Check(
                "a flattened 3-D torch._scaled_mm output narrowed by output_shape[0] vs by "
                "the token count (a shape check; it needs FP8 tensor cores to run)",
                TORCH,
            ),
            Check(
                "FP8 tensor cores (compute capability ≥ 8.9), and FP8 vs bf16 TFLOP/s at 4096³",
                HARDWARE,
            ),
        ),
        mechanism=(("QUANT001", TORCH), ("QUANT002", HARDWARE)),
        verifies="narrowing by the token count (PR 38093) matches the dequantised reference",
    ),
    ProbeSpec(
        name="kernels",
        title="The installed stack's compiled kernels load and run on every GPU kind here",
        module="kernels",
        rules=("HW201", "HW211", "ENV002", "ENV212"),
        needs_cuda=True,
        parts=(Part("load", needs_cuda=True),),
        checks=(
            Check(
                "a tiny torch operation on one GPU of each kind (torch's own kernels)",
                HARDWARE,
            ),
            Check(
                "every fatbin of vLLM's and its kernel packages' compiled libraries (and of "
                "--extension files) loaded by the CUDA driver on each GPU kind: an image for "
                "this architecture, or PTX the driver can compile",
                HARDWARE,
            ),
            Check(
                "each extension module imported after torch (undefined symbols: built "
                "against another torch), and one tiny operation of those the doctor knows",
                HARDWARE,
            ),
        ),
        mechanism=(
            ("HW201", HARDWARE),
            ("HW211", HARDWARE),
            ("ENV002", HARDWARE),
            ("ENV212", HARDWARE),
        ),
        verifies="",
    ),
    ProbeSpec(
        name="memory",
        title="GPU memory vLLM's start-up subtracts: CUDA context, cuBLAS, NCCL, CUDA graphs, activations",
        module="memory",
        needs_cuda=True,
        collective=True,
        on_request=True,
        parts=(Part("fresh", needs_cuda=True),),
        checks=(
            Check(
                "the GPU's total, the CUDA context, and the caching allocator's slack "
                "(cudaMemGetInfo and NVML against memory_reserved)",
                HARDWARE,
            ),
            Check(
                "cuBLAS/cuBLASLt handle memory and the workspaces torch holds after the "
                "first bf16 GEMM",
                TORCH,
            ),
            Check("one more NCCL communicator of the group's ranks, per rank", HARDWARE),
            Check(
                "the CUDA-graph pool and per-graph memory of a synthetic decode step over "
                "vLLM's default capture sizes (FULL and PIECEWISE)",
                HARDWARE,
            ),
            Check(
                "the activation peak of a synthetic dense decoder forward at "
                "max-num-batched-tokens, with the logits and a top-p-like sort",
                TORCH,
            ),
        ),
        verifies="",
    ),
    # Self-test probes: they exercise the runner (deadline, crash, teardown hang, Ctrl-C).
    ProbeSpec(
        name="selftest-ok",
        title="self-test: passes",
        module="selftest",
        needs_torch=False,
        hidden=True,
    ),
    ProbeSpec(
        name="selftest-sleep",
        title="self-test: never returns",
        module="selftest",
        needs_torch=False,
        hidden=True,
    ),
    ProbeSpec(
        name="selftest-crash",
        title="self-test: the process dies",
        module="selftest",
        needs_torch=False,
        hidden=True,
    ),
    ProbeSpec(
        name="selftest-raise",
        title="self-test: raises",
        module="selftest",
        needs_torch=False,
        hidden=True,
    ),
    ProbeSpec(
        name="selftest-poison",
        title="self-test: a sticky CUDA-like error",
        module="selftest",
        needs_torch=False,
        hidden=True,
    ),
    ProbeSpec(
        name="selftest-teardown-hang",
        title="self-test: teardown never returns",
        module="selftest",
        needs_torch=False,
        hidden=True,
    ),
    ProbeSpec(
        name="selftest-hold",
        title="self-test: holds a process group open",
        module="selftest",
        collective=True,
        hidden=True,
    ),
    ProbeSpec(
        name="selftest-part",
        title="self-test: an isolated part",
        module="selftest",
        needs_torch=False,
        hidden=True,
        parts=(Part("child"),),
    ),
)

BY_NAME: dict[str, ProbeSpec] = {p.name: p for p in PROBES}
PROBE_NAMES: list[str] = [p.name for p in PROBES if not p.hidden]
# what runs when no probe is named: every public probe but the measurements run on request
DEFAULT_PROBES: tuple[ProbeSpec, ...] = tuple(
    p for p in PROBES if not p.hidden and not p.on_request
)

PROBES_FOR_RULE: dict[str, list[str]] = {}
for _spec in PROBES:
    for _code in _spec.rules:
        PROBES_FOR_RULE.setdefault(_code, []).append(_spec.name)
