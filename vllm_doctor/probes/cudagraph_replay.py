"""cudagraph-replay: CUDA graphs over an all-gathered LM-head weight (Gemma 4 MTP, vLLM PR 43909).

At TP > 1, Gemma 4's MTP drafter captures CUDA graphs for its centroid top-k that read an
all-gathered LM-head weight. The bug: the gathered weight was a temporary, freed after
capture, so replay read freed memory (an illegal memory access on TP1). The fix keeps the
gathered weight alive on the model (``_stable_full_lm_head_weight``).

* stable pattern (the fix): the gathered weight kept alive and contiguous; the captured
  logits + top-k must replay identical to eager execution, for fresh inputs each time;
* NCCL in a graph: the all-gather itself captured and replayed, against an eager all-gather;
* transient pattern (the bug), in its own child with the caching allocator off
  (``PYTORCH_NO_CUDA_MEMORY_CACHING=1``) so that freed memory really goes back to the driver:
  capture over the weight, free it, replay; the outcome (illegal memory access, wrong values,
  or nothing visible) is recorded. The gather there is a single-GPU concatenation of the
  shards: what matters is the lifetime of the buffer the graph reads, not how it was filled.
"""

from __future__ import annotations

import os

from vllm_doctor.probes._common import Ctx, err_text, max_abs_err, result, sync, time_op

DEFAULT_VOCAB = 262144
DEFAULT_HIDDEN = 2816
BATCH = 4  # a CUDA-graph batch size
TOPK = 8


def _sizes(ctx: Ctx) -> tuple[int, int, str]:
    return ctx.vocab_and_hidden(DEFAULT_VOCAB, DEFAULT_HIDDEN)


