"""tp-softembed: DiffusionGemma's self-conditioning soft embedding under tensor parallelism.

The sampler computes ``probs @ embed_tokens.weight`` over the full vocabulary, but at TP > 1
``embed_tokens`` is a vocab-parallel shard ``[vocab/tp, hidden]`` (vLLM issue 45719). Each rank
here holds such a shard and shows:

* the mechanism: full-vocab probabilities times the local shard fail eagerly (the message is
  recorded) and, in an isolated child with a tiny shape, under ``torch.compile`` with the
  traced text ``a and b must have same reduction dim``;
* fix A (all-gather the weight): right against the TP=1 reference (the same product with the
  whole embedding on one GPU, same dtype), the memory it replicates per rank, and the
  all-gather's bus bandwidth (algbw × (n−1)/n);
* fix B (vLLM PR 46177): each rank multiplies its vocab slice of the probabilities by its
  shard and the partial products are all-reduced; right against the TP=1 reference.
"""

from __future__ import annotations

import re
import time
from functools import partial
from typing import Any

from vllm_doctor.probes._common import GIB, Ctx, err_text, rel_err, result, sync, time_op

DEFAULT_VOCAB = 262144  # DiffusionGemma / Gemma 4 vocabulary
DEFAULT_HIDDEN = (
    2816  # DiffusionGemma-26B-A4B hidden size (the reported [65536, 2816] shard at TP=4)
)
CPU_VOCAB = 4096
CPU_HIDDEN = 64
TOKENS = 32  # canvas tokens whose probabilities are embedded
REDUCTION_DIM = re.compile(
    r"a and b must have same reduction dim, but got \[[^\]]*\] X \[[^\]]*\]\.?"
)


def _sizes(ctx: Ctx) -> tuple[int, int, dict]:
    vocab, hidden, src = ctx.vocab_and_hidden(DEFAULT_VOCAB, DEFAULT_HIDDEN)
    info: dict[str, Any] = {"vocab_size": vocab, "hidden_size": hidden, "sizes_from": src}
    if ctx.small:
        info.update(shrunk_from=[vocab, hidden], sizes_from="shrunk for a CPU run")
        vocab, hidden = min(vocab, CPU_VOCAB), min(hidden, CPU_HIDDEN)
        info.update(vocab_size=vocab, hidden_size=hidden)
    return vocab, hidden, info


