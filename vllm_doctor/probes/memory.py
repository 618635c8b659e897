"""memory: the GPU memory vLLM's start-up subtracts that the model's config cannot give.

vLLM sizes its KV cache from what it measures at start-up (``vllm/utils/mem_utils.py``,
``MemorySnapshot`` and ``memory_profiling``; ``gpu_worker.determine_available_memory``): the
GPU's total as ``cudaMemGetInfo`` reports it, memory no torch tensor holds (the CUDA context,
cuBLAS handles, NCCL buffers), the caching allocator's peak during a dummy forward at
``--max-num-batched-tokens`` (the activation peak), and since 0.21 the CUDA-graph memory of its
capture sizes (first capture + per-graph × the rest, ``profile_cudagraph_memory``). This probe
measures each of those terms on this GPU and torch, one at a time, in a fresh process (the
part ``fresh``) so that no other probe's allocations are in them; each rank of the worker
group measures what one more NCCL communicator of the group's ranks costs it.

Every figure is taken per process where NVML gives this process's own device memory (as
``nvidia-smi`` lists it), so another process on the same GPU does not move it; where NVML
cannot say, from ``cudaMemGetInfo`` like vLLM (then anything else on the GPU moves it, and
the figure says so). What each figure stands for is in its ``what``; ``depends`` says whether
it is a property of the hardware and driver or of torch's own code.

The synthetic decoder stands for a dense Llama-like model (the model config's sizes when
given, else Llama-3.1-8B's): RMSNorm, QKV, FlashAttention through SDPA, output projection,
gated MLP; eager, without torch.compile, MoE, LoRA or vision encoders.

The pure arithmetic (capture sizes, fits, the knowledge-table entry) needs no torch and is
tested on the CPU; the measurements need a CUDA GPU.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Callable
from typing import Any, TypedDict

from vllm_doctor.probes._common import GIB, Ctx, err_text, result

MIB = 1024**2

# Llama-3.1-8B's config.json (meta-llama/Llama-3.1-8B): the sizes when no model config is given.
DEFAULT_MODEL = {
    "vocab_size": 128256,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
}
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
DEFAULT_MAX_NUM_SEQS = 256
ACTIVATION_LAYERS = 2  # activations are freed layer by layer: two layers show the peak
GRAPH_KV_CONTEXT = 256  # tokens of KV cache each sequence of a captured decode step reads
RMS_EPS = 1e-5

HARDWARE, TORCH = "hardware", "torch"


# -- pure arithmetic (no torch) ------------------------------------------------------------------
def capture_sizes(
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    ceiling: int = 512,
) -> list[int]:
    """vLLM's default CUDA-graph capture sizes without speculative decoding (0.33.0,
    ``VllmConfig._set_cudagraph_sizes``): 1, 2, 4, multiples of 8 below 256, multiples of 16
    up to min(2 × max_num_seqs, 512 (1024 on data-centre Blackwell), max_num_batched_tokens),
    plus max_num_batched_tokens and max_num_seqs where they fit."""
    top = min(max_num_seqs * 2, ceiling, max_num_batched_tokens)
    sizes = [n for n in (1, 2, 4) if n <= top]
    if top >= 8:
        sizes += list(range(8, min(top + 1, 256), 8))
    if top >= 256:
        sizes += list(range(256, top + 1, 16))
    if max_num_batched_tokens <= top:
        sizes.append(max_num_batched_tokens)
    if max_num_seqs <= top:
        sizes.append(max_num_seqs)
    return sorted(set(sizes))


def vllm_graph_estimate(samples: list[int], count: int) -> int:
    """vLLM's CUDA-graph estimate from the free-memory drops of the first captures (largest
    size first): the first capture + max(the second, 1 MiB) × (count − 1)."""
    if not samples or count <= 0:
        return 0
    per_graph = max(samples[1] if len(samples) > 1 else 0, MIB)
    return samples[0] + per_graph * (count - 1)


def linear_fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of y over x; (y, 0) for a single point."""
    if not points:
        return 0.0, 0.0
    if len(points) == 1:
        return points[0][1], 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return my - slope * mx, slope


