"""Facts computed from other facts: free memory, divisibility, driver vs torch CUDA.

A derived fact is only set when every input exists; otherwise it is marked missing with a
reason that names the missing input (and why that one is missing), so "cannot decide" verdicts
point at what to supply.

The memory estimate (weights, activation peak, KV cache, tokens, whether one request fits) is
not here: it is the memory model's, ``memory.*`` (vllm_doctor/memory/facts.py).

  Free memory below utilisation: some GPU has less free memory than total ×
    gpu_memory_utilization (without the flag, the release's default as the memory model takes
    it; with no version, decided only where 0.9 and 0.92 agree); tight: enough, but not by the
    CUDA context vLLM's worker creates before it checks (the memory probe's figure).
  Expert-parallel size = TP × DP with --enable-expert-parallel, else 1.
  The pip CUDA compiler against the pip CUDA runtime headers: CCCL's cuda_toolkit.h refuses
    to compile unless nvcc's major.minor is CUDART_VERSION's (read in nvidia-cuda-cccl
    13.0.85; FlashInfer bundles CCCL for its JIT), so nvidia-cuda-nvcc and
    nvidia-cuda-runtime of different minors fail every JIT build.
  The scheduler's token budget a speculative configuration leaves (facts/spec_budget.py):
    max_num_batched_tokens − drafting slots × max_num_seqs, as the judged release computes it.
  The model's maximum context is derived as vLLM does (the smallest context-length key of the
    config.json that was read, scaled by RoPE scaling that extends it, --hf-overrides applied);
    without the file, ``model.max_position_embeddings``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vllm_doctor.facts.model import Facts, Source

DERIVED_PATHS = (
    "derived.free_memory_below_utilization",
    "derived.free_memory_tight",
    "derived.tp_divides_heads",
    "derived.tp_divides_kv_heads",
    "derived.driver_supports_torch_cuda",
    "derived.driver_supports_pypi_torch_cuda",
    "derived.expert_parallel_size",
    "derived.max_model_len_above_model",
    "derived.moe_intermediate_per_rank",
    "derived.max_model_len",
    "derived.cuda_compiler_matches_headers",
    "derived.spec_drafting_slots",
    "derived.spec_scheduled_tokens",
)


# why a GPU known by its name only decides no free-memory shortage (facts/hardware.py)
ASSUMED_IDLE = (
    "assumed idle (free = total) for a GPU known by its name only; run on the GPU host, "
    "where NVML reads the memory other processes hold"
)


class _Missing(Exception):
    def __init__(self, path: str, reason: str):
        super().__init__(path)
        self.path = path
        self.reason = reason


def _need(facts: Facts, path: str) -> Any:
    fact = facts.get(path)
    if fact is None:
        raise _Missing(path, facts.why_missing(path) or "not collected")
    return fact.value


def _tp(facts: Facts) -> int:
    return int(_need(facts, "serve.tensor_parallel_size") or 1)


def _utilizations(facts: Facts) -> list[tuple[float, str]]:
    """The share of total memory vLLM requests: the flag's; else the release's default, as the
    memory model takes it (0.9 up to 0.19.1, 0.92 from 0.20.0); both when the version is
    unknown."""
    fact = facts.get("serve.gpu_memory_utilization")
    if fact is not None and fact.value is not None:
        return [(float(fact.value), f"gpu_memory_utilization {fact.value}")]
    from vllm_doctor.memory.formula import formula_for
    from vllm_doctor.memory.profile import DEFAULT_UTILIZATIONS

    version = facts.value("release.judged") or facts.value("vllm.version")
    if version:
        util = formula_for(str(version)).default_utilization
        return [(util, f"gpu_memory_utilization {util}: vLLM {version}'s default")]
    return [
        (util, f"gpu_memory_utilization {util}: a vLLM default (the version is unknown)")
        for util in DEFAULT_UTILIZATIONS
    ]


def _compare_versions(a: str, b: str) -> bool:
    from packaging.version import Version

    def major_minor(text: str) -> Version:
        parts = str(text).split(".")
        return Version(".".join(parts[:2]))

    return major_minor(a) >= major_minor(b)


def _major_minor(version: str) -> str:
    """13.2 for 13.2.86 or 13.2 (a version's release, major.minor)."""
    from packaging.version import Version

    release = Version(version).release
    return ".".join(str(part) for part in (*release, 0)[:2])


def _free_pairs(facts: Facts) -> tuple[list[tuple[int, int, int]], bool]:
    """(GPU index or -1, total MiB, free MiB) of every GPU whose memory is known, and whether
    the free figure is assumed (a GPU known by its name only, taken as idle) not measured."""
    devices = facts.value("gpu.devices")
    if (
        isinstance(devices, list)
        and devices
        and all(
            isinstance(d, dict)
            and d.get("memory_total_mib") is not None
            and d.get("memory_free_mib") is not None
            for d in devices
        )
    ):
        return [
            (int(d.get("index", i)), int(d["memory_total_mib"]), int(d["memory_free_mib"]))
            for i, d in enumerate(devices)
        ], False
    total = int(_need(facts, "gpu.memory_total_mib"))
    free = int(_need(facts, "gpu.memory_free_mib"))
    fact = facts.get("gpu.memory_free_mib")
    return [(-1, total, free)], fact is not None and fact.inferred


def _measured_only(holds: bool, assumed: bool) -> bool:
    """An assumed-idle free figure decides "does not apply" only: an idle GPU is the best
    case, so a shortage it shows needs the real figure."""
    if holds and assumed:
        raise _Missing("gpu.memory_free_mib", ASSUMED_IDLE)
    return holds


def _per_utilization(
    facts: Facts, judge: Callable[[float, str], tuple[bool, str]]
) -> tuple[bool, str]:
    """``judge(util, why)`` under the utilization vLLM requests; undecided where the release's
    default decides and the two defaults disagree."""
    answers = [judge(util, uwhy) for util, uwhy in _utilizations(facts)]
    if len({answer for answer, _ in answers}) > 1:
        raise _Missing(
            "vllm.version",
            f"{answers[0][1]}, but {answers[-1][1]}: the release's default decides "
            "(or pass --gpu-memory-utilization)",
        )
    return answers[0]


def _which(index: int) -> str:
    return f"GPU {index}" if index >= 0 else "a GPU"


def _free_below(facts: Facts) -> tuple[bool, str]:
    pairs, assumed = _free_pairs(facts)
    idle = " (assumed idle)" if assumed else ""

    def judge(util: float, uwhy: str) -> tuple[bool, str]:
        short = [(i, t, f) for i, t, f in pairs if f < t * util]
        if _measured_only(bool(short), assumed):
            i, t, f = short[0]
            return True, f"{_which(i)}: {f} MiB free < {t} MiB × {util} ({uwhy})"
        return False, f"every GPU has at least total × {util} free{idle} ({uwhy})"

    return _per_utilization(facts, judge)


def _free_tight(facts: Facts) -> tuple[bool, str]:
    """Free memory at least total × utilization, but not by the CUDA context vLLM's worker
    creates before it checks (``request_memory`` reads cudaMemGetInfo after init_device): the
    doctor reads NVML free memory without a context of its own."""
    from vllm_doctor.memory.formula import cuda_context_gib

    pairs, assumed = _free_pairs(facts)
    context_gib, context_how = cuda_context_gib()
    context = context_gib * 1024
    idle = " (assumed idle)" if assumed else ""

    def judge(util: float, uwhy: str) -> tuple[bool, str]:
        close = [(i, t, f) for i, t, f in pairs if t * util <= f < t * util + context]
        if _measured_only(bool(close), assumed):
            i, t, f = close[0]
            return True, (
                f"{_which(i)}: {f} MiB free, within the CUDA context ({context:.0f} MiB, "
                f"{context_how}) of {t} MiB × {util} ({uwhy})"
            )
        return False, (f"no GPU's free memory{idle} is within the CUDA context of total × {util}")

    return _per_utilization(facts, judge)


def compute_derived(facts: Facts, only: tuple[str, ...] | None = None) -> None:
    """Set (or mark missing) every derived.* fact from the facts collected so far (``only``:
    just these, the others kept as they are)."""
    for path in DERIVED_PATHS if only is None else only:
        facts.values.pop(path, None)
        facts.missing.pop(path, None)

    def attempt(path: str, fn: Any) -> None:
        if only is not None and path not in only:
            return
        try:
            value, how = fn()
        except _Missing as miss:
            facts.mark_missing(path, f"needs {miss.path}: {miss.reason}")
            return
        except (TypeError, ValueError, ZeroDivisionError) as err:
            facts.mark_missing(path, f"could not be computed: {err}")
            return
        facts.set(path, value, Source.DERIVED, how)

    attempt("derived.free_memory_below_utilization", lambda: _free_below(facts))
    attempt("derived.free_memory_tight", lambda: _free_tight(facts))

    def tp_heads() -> tuple[bool, str]:
        heads = int(_need(facts, "model.num_attention_heads"))
        tp = _tp(facts)
        return heads % tp == 0, f"{heads} attention heads, TP {tp}"

    def tp_kv_heads() -> tuple[bool, str]:
        kv = int(_need(facts, "model.num_key_value_heads"))
        tp = _tp(facts)
        return kv % tp == 0 or tp % kv == 0, f"{kv} KV heads, TP {tp}"

    attempt("derived.tp_divides_heads", tp_heads)
    attempt("derived.tp_divides_kv_heads", tp_kv_heads)

    def driver_cuda() -> tuple[bool, str]:
        driver = str(_need(facts, "driver.cuda_version"))
        torch_cuda = str(_need(facts, "torch.cuda_version"))
        return _compare_versions(driver, torch_cuda), (
            f"driver supports CUDA {driver}, torch built with CUDA {torch_cuda}"
        )

    attempt("derived.driver_supports_torch_cuda", driver_cuda)
    if only is None or "derived.driver_supports_pypi_torch_cuda" in only:
        _pypi_torch_cuda(facts)

    def ep_size() -> tuple[int, str]:
        enabled = _need(facts, "serve.enable_expert_parallel")
        if not enabled:
            return 1, "expert parallelism is off"
        tp = _tp(facts)
        dp_fact = facts.get("serve.data_parallel_size")
        dp = int(dp_fact.value or 1) if dp_fact is not None else 1
        return tp * dp, f"TP {tp} × DP {dp} with --enable-expert-parallel"

    attempt("derived.expert_parallel_size", ep_size)

    def above_model() -> tuple[bool, str]:
        from vllm_doctor.facts.context_length import model_max_len

        requested = _need(facts, "serve.max_model_len")
        found = model_max_len(facts)
        if found is None:
            path = "model.max_position_embeddings"
            raise _Missing(path, facts.why_missing(path) or "not collected")
        limit, how = found
        return int(requested) > limit, f"--max-model-len {requested} vs the model's {limit} ({how})"

    attempt("derived.max_model_len_above_model", above_model)

    def effective_max_model_len() -> tuple[int, str]:
        # --max-model-len when given; a known serve line without it takes the model's own
        from vllm_doctor.facts.context_length import model_max_len

        given = facts.get("serve.max_model_len")
        if given is not None and given.value is not None:
            return int(given.value), f"--max-model-len {given.value}"
        reason = facts.why_missing("serve.max_model_len")
        if reason:
            raise _Missing("serve.max_model_len", reason)
        found = model_max_len(facts)
        if found is None:
            path = "model.max_position_embeddings"
            raise _Missing(path, facts.why_missing(path) or "not collected")
        limit, how = found
        return limit, f"no --max-model-len: the model's {limit} ({how})"

    attempt("derived.max_model_len", effective_max_model_len)

    def cuda_compiler_headers() -> tuple[bool, str]:
        # the CUDA 13 pip toolkit: nvcc and the runtime headers are separate wheels that pip
        # resolves independently (torch pins the runtime, nothing pins nvcc)
        nvcc = str(_need(facts, "packages.nvidia-cuda-nvcc"))
        runtime = str(_need(facts, "packages.nvidia-cuda-runtime"))
        same = _major_minor(nvcc) == _major_minor(runtime)
        return same, (
            f"nvidia-cuda-nvcc {nvcc} (compiler {_major_minor(nvcc)}) against "
            f"nvidia-cuda-runtime {runtime} (headers {_major_minor(runtime)})"
        )

    attempt("derived.cuda_compiler_matches_headers", cuda_compiler_headers)

    def moe_per_rank() -> tuple[int, str]:
        # vLLM splits each expert's intermediate size over the TP ranks unless expert
        # parallelism places whole experts (FusedMoE: intermediate_size_per_partition)
        size = int(_need(facts, "model.moe_intermediate_size"))
        if _need(facts, "serve.enable_expert_parallel"):
            return size, f"moe_intermediate_size {size}, whole experts per rank (expert parallel)"
        tp = _tp(facts)
        if size % tp:
            raise ValueError(f"moe_intermediate_size {size} does not split over TP {tp}")
        return size // tp, f"moe_intermediate_size {size} / TP {tp}"

    if "model.moe_intermediate_size" in facts or facts.why_missing("model.moe_intermediate_size"):
        attempt("derived.moe_intermediate_per_rank", moe_per_rank)

    from vllm_doctor.facts import spec_budget

    def speculative(fn: Callable[[Facts], tuple[int, str]]) -> Callable[[], tuple[int, str]]:
        def run() -> tuple[int, str]:
            try:
                return fn(facts)
            except spec_budget.SpecMissing as miss:
                raise _Missing(miss.path, miss.reason) from None

        return run

    # only for a serve line with a speculative configuration: without one there is no budget
    # to take from (absent, not undecided)
    if facts.value("serve.speculative_config") or facts.why_missing("serve.speculative_config"):
        attempt("derived.spec_drafting_slots", speculative(spec_budget.drafting_slots))
        attempt("derived.spec_scheduled_tokens", speculative(spec_budget.scheduled_tokens))


def _pypi_torch_cuda(facts: Facts) -> None:
    """``derived.driver_supports_pypi_torch_cuda``: where torch's CUDA build is not known but
    its version carries no ``+cuXYZ`` label, as the PyPI wheel's does (download.pytorch.org's
    builds are labelled), whether the driver's CUDA major reaches the CUDA the PyPI wheel of
    that version requires (knowledge/data/cuda_compat.json, read in the wheels' Requires-Dist).
    A conda or source build of the same number may be another CUDA: a warning's fact, never an
    error's. Absent where torch's own CUDA is known (derived.driver_supports_torch_cuda) or
    the version is labelled or a pre-release (not a PyPI wheel)."""
    from packaging.version import InvalidVersion, Version

    from vllm_doctor.facts.hardware import _compat

    path = "derived.driver_supports_pypi_torch_cuda"
    if facts.get("torch.cuda_version") is not None:
        return
    torch = facts.get("torch.version")
    if torch is None:
        facts.mark_missing(
            path, f"needs torch.version: {facts.why_missing('torch.version') or 'not collected'}"
        )
        return
    try:
        version = Version(str(torch.value))
    except InvalidVersion:
        return
    if version.local or version.is_prerelease or version.is_devrelease:
        return
    row = _compat()["torch_cuda"].get(version.public)
    if row is None:
        facts.mark_missing(
            path,
            f"torch {version.public} is not in the CUDA build table "
            "(knowledge/data/cuda_compat.json)",
        )
        return
    driver = facts.get("driver.cuda_version")
    if driver is None:
        reason = facts.why_missing("driver.cuda_version") or "not collected"
        facts.mark_missing(path, f"needs driver.cuda_version: {reason}")
        return
    try:
        supports = Version(str(driver.value)).major >= Version(str(row["cuda"])).major
    except InvalidVersion:
        facts.mark_missing(path, f"the driver's CUDA version {driver.value!r} is not a version")
        return
    facts.set(
        path,
        supports,
        Source.DERIVED,
        f"torch {torch.value} ({torch.describe_source()}) carries no +cuXYZ label, as the PyPI "
        f"wheel, which requires {row['requirement']} (CUDA {row['cuda']}); the driver supports "
        f"CUDA {driver.value}",
    )