def prepare(ctx: Ctx) -> dict:
    """The LM-head weight and this rank's shard (no communicator needed)."""
    import torch

    dev = ctx.device
    tp, rank = ctx.world, ctx.rank
    vocab, hidden, src = _sizes(ctx)
    rows = -(-vocab // tp)
    padded = rows * tp
    gen = torch.Generator(device=dev).manual_seed(11)
    full = torch.randn(padded, hidden, generator=gen, device=dev, dtype=torch.bfloat16).mul_(0.02)
    shard = full[rank * rows : (rank + 1) * rows].contiguous()
    metrics = {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "sizes_from": src,
        "tp": tp,
        "graph_batch": BATCH,
        "topk": TOPK,
    }
    return {
        "full": full,
        "shard": shard,
        "gen": gen,
        "rows": rows,
        "padded": padded,
        "hidden": hidden,
        "metrics": metrics,
    }


def run(ctx: Ctx) -> dict:
    import torch
    import torch.distributed as dist

    state = ctx.take_prepared() or prepare(ctx)
    dev = ctx.device
    tp, rank = ctx.world, ctx.rank
    dtype = torch.bfloat16
    full, shard, gen = state["full"], state["shard"], state["gen"]
    rows, padded, hidden = state["rows"], state["padded"], state["hidden"]
    metrics: dict = state["metrics"]

    # Stable pattern: gather once, keep the weight alive and contiguous.
    ctx.progress("stable pattern: capture logits + top-k over the kept all-gathered weight")
    stable_weight = torch.empty(padded, hidden, device=dev, dtype=dtype)
    dist.all_gather_into_tensor(stable_weight, shard)
    sync(dev)
    metrics["gathered_weight_exact"] = bool(torch.equal(stable_weight, full))
    metrics["gathered_weight_contiguous"] = stable_weight.is_contiguous()
    static_x = torch.randn(BATCH, hidden, generator=gen, device=dev).to(dtype)

    def step(x):
        logits = x @ stable_weight.t()
        return torch.topk(logits.float(), TOPK, dim=-1)

    stream = torch.cuda.Stream(device=dev)
    stream.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(stream):
        for _ in range(2):
            step(static_x)
    torch.cuda.current_stream(dev).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_vals, static_idx = step(static_x)
    identical, worst = 0, 0.0
    trials = 5
    for _ in range(trials):
        static_x.copy_(torch.randn(BATCH, hidden, generator=gen, device=dev).to(dtype))
        graph.replay()
        vals, idx = step(static_x)
        sync(dev)
        same = torch.equal(idx, static_idx) and torch.equal(vals, static_vals)
        identical += int(same)
        worst = max(worst, max_abs_err(static_vals, vals))
    metrics["stable_replays_identical"] = f"{identical}/{trials}"
    metrics["stable_max_abs_err"] = worst
    metrics["stable_replay_s"] = time_op(graph.replay, dev, iters=5, warmup=1)
    metrics["stable_eager_s"] = time_op(lambda: step(static_x), dev, iters=5, warmup=1)
    metrics["stable_extra_bytes_per_rank"] = (padded - rows) * hidden * 2
    del graph

    # The all-gather itself inside a graph.
    ctx.progress("NCCL all-gather captured in a CUDA graph")
    n = 4 * 1024 * 1024  # 8 MiB of bf16 per rank
    src_buf = torch.empty(n, device=dev, dtype=dtype)
    out_buf = torch.empty(n * tp, device=dev, dtype=dtype)
    ref_buf = torch.empty(n * tp, device=dev, dtype=dtype)
    ag_graph = torch.cuda.CUDAGraph()
    try:
        src_buf.normal_(generator=gen)
        with torch.cuda.stream(stream):
            dist.all_gather_into_tensor(out_buf, src_buf)
        torch.cuda.current_stream(dev).wait_stream(stream)
        sync(dev)
        with torch.cuda.graph(ag_graph):
            dist.all_gather_into_tensor(out_buf, src_buf)
        ok = 0
        for i in range(3):
            src_buf.copy_(torch.randn(n, generator=gen, device=dev).to(dtype) + rank * 100 + i)
            ag_graph.replay()
            dist.all_gather_into_tensor(ref_buf, src_buf)
            sync(dev)
            ok += int(torch.equal(out_buf, ref_buf))
        metrics["nccl_graph_replays_identical"] = f"{ok}/3"
        metrics["nccl_graph_replay_s"] = time_op(ag_graph.replay, dev, iters=5, warmup=1)
        metrics["nccl_eager_s"] = time_op(
            lambda: dist.all_gather_into_tensor(ref_buf, src_buf), dev, iters=5, warmup=1
        )
        nccl_ok = ok == 3
    except RuntimeError as err:
        metrics["nccl_graph"] = err_text(err)
        nccl_ok = False
        if "CUDA error" in str(err) or "NCCL" in str(err):
            raise

    problems = []
    if identical != trials and worst > 0:
        problems.append(
            f"stable pattern: graph replay differs from eager (max abs err {worst:.3g})"
        )
    if not metrics["gathered_weight_exact"]:
        problems.append("the all-gathered weight differs from the full weight")
    if not nccl_ok:
        problems.append(
            "NCCL all-gather in a CUDA graph: "
            + metrics.get(
                "nccl_graph", f"{metrics.get('nccl_graph_replays_identical')} replays identical"
            )
        )
    if problems:
        return result("fail", "; ".join(problems), metrics)
    reason = (
        f"stable gathered weight: {identical}/{trials} replays identical to eager; NCCL all-gather "
        f"replayed from a graph {metrics['nccl_graph_replays_identical']} identical; keeping the "
        f"gathered weight costs {metrics['stable_extra_bytes_per_rank'] / 2**30:.2f} GiB per rank"
    )
    return result("pass", reason, metrics)


def part_transient(ctx: Ctx) -> dict:
    """The bug's pattern, isolated: capture over a weight, free it, replay.

    First the freed block is reallocated (same size, other values) and the graph replayed:
    what an engine that keeps allocating would see. Then that block is freed too, so the graph
    reads memory nobody owns. Each step is announced before it runs, so that a crash is
    attributed to it; the result is reported before any tensor is released, because with the
    caching allocator off a release after an illegal memory access calls cudaFree on a broken
    context and aborts the process.
    """
    import torch

    dev = ctx.device
    metrics: dict = {
        "caching_allocator": "off"
        if os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1"
        else "on"
    }
    tp = max(2, int(ctx.params.get("tp", 2)))
    vocab, hidden, _ = _sizes(ctx)
    rows = -(-vocab // tp)
    dtype = torch.bfloat16
    gen = torch.Generator(device=dev).manual_seed(13)
    shards = [
        (torch.randn(rows, hidden, generator=gen, device=dev) * 0.02).to(dtype) for _ in range(tp)
    ]
    weight = torch.cat(shards)  # the gathered temporary
    del shards
    ptr = weight.data_ptr()
    metrics["weight_bytes"] = weight.numel() * weight.element_size()
    x = torch.randn(BATCH, hidden, generator=gen, device=dev).to(dtype)
    out = torch.empty(BATCH, weight.shape[0], device=dev, dtype=dtype)
    stream = torch.cuda.Stream(device=dev)
    with torch.cuda.stream(stream):  # warm up on the capture stream (cuBLAS workspace)
        torch.matmul(x, weight.t(), out=out)
    stream.synchronize()
    ref = out.clone()
    ctx.progress("capturing the logits GEMM over the gathered weight")
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, stream=stream):
            torch.matmul(x, weight.t(), out=out)
    except Exception as err:
        metrics["outcome"] = "capture-failed"
        metrics["capture_error"] = err_text(err)
        ctx.report_and_exit(
            result(
                "warn", "capture failed with the caching allocator off: " + err_text(err), metrics
            )
        )
    graph.replay()
    sync(dev)
    metrics["replay_while_alive_identical"] = bool(torch.equal(out, ref))

    def replay_and_compare(label: str) -> str:
        out.fill_(float("nan"))
        graph.replay()
        sync(dev)
        if torch.equal(out, ref):
            metrics[label] = "identical to the live-weight result"
            return "no-visible-effect"
        nan = bool(out.isnan().any())
        metrics[label] = (
            f"wrong values (max abs err {max_abs_err(out, ref):.3g}{', NaN' if nan else ''})"
        )
        return "wrong-values"

    outcomes: list[str] = []
    try:
        ctx.progress("freeing the gathered weight (cudaFree) and reallocating the same size")
        del weight
        torch.cuda.synchronize(dev)
        clobber = torch.full((rows * tp, hidden), 7.0, device=dev, dtype=dtype)
        metrics["reallocated_same_address"] = clobber.data_ptr() == ptr
        ctx.progress("replaying over the freed-and-reused memory")
        outcomes.append(replay_and_compare("after_reuse"))
        ctx.progress("freeing the reused block too, replaying over memory nobody owns")
        del clobber
        torch.cuda.synchronize(dev)
        outcomes.append(replay_and_compare("after_free"))
    except Exception as err:
        metrics["replay_error"] = err_text(err)
        outcomes.append("illegal-memory-access" if "illegal memory access" in str(err) else "error")
    outcome = (
        "illegal-memory-access"
        if "illegal-memory-access" in outcomes
        else "wrong-values"
        if "wrong-values" in outcomes
        else "error"
        if "error" in outcomes
        else "no-visible-effect"
    )
    metrics["outcome"] = outcome
    if outcome == "no-visible-effect":
        res = result(
            "pass",
            "replaying over the freed weight showed nothing on this stack "
            "(the hazard stays: the graph reads memory it does not own)",
            metrics,
        )
    else:
        shown = [metrics[k] for k in ("after_reuse", "after_free", "replay_error") if k in metrics]
        res = result(
            "pass",
            f"replay over the freed weight: {outcome} ({'; '.join(shown)})",
            metrics,
            ["SPEC001"],
        )
    ctx.report_and_exit(res)
    return res