def model_shape(params: dict[str, Any]) -> tuple[dict[str, int], str]:
    """The decoder's sizes: the model config's where given (``params["model"]``), the rest
    Llama-3.1-8B's; the intermediate size, which the doctor's facts do not carry, scales with
    the hidden size as in Llama-3.1-8B (3.5 ×, rounded to 256)."""
    given = {
        k: v
        for k, v in (params.get("model") or {}).items()
        if k in DEFAULT_MODEL and isinstance(v, int) and not isinstance(v, bool) and v > 0
    }
    shape = dict(DEFAULT_MODEL, **given)
    if "hidden_size" in given:
        shape["intermediate_size"] = max(256, round(shape["hidden_size"] * 3.5 / 256) * 256)
        if "head_dim" not in given:
            shape["head_dim"] = shape["hidden_size"] // shape["num_attention_heads"]
    if shape["num_attention_heads"] % shape["num_key_value_heads"]:
        shape["num_key_value_heads"] = shape["num_attention_heads"]
    source = "model config" if given else "Llama-3.1-8B (default)"
    return shape, source


def figure(
    name: str, nbytes: int | float | None, what: str, depends: str, **extra: Any
) -> dict[str, Any]:
    """One measured figure as the result carries it (GiB and bytes)."""
    out: dict[str, Any] = {"name": name, "depends": depends, "what": what}
    if nbytes is not None:
        out["bytes"] = int(nbytes)
        out["gib"] = round(nbytes / GIB, 4)
    out.update(extra)
    return out


def table_entry(report: dict[str, Any]) -> dict[str, Any]:
    """The knowledge table's entry for one GPU (``knowledge/data/memory_probe.json``) from
    ``vllm-doctor probe memory --format json``'s output."""
    res = next(r for r in report["results"] if r["name"] == "memory")
    fresh = res["metrics"].get("fresh") or {}
    figures = {f["name"]: f for f in fresh.get("figures", [])}
    env = fresh.get("environment") or {}
    nccl: dict[str, Any] = {}
    for rank in res.get("ranks", []):
        for f in (rank.get("metrics") or {}).get("figures", []):
            if f["name"] == "nccl_communicator":
                nccl.setdefault(str(f["world_size"]), f["gib"])

    def gib(name: str) -> float | None:
        return figures[name]["gib"] if name in figures else None

    act = figures.get("activation_peak") or {}
    graphs = figures.get("cuda_graph_estimate") or {}
    return {
        "gpu": env.get("gpu"),
        "torch": env.get("torch"),
        "cuda": env.get("cuda"),
        "driver": env.get("driver"),
        "accounting": env.get("accounting"),
        "tp_measured": sorted(int(w) for w in nccl),
        "total_gib": gib("total_memory"),
        "nvml_total_gib": gib("nvml_total_memory"),
        "cuda_context_gib": gib("cuda_context"),
        "cublas_non_torch_gib": gib("cublas_handles"),
        "cublas_torch_gib": gib("cublas_workspace"),
        "nccl_communicator_gib": nccl,
        "allocator_slack_gib": gib("allocator_slack"),
        "activation": {
            k: act.get(k)
            for k in (
                "model",
                "max_num_batched_tokens",
                "max_num_seqs",
                "points",
                "forward_intercept_gib",
                "forward_gib_per_1k_tokens",
                "sampler_bytes_per_seq_vocab",
            )
        },
        "cuda_graph": {
            "model": graphs.get("model"),
            "sizes": graphs.get("sizes"),
            "vllm_estimate_gib": gib("cuda_graph_estimate"),
            "measured_gib": gib("cuda_graph_memory"),
            **{
                mode: {
                    k: v
                    for k, v in (graphs.get(mode) or {}).items()
                    if k not in ("per_capture_mib", "free_drop_mib")
                }
                for mode in ("full", "piecewise")
            },
        },
    }


# -- measuring (torch, CUDA) ----------------------------------------------------------------------


