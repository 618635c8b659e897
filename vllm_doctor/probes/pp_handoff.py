"""pp-handoff: the sampled-token handoff between pipeline stages (DiffusionGemma at PP > 1).

In vLLM's pipeline-parallel runner the last stage samples and broadcasts the sampled token
ids to every stage, and the helper insists on ``sampled_token_ids.dtype == torch.int64``.
DiffusionGemma's sampler writes its ids into an int32 buffer (vLLM issue 45719). This probe
runs the handoff between real ranks (the last rank is the sampling stage):

* the dtype guard on the sampler's int32 (and float) outputs, as the PP helper applies it;
* what a receiving stage would read if the sender's int32 bytes landed in its int64 buffer,
  and what a float sampler output does to token ids (bf16 holds integers only up to 256);
* the fix: cast to int64 before the broadcast; every stage must then hold exactly the ids the
  last stage sampled.
"""

from __future__ import annotations

import time

from vllm_doctor.probes._common import Ctx, err_text, result, sync

DEFAULT_VOCAB = 262144
TOKENS = 64  # canvas positions sampled per step (a few requests' blocks)


def _pp_broadcast_guard(sampled_token_ids) -> None:
    """The check vLLM's PP handoff makes before broadcasting (verbatim condition)."""
    import torch

    assert sampled_token_ids.dtype == torch.int64, (
        f"assert sampled_token_ids.dtype == torch.int64 (got {sampled_token_ids.dtype})"
    )


def run(ctx: Ctx) -> dict:
    import torch
    import torch.distributed as dist

    dev = ctx.device
    src = ctx.world - 1  # the last pipeline stage samples
    vocab, vsrc = ctx.model_dim("vocab_size", DEFAULT_VOCAB)
    metrics: dict = {
        "stages": ctx.world,
        "sampling_stage": src,
        "tokens": TOKENS,
        "vocab_size": vocab,
        "vocab_from": vsrc,
    }

    gen = torch.Generator(device="cpu").manual_seed(4321)
    expected = torch.randint(0, vocab, (TOKENS,), generator=gen, dtype=torch.int64)
    sampled_i32 = expected.to(torch.int32).to(dev)  # what DiffusionSampler's buffer holds

    # 1. The dtype guard on the sampler's outputs.
    guard = {}
    for label, tensor in (
        ("int32", sampled_i32),
        ("float32", sampled_i32.float()),
        ("int64", sampled_i32.long()),
    ):
        try:
            _pp_broadcast_guard(tensor)
            guard[label] = "accepted"
        except AssertionError as err:
            guard[label] = err_text(err)
    metrics["guard"] = guard
    guard_rejects_int32 = guard["int32"] != "accepted"

    # 2. Without the guard: the int32 payload read through an int64 receive buffer. The bytes
    # travel for real (same byte count on both sides, so the collective stays well-formed).
    payload = torch.zeros(TOKENS * 8, dtype=torch.uint8, device=dev)
    if ctx.rank == src:
        raw = sampled_i32.contiguous().view(torch.uint8)
        payload[: raw.numel()] = raw
    dist.broadcast(payload, src=src)
    as_int64 = payload.view(torch.int64).cpu()
    wrong_bytes = int((as_int64 != expected).sum())
    metrics["int32_bytes_as_int64_wrong_ids"] = wrong_bytes
    metrics["int32_bytes_as_int64_sample"] = as_int64[:3].tolist()

    # Float sampler outputs: ids above a dtype's exact-integer range come back wrong.
    for label, dt in (
        ("float32", torch.float32),
        ("bfloat16", torch.bfloat16),
        ("float16", torch.float16),
    ):
        back = expected.to(dt).to(torch.int64)
        metrics[f"{label}_ids_wrong"] = int((back != expected).sum())

    # 3. The fix: cast to int64 on the sampling stage, then broadcast.
    buf = (
        sampled_i32.to(torch.int64)
        if ctx.rank == src
        else torch.empty(TOKENS, dtype=torch.int64, device=dev)
    )
    _pp_broadcast_guard(buf)
    t0 = time.perf_counter()
    dist.broadcast(buf, src=src)
    sync(dev)
    metrics["broadcast_s"] = round(time.perf_counter() - t0, 6)
    fixed_ok = bool(torch.equal(buf.cpu(), expected))
    metrics["fix_cast_int64_exact"] = fixed_ok

    confirmed = ["MODEL002"] if guard_rejects_int32 else []
    if not fixed_ok:
        return result(
            "fail",
            "the int64 handoff delivered different token ids on this stage",
            metrics,
            confirmed,
        )
    reason = (
        f"int32 sampler output fails the int64 handoff check; its bytes read as int64 give "
        f"{wrong_bytes}/{TOKENS} wrong ids; bf16 sampler output corrupts "
        f"{metrics['bfloat16_ids_wrong']}/{TOKENS}; cast to int64 before the broadcast "
        f"delivers exact ids to all {ctx.world} stages"
    )
    return result("pass", reason, metrics, confirmed)