def prepare(ctx: Ctx) -> dict:
    """Everything that needs no communicator (runs while the process group forms)."""
    import torch

    dev = ctx.device
    tp, rank = ctx.world, ctx.rank
    vocab, hidden, info = _sizes(ctx)
    dtype = torch.bfloat16
    shard_rows = -(-vocab // tp)
    padded = shard_rows * tp  # VocabParallelEmbedding pads the vocabulary to a multiple of tp
    metrics: dict = dict(info, tp=tp, dtype="bfloat16", tokens=TOKENS, padded_vocab=padded)

    ctx.progress(f"building a [{padded}, {hidden}] embedding, shard [{shard_rows}, {hidden}]")
    gen = torch.Generator(device=dev).manual_seed(1234)
    full = torch.randn(padded, hidden, generator=gen, device=dev, dtype=dtype).mul_(0.02)
    full[vocab:] = 0
    logits = torch.randn(TOKENS, padded, generator=gen, device=dev, dtype=torch.float32) * 3
    logits[:, vocab:] = float("-inf")
    probs = torch.softmax(logits, dim=-1).to(dtype)
    del logits
    lo, hi = rank * shard_rows, (rank + 1) * shard_rows
    shard = full[lo:hi].contiguous()

    # The TP=1 reference: what one GPU computes with the whole embedding, in the same dtype.
    ref = probs @ full
    metrics["tolerance_rel"] = 2e-2  # bf16 operands: partial sums round differently

    # The mechanism, eagerly: full-vocab probabilities times the local shard.
    try:
        bad = probs @ shard
        sync(dev)
        metrics["bug_eager"] = f"no error: got shape {list(bad.shape)}"
        bug_reproduced = False
    except RuntimeError as err:
        metrics["bug_eager"] = err_text(err)
        bug_reproduced = True
    return {
        "metrics": metrics,
        "full": full,
        "probs": probs,
        "shard": shard,
        "ref": ref,
        "lo": lo,
        "hi": hi,
        "padded": padded,
        "shard_rows": shard_rows,
        "hidden": hidden,
        "bug": bug_reproduced,
    }


def run(ctx: Ctx) -> dict:
    import torch
    import torch.distributed as dist

    state = ctx.take_prepared() or prepare(ctx)
    dev = ctx.device
    tp = ctx.world
    dtype = torch.bfloat16
    elt = torch.finfo(dtype).bits // 8
    metrics = state["metrics"]
    full, probs, shard, ref = state["full"], state["probs"], state["shard"], state["ref"]
    lo, hi, padded, shard_rows, hidden = (
        state[k] for k in ("lo", "hi", "padded", "shard_rows", "hidden")
    )
    bug_reproduced = state["bug"]
    tol = metrics["tolerance_rel"]

    # Fix A: all-gather the weight, then the full-vocab product.
    ctx.progress("fix A: all-gather the embedding weight")
    gathered = torch.empty(padded, hidden, device=dev, dtype=dtype)
    dist.all_gather_into_tensor(gathered, shard)
    sync(dev)
    out_a = probs @ gathered
    metrics["fix_allgather_weight_exact"] = bool(torch.equal(gathered, full))
    metrics["fix_allgather_identical_to_tp1"] = bool(torch.equal(out_a, ref))
    metrics["fix_allgather_rel_err"] = rel_err(out_a, ref)
    metrics["fix_allgather_extra_bytes_per_rank"] = (padded - shard_rows) * hidden * elt
    metrics["fix_allgather_extra_gib_per_rank"] = round(
        metrics["fix_allgather_extra_bytes_per_rank"] / GIB, 3
    )
    total_bytes = padded * hidden * elt
    secs = time_op(partial(dist.all_gather_into_tensor, gathered, shard), dev, iters=5, warmup=1)
    algbw = total_bytes / secs / 1e9
    metrics["allgather_bytes"] = total_bytes
    metrics["allgather_s"] = secs
    metrics["allgather_algbw_gbps"] = round(algbw, 2)
    metrics["allgather_busbw_gbps"] = round(algbw * (tp - 1) / tp, 2)
    del gathered

    # Fix B: slice the probabilities to this rank's vocab range, multiply, all-reduce.
    ctx.progress("fix B: slice-then-all-reduce (vLLM PR 46177)")
    t0 = time.perf_counter()
    partial_sum = probs[:, lo:hi] @ shard
    dist.all_reduce(partial_sum)
    sync(dev)
    metrics["fix_slice_allreduce_s"] = round(time.perf_counter() - t0, 6)
    metrics["fix_slice_allreduce_rel_err"] = rel_err(partial_sum, ref)
    metrics["fix_slice_allreduce_extra_bytes_per_rank"] = TOKENS * hidden * elt

    problems = []
    for key in ("fix_allgather_rel_err", "fix_slice_allreduce_rel_err"):
        val = metrics[key]
        if not (val <= tol):  # NaN fails too
            problems.append(
                f"{key.replace('_rel_err', '')} off the TP=1 reference (rel err {val:.3g} > {tol:g})"
            )
    if not metrics["fix_allgather_weight_exact"]:
        problems.append("the all-gathered weight differs from the full weight")
    confirmed = ["MODEL001"] if bug_reproduced else []
    if problems:
        return result("fail", "; ".join(problems), metrics, confirmed)
    reason = (
        "full-vocab probs × local shard fails ("
        + metrics["bug_eager"].split(":")[0]
        + "); both fixes match the TP=1 reference "
        f"(all-gather rel err {metrics['fix_allgather_rel_err']:.2g}, slice+all-reduce "
        f"{metrics['fix_slice_allreduce_rel_err']:.2g}); the all-gather replicates "
        f"{metrics['fix_allgather_extra_gib_per_rank']} GiB per rank at "
        f"{metrics['allgather_busbw_gbps']} GB/s bus bandwidth"
    )
    if not bug_reproduced:
        return result(
            "warn",
            "full-vocab probs × local shard did not fail here: " + metrics["bug_eager"],
            metrics,
            [],
            notes=[reason],
        )
    return result("pass", reason, metrics, confirmed)


def part_compile(ctx: Ctx) -> dict:
    """The traced failure: dynamo propagates fake tensors through the sampler step and fails
    with vLLM's message. A tiny shape keeps it cheap; the error comes from shape propagation,
    before any kernel runs."""
    import torch

    dev = ctx.device
    tp = max(2, int(ctx.params.get("tp", 2)))
    vocab, hidden = 512, 64
    shard = torch.randn(vocab // tp, hidden, device=dev, dtype=torch.bfloat16)
    probs = torch.softmax(torch.randn(8, vocab, device=dev), dim=-1).to(torch.bfloat16)

    def sample_step(p, w):
        return p @ w

    t0 = time.perf_counter()
    import torch._dynamo

    import_s = time.perf_counter() - t0
    torch._dynamo.reset()
    t0 = time.perf_counter()
    compiled = torch.compile(sample_step, backend="eager", fullgraph=True)
    setup_s = time.perf_counter() - t0
    torch._dynamo.mark_dynamic(probs, 0)
    torch._dynamo.mark_dynamic(probs, 1)
    metrics = {
        "shape_probs": [8, vocab],
        "shape_shard": [vocab // tp, hidden],
        "tp": tp,
        "backend": "eager (the error is raised while tracing, before any backend)",
        "dynamo_import_s": round(import_s, 3),
        "compile_setup_s": round(setup_s, 3),
    }
    t0 = time.perf_counter()
    try:
        compiled(probs, shard)
        metrics["compile_s"] = round(time.perf_counter() - t0, 3)
        return result(
            "fail", "torch.compile traced full-vocab probs × shard without an error", metrics
        )
    except Exception as err:
        metrics["compile_s"] = round(time.perf_counter() - t0, 3)
        text = f"{type(err).__name__}: {err}"
        match = REDUCTION_DIM.search(text)
        metrics["error_type"] = type(err).__name__
        metrics["error"] = match.group(0) if match else err_text(err)
        if match:
            return result("pass", f"torch.compile: {match.group(0)}", metrics, ["MODEL001"])
        return result(
            "warn", "torch.compile failed with a different message: " + err_text(err), metrics
        )