class Snap(TypedDict):
    """One look at the GPU's memory, in bytes; ``process`` is this process's use as NVML
    reports it, None where NVML cannot tell."""

    free: int
    total: int
    used: int
    reserved: int
    allocated: int
    peak: int
    process: int | None


class Meter:
    """This process's device memory: NVML's per-process figure where it answers (another process
    on the GPU does not move it), else total − free from cudaMemGetInfo like vLLM; and the caching
    allocator's counters."""

    def __init__(self, device):
        import torch

        self.torch = torch
        self.device = device
        self.handle = None
        self.nvml_note = ""
        try:
            import pynvml

            pynvml.nvmlInit()
            self.pynvml = pynvml
            props = torch.cuda.get_device_properties(device)
            uuid = str(getattr(props, "uuid", "") or "")
            try:
                self.handle = pynvml.nvmlDeviceGetHandleByUUID(
                    uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
                )
            except Exception:
                bus = (
                    f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
                )
                self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus)
        except Exception as err:
            self.nvml_note = f"NVML unavailable ({err_text(err, 120)})"

    def process_bytes(self) -> int | None:
        if self.handle is None:
            return None
        try:
            procs = self.pynvml.nvmlDeviceGetComputeRunningProcesses(self.handle)
        except Exception as err:
            self.nvml_note = f"NVML per-process memory unavailable ({err_text(err, 120)})"
            return None
        mine = [
            p.usedGpuMemory for p in procs if p.pid == os.getpid() and p.usedGpuMemory is not None
        ]
        if not mine:
            self.nvml_note = "NVML lists no memory for this process (a PID namespace?)"
            return None
        return int(sum(mine))

    def nvml_total(self) -> int | None:
        if self.handle is None:
            return None
        try:
            return int(self.pynvml.nvmlDeviceGetMemoryInfo(self.handle).total)
        except Exception:
            return None

    def snap(self) -> Snap:
        torch = self.torch
        torch.cuda.synchronize(self.device)
        free, total = torch.cuda.mem_get_info(self.device)
        stats = torch.cuda.memory_stats(self.device)
        return {
            "free": free,
            "total": total,
            "used": total - free,
            "reserved": torch.cuda.memory_reserved(self.device),
            "allocated": torch.cuda.memory_allocated(self.device),
            "peak": stats.get("allocated_bytes.all.peak", 0),
            "process": self.process_bytes(),
        }

    @staticmethod
    def mine(s: Snap) -> int:
        """This process's device memory (per process where NVML says, else device-wide)."""
        return s["process"] if s["process"] is not None else s["used"]

    def non_torch(self, s: Snap) -> int:
        return self.mine(s) - s["reserved"]

    def settle(self) -> Snap:
        """A snapshot after garbage collection and emptying the cache, as vLLM takes them."""
        gc.collect()
        self.torch.cuda.empty_cache()
        return self.snap()


def _attention(torch, q, k, v, causal: bool):
    """SDPA restricted to FlashAttention (never the math kernel, whose T × T scores would
    inflate the peak); grouped KV heads natively where this torch allows, else repeated."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        if q.shape[1] != k.shape[1]:
            try:
                return F.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, enable_gqa=True
                ), "flash, grouped KV"
            except (RuntimeError, TypeError):
                rep = q.shape[1] // k.shape[1]
                k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal), "flash, KV heads repeated"


class Decoder:
    """One Llama-like decoder layer's weights (bf16), reused for every layer of the stack: the
    kernels and the activations are a real layer's, the weights' memory is one layer's."""

    def __init__(self, torch, shape: dict[str, int], device, with_lm_head: bool):
        h, i = shape["hidden_size"], shape["intermediate_size"]
        self.hq, self.hkv, self.d = (
            shape["num_attention_heads"],
            shape["num_key_value_heads"],
            shape["head_dim"],
        )
        self.h, self.i = h, i
        dt = torch.bfloat16
        gen = torch.Generator(device=device).manual_seed(5)

        def w(*dims):
            return torch.randn(*dims, generator=gen, device=device, dtype=dt) * 0.02

        self.w_qkv = w((self.hq + 2 * self.hkv) * self.d, h)
        self.w_o = w(h, self.hq * self.d)
        self.w_gu = w(2 * i, h)
        self.w_down = w(h, i)
        self.norm = torch.ones(h, device=device, dtype=dt)
        self.lm_head = w(shape["vocab_size"], h) if with_lm_head else None
        self.torch = torch
        self.attention = ""

    def mlp_part(self, residual, attn_out):
        """o_proj, residual add, norm, gated MLP, residual add: the ops between two attentions."""
        F = self.torch.nn.functional
        residual = residual + F.linear(attn_out, self.w_o)
        x = F.rms_norm(residual, (self.h,), self.norm, RMS_EPS)
        gu = F.linear(x, self.w_gu)
        del x
        gate, up = gu[:, : self.i], gu[:, self.i :]
        F.silu(gate, inplace=True)  # vLLM's fused silu_and_mul writes one [T, I] output
        act = gate * up
        del gu, gate, up
        return residual + F.linear(act, self.w_down)

    def qkv(self, residual):
        F = self.torch.nn.functional
        x = F.rms_norm(residual, (self.h,), self.norm, RMS_EPS)
        return F.linear(x, self.w_qkv)

    def prefill_layer(self, residual):
        """One layer over T tokens of one causal sequence (FlashAttention's memory is O(T))."""
        t = residual.shape[0]
        qkv = self.qkv(residual)
        q, k, v = qkv.split([self.hq * self.d, self.hkv * self.d, self.hkv * self.d], dim=-1)
        q = q.view(1, t, self.hq, self.d).transpose(1, 2)
        k = k.view(1, t, self.hkv, self.d).transpose(1, 2)
        v = v.view(1, t, self.hkv, self.d).transpose(1, 2)
        out, self.attention = _attention(self.torch, q, k, v, causal=True)
        del qkv, q, k, v
        attn = out.transpose(1, 2).reshape(t, self.hq * self.d)
        del out
        return self.mlp_part(residual, attn)

    def decode_attention(self, qkv, k_cache, v_cache):
        b = qkv.shape[0]
        q = qkv[:, : self.hq * self.d].view(b, self.hq, 1, self.d)
        out, self.attention = _attention(self.torch, q, k_cache[:b], v_cache[:b], causal=False)
        return out.reshape(b, self.hq * self.d)

    def decode_step(self, x, layers: int, k_cache, v_cache):
        """A decode step of ``layers`` layers, one token per sequence (a FULL graph's work)."""
        residual = x
        for _ in range(layers):
            attn = self.decode_attention(self.qkv(residual), k_cache, v_cache)
            residual = self.mlp_part(residual, attn)
        return residual


def _activation_peak(
    ctx: Ctx, meter: Meter, shape: dict[str, int], tokens: list[int], max_num_seqs: int
) -> dict[str, Any]:
    """The allocator's peak above the weights in one forward of the synthetic decoder at each
    token count, and, measured apart, in the logits of the last token of each sequence and a
    sampler-like pass over them: vLLM's profile run does both, one after the other."""
    torch = meter.torch
    dev = meter.device
    dec = Decoder(torch, shape, dev, with_lm_head=True)
    vocab = shape["vocab_size"]
    points = []
    for t in tokens:
        ctx.progress(f"activation peak: forward of {t} tokens")
        base = meter.settle()
        torch.cuda.reset_peak_memory_stats(dev)
        with torch.inference_mode():
            ids = torch.randint(vocab, (t,), device=dev)
            residual = torch.nn.functional.embedding(ids, dec.lm_head)
            for _ in range(ACTIVATION_LAYERS):
                residual = dec.prefill_layer(residual)
            torch.cuda.synchronize(dev)
            forward = torch.cuda.max_memory_allocated(dev) - base["allocated"]
            # the sampled positions: the last token of each of min(max_num_seqs, t) sequences
            seqs = min(max_num_seqs, t)
            last = torch.linspace(t / seqs - 1, t - 1, seqs, device=dev).long()
            hidden = torch.nn.functional.rms_norm(
                residual[last], (shape["hidden_size"],), dec.norm, RMS_EPS
            )
            del residual, ids
            torch.cuda.synchronize(dev)
            torch.cuda.reset_peak_memory_stats(dev)
            logits = torch.nn.functional.linear(hidden, dec.lm_head).float()
            probs = logits.softmax(
                dim=-1
            )  # top-k/top-p: sort and cumulative sum over the vocabulary
            ordered, order = probs.sort(dim=-1, descending=True)
            keep = ordered.cumsum(dim=-1) <= 0.9
            del hidden, logits, probs, ordered, order, keep
            torch.cuda.synchronize(dev)
            sampler = torch.cuda.max_memory_allocated(dev) - base["allocated"]
        points.append(
            {
                "tokens": t,
                "sequences": seqs,
                "peak_gib": round(max(forward, sampler) / GIB, 4),
                "forward_gib": round(forward / GIB, 4),
                "sampler_gib": round(sampler / GIB, 4),
                "sampler_bytes_per_seq_vocab": round(sampler / (seqs * vocab), 2),
            }
        )
    weights = sum(
        x.numel() * x.element_size()
        for x in (dec.w_qkv, dec.w_o, dec.w_gu, dec.w_down, dec.norm, dec.lm_head)
        if x is not None
    )
    attention = dec.attention
    del dec
    intercept, slope = linear_fit([(p["tokens"] / 1000, p["forward_gib"]) for p in points])
    return {
        "points": points,
        "forward_intercept_gib": round(intercept, 4),
        "forward_gib_per_1k_tokens": round(slope, 4),
        "sampler_bytes_per_seq_vocab": statistics.median(
            p["sampler_bytes_per_seq_vocab"] for p in points
        ),
        "weights_gib": round(weights / GIB, 4),
        "attention": attention,
    }


def _capture(torch, fn: Callable[[], Any], pool, stream):
    """Warm up once eagerly (cuBLAS picks its kernels), then capture into the shared pool."""
    with torch.cuda.stream(stream):
        fn()
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool, stream=stream):
        out = fn()
    return graph, out


def _graphs(
    ctx: Ctx, meter: Meter, shape: dict[str, int], sizes: list[int], max_num_seqs: int
) -> dict[str, Any]:
    """Capture the synthetic decoder's decode step into one pool, largest size first, as vLLM's
    default FULL_AND_PIECEWISE does: a FULL graph of every layer for each size up to max_num_seqs
    (uniform decode), and for every size the PIECEWISE split (a graph per stretch between two
    attentions, attention left eager). Only the graphs and the last outputs stay referenced, so
    the pool reuses what the pieces no longer need (vLLM keeps weak references to them). Each
    capture's cost is this process's memory growth (NVML), which is cudaMemGetInfo's drop, the
    figure vLLM reads, when nothing else runs on the GPU."""
    torch = meter.torch
    dev = meter.device
    layers = shape["num_hidden_layers"]
    dec = Decoder(torch, shape, dev, with_lm_head=False)
    top = max(sizes)
    kv_shape = (top, dec.hkv, GRAPH_KV_CONTEXT, dec.d)
    k_cache = torch.randn(kv_shape, device=dev, dtype=torch.bfloat16)
    v_cache = torch.randn(kv_shape, device=dev, dtype=torch.bfloat16)
    inputs = torch.randn(top, shape["hidden_size"], device=dev, dtype=torch.bfloat16)
    stream = torch.cuda.Stream(device=dev)
    pool = torch.cuda.graph_pool_handle()
    kept: list[Any] = []  # the graphs and each one's final output stay alive, as vLLM keeps them

    def run_mode(
        label: str, order: list[int], capture_one: Callable[[int], list[Any]]
    ) -> dict[str, Any]:
        start = meter.settle()
        samples, drops, t0 = [], [], time.perf_counter()
        for n, b in enumerate(order):
            if n % 8 == 0:
                ctx.progress(f"CUDA graphs ({label}): capturing size {b} ({n + 1}/{len(order)})")
            before = meter.snap()
            kept.extend(capture_one(b))
            after = meter.snap()
            samples.append(meter.mine(after) - meter.mine(before))
            drops.append(before["free"] - after["free"])
        end = meter.snap()
        return {
            "sizes": len(order),
            "largest": order[0],
            "seconds": round(time.perf_counter() - t0, 2),
            "graphs_per_size": 1 if label == "FULL" else layers + 1,
            "first_capture_gib": round(samples[0] / GIB, 4),
            "second_capture_gib": round(samples[1] / GIB, 4) if len(samples) > 1 else None,
            "vllm_estimate_gib": round(vllm_graph_estimate(samples, len(order)) / GIB, 4),
            "measured_gib": round((meter.mine(end) - meter.mine(start)) / GIB, 4),
            "pool_gib": round((end["reserved"] - start["reserved"]) / GIB, 4),
            "non_torch_gib": round((meter.non_torch(end) - meter.non_torch(start)) / GIB, 4),
            "per_capture_mib": [round(d / MIB, 2) for d in samples],
            "free_drop_mib": [round(d / MIB, 2) for d in drops],
        }

    def full(b: int) -> list[Any]:
        x = inputs[:b]
        return list(
            _capture(torch, lambda: dec.decode_step(x, layers, k_cache, v_cache), pool, stream)
        )

    def pieces(b: int) -> list[Any]:
        """layers + 1 graphs: the QKV of layer 0, then each stretch from one attention's output
        to the next layer's QKV; the attention runs eagerly between them."""
        graphs: list[Any] = []
        residual = inputs[:b]
        g, qkv = _capture(torch, lambda: dec.qkv(residual), pool, stream)
        graphs.append(g)
        for _ in range(layers):
            attn = dec.decode_attention(qkv, k_cache, v_cache)

            def stretch(r=residual, a=attn):
                nxt = dec.mlp_part(r, a)
                return nxt, dec.qkv(nxt)

            g, (residual, qkv) = _capture(torch, stretch, pool, stream)
            graphs.append(g)
        return [*graphs, residual, qkv]

    with torch.inference_mode():
        order = sorted(sizes, reverse=True)
        full_mode = run_mode("FULL", [b for b in order if b <= max_num_seqs], full)
        piece_mode = run_mode("PIECEWISE", order, pieces)
    attention = dec.attention
    kept.clear()  # the graphs and their pool go; the weights and inputs go with this frame
    # FULL and PIECEWISE share the pool and never replay at once: vLLM overlays their first
    # captures and adds the per-graph parts (profile_cudagraph_memory).
    estimate = max(full_mode["first_capture_gib"], piece_mode["first_capture_gib"]) + sum(
        m["vllm_estimate_gib"] - m["first_capture_gib"] for m in (full_mode, piece_mode)
    )
    return {
        "full": full_mode,
        "piecewise": piece_mode,
        "attention": attention,
        "vllm_estimate_gib": round(estimate, 4),
        "measured_gib": round(full_mode["measured_gib"] + piece_mode["measured_gib"], 4),
    }


def part_fresh(ctx: Ctx) -> dict:
    """Every term but NCCL, in this fresh process: context, cuBLAS, activation peak, CUDA
    graphs, and what the caching allocator keeps beyond its tensors."""
    import torch

    dev = ctx.device
    params = ctx.params
    shape, source = model_shape(params)
    tokens_max = int(params.get("max_num_batched_tokens") or DEFAULT_MAX_NUM_BATCHED_TOKENS)
    max_num_seqs = int(params.get("max_num_seqs") or DEFAULT_MAX_NUM_SEQS)
    sizes = [int(s) for s in params.get("capture_sizes") or capture_sizes(max_num_seqs, tokens_max)]
    tokens = sorted(
        {max(256, tokens_max // 4), max(256, tokens_max // 2), tokens_max, 2 * tokens_max}
    )
    figures: list[dict[str, Any]] = []
    metrics: dict[str, Any] = {"figures": figures, "model": shape, "model_from": source}

    ctx.progress("CUDA context")
    torch.cuda.set_device(dev)
    torch.cuda.init()
    meter = Meter(dev)
    s_ctx = meter.snap()  # the context exists now (mem_get_info needs it); nothing allocated yet
    props = torch.cuda.get_device_properties(dev)
    driver = None
    if meter.handle is not None:
        try:
            driver = meter.pynvml.nvmlSystemGetDriverVersion()
            driver = driver.decode() if isinstance(driver, bytes) else driver
        except Exception:
            pass
    accounting = (
        "per process (NVML)"
        if s_ctx["process"] is not None
        else f"device-wide (cudaMemGetInfo; {meter.nvml_note or 'NVML gave nothing'}): anything "
        f"else on this GPU moves these figures"
    )
    metrics["environment"] = {
        "gpu": props.name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "driver": driver,
        "accounting": accounting,
        "used_by_others_at_start_gib": round((s_ctx["used"] - meter.mine(s_ctx)) / GIB, 4)
        if s_ctx["process"] is not None
        else None,
    }
    figures.append(
        figure(
            "total_memory",
            s_ctx["total"],
            "the GPU's total as cudaMemGetInfo reports it: "
            "vLLM's total_gpu_memory, which gpu_memory_utilization multiplies",
            HARDWARE,
        )
    )
    nvml_total = meter.nvml_total()
    if nvml_total is not None:
        figures.append(
            figure(
                "nvml_total_memory",
                nvml_total,
                "the total NVML reports (nvidia-smi's memory.total)",
                HARDWARE,
            )
        )
    figures.append(
        figure(
            "cuda_context",
            meter.non_torch(s_ctx),
            "this process's device memory once "
            "the CUDA context exists, before any allocation: context, kernels loaded, "
            "driver state",
            HARDWARE,
        )
    )

    ctx.progress("cuBLAS and cuBLASLt handles")
    x = torch.ones(16, 16, dtype=torch.bfloat16, device=dev)
    torch.mm(x, x)  # cuBLAS
    torch.nn.functional.linear(x, x, x[0])  # cuBLASLt (a bias)
    del x
    s_blas = meter.settle()
    figures.append(
        figure(
            "cublas_handles",
            meter.non_torch(s_blas) - meter.non_torch(s_ctx),
            "device memory outside torch's allocator that the first bf16 GEMMs add: the "
            "cuBLAS and cuBLASLt handles and the kernel modules CUDA loads lazily for them "
            "(vLLM 0.33 makes them before its baseline snapshot)",
            TORCH,
        )
    )
    figures.append(
        figure(
            "cublas_workspace",
            s_blas["allocated"] - s_ctx["allocated"],
            "the cuBLAS workspaces torch holds in its own allocator after that GEMM "
            "(counted as torch memory, never freed)",
            TORCH,
        )
    )

    try:
        activation = _activation_peak(ctx, meter, shape, tokens, max_num_seqs)
        at = next(p for p in activation["points"] if p["tokens"] == tokens_max)
        figures.append(
            figure(
                "activation_peak",
                at["peak_gib"] * GIB,
                f"the caching allocator's peak above the weights in an eager forward of {tokens_max} tokens "
                f"through a dense Llama-like decoder layer (FlashAttention), or in the logits of "
                f"{at['sequences']} sequences and a top-p-like sort, whichever is higher: stands for vLLM's "
                f"'PyTorch activation peak memory' of a dense model without torch.compile",
                TORCH,
                model=source,
                max_num_batched_tokens=tokens_max,
                max_num_seqs=max_num_seqs,
                **activation,
            )
        )
    except Exception as err:
        metrics["activation_error"] = err_text(err)
        if "CUDA error" in str(err):
            raise
    s_act = meter.settle()
    figures.append(
        figure(
            "allocator_slack",
            s_act["reserved"] - s_act["allocated"],
            "what the caching allocator still reserves beyond its live tensors after the "
            "forward and empty_cache (fragmentation vLLM counts as consumed)",
            TORCH,
        )
    )

    try:
        graphs = _graphs(ctx, meter, shape, sizes, max_num_seqs)
        full_m, piece_m = graphs["full"], graphs["piecewise"]
        said = (
            f"the {len(sizes)} default capture sizes up to {max(sizes)} (PIECEWISE, "
            f"{piece_m['graphs_per_size']} graphs each) and the {full_m['sizes']} up to max_num_seqs "
            f"(FULL), captured from a {shape['num_hidden_layers']}-layer synthetic decode step (one "
            f"layer's weights reused) into one pool, largest first"
        )
        extra = dict(
            model=source, sizes=sizes, full=full_m, piecewise=piece_m, attention=graphs["attention"]
        )
        figures.append(
            figure(
                "cuda_graph_estimate",
                graphs["vllm_estimate_gib"] * GIB,
                f"vLLM's CUDA-graph estimate (per mode: first capture + second × the rest; "
                f"the first captures overlaid) from {said}",
                HARDWARE,
                **extra,
            )
        )
        figures.append(
            figure(
                "cuda_graph_memory",
                graphs["measured_gib"] * GIB,
                f"what capturing all of them took (this process's growth: pool and graph "
                f"objects) for {said}",
                HARDWARE,
            )
        )
    except Exception as err:
        metrics["cuda_graph_error"] = err_text(err)
        if "CUDA error" in str(err):
            raise
    missing = [k for k in ("activation_error", "cuda_graph_error") if k in metrics]
    status = "warn" if missing else "pass"
    shown = {f["name"]: f["gib"] for f in figures if "gib" in f}
    reason = ", ".join(
        f"{k} {v:.3g} GiB"
        for k, v in shown.items()
        if k not in ("total_memory", "nvml_total_memory")
    )
    if missing:
        reason += "; not measured: " + ", ".join(f"{k}: {metrics[k]}" for k in missing)
    return result(status, reason, metrics)


def run(ctx: Ctx) -> dict:
    """On each rank: what one more NCCL communicator of the group's ranks costs this process (its
    buffers, proxy state and channels), as vLLM creates one per process group it forms."""
    import torch
    import torch.distributed as dist

    dev = ctx.device
    meter = Meter(dev)
    world = ctx.world
    before = meter.settle()
    ctx.progress(f"NCCL: a new communicator of {world} rank(s) and its first all-reduce")
    group = dist.new_group(list(range(world)), backend="nccl")
    dist.barrier(group=group, device_ids=[dev.index])  # the communicator exists after this
    created = meter.settle()
    buf = torch.ones(1 << 20, device=dev)
    dist.all_reduce(buf, group=group)
    torch.cuda.synchronize(dev)
    exact = bool(torch.all(buf == world).item())
    del buf
    after = meter.settle()
    dist.destroy_process_group(group)
    nccl_env = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    fig = figure(
        "nccl_communicator",
        meter.non_torch(after) - meter.non_torch(before),
        f"device memory outside torch's allocator that one NCCL communicator of world size {world} "
        f"took on this rank at creation and its first all-reduce"
        + (" (world size 1: no peer buffers)" if world == 1 else ""),
        HARDWARE,
        world_size=world,
        allreduce_exact=exact,
        at_creation_gib=round((meter.non_torch(created) - meter.non_torch(before)) / GIB, 4),
        accounting="per process (NVML)"
        if after["process"] is not None
        else "device-wide (cudaMemGetInfo)",
    )
    metrics = {"figures": [fig], "nccl_env": nccl_env}
    status = "pass" if exact else "fail"
    reason = (
        f"the figures below: one NCCL communicator on each of the {world} rank(s), the other "
        f"terms in a fresh process on the first GPU"
    )
    if not exact:
        reason += "; its all-reduce gave a wrong sum"
    return result(status, reason, metrics)
