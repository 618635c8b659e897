"""padded-batch: a decode batch padded to a CUDA-graph size, through real kernels.

Two mechanisms, each against an unpadded reference:

1. Block table (Gemma 4 MTP, vLLM PR 43982): the drafter stored per-group block tables with
   ``num_reqs_padded`` rows while the attention metadata (``cu_seqlens_q``, ``seqused_k``)
   was unpadded to ``num_reqs``. On a GPU the batch runs through torch's varlen flash
   attention (``aten._flash_attention_forward``, the op behind
   ``torch.nn.attention.varlen``): with paged KV through ``block_table`` where this torch has
   it, else over pages gathered with the table; on the CPU through SDPA over pages gathered
   with the block table. Does the unsliced table raise, or silently give wrong rows, and does
   ``block_table[:num_reqs]`` give the reference output?

2. Sparse-indexer top-k write-back (DeepSeek-V3.2 with MTP, vLLM PR 39542): with
   ``next_n = 1 + num_speculative_tokens`` rows per request and short prefills treated as
   decodes, top-k runs on the padded ``[batch, next_n]`` layout and is unpacked to the real
   ``sum(decode_lens)`` rows. The seq-lens used for masking and the write-back into the
   persistent ``topk_indices_buffer`` are sized by the padded count (the bug) or by the real
   rows (the fix).
"""

from __future__ import annotations

import time

from vllm_doctor.probes._common import Ctx, err_text, max_abs_err, result, sync

CUDA_GRAPH_SIZES = (1, 2, 4, 8, 16, 24, 32)


def _padded(n: int) -> int:
    return next(s for s in CUDA_GRAPH_SIZES if s >= n)


# -- 1. block table -------------------------------------------------------------------------


def _flash_args() -> set[str]:
    """Argument names of aten's varlen flash-attention op (empty if this torch has none).

    The op is called directly: ``torch.nn.attention.varlen`` would import ``torch._dynamo``
    (seconds) just to register itself."""
    import torch

    try:
        schema = torch.ops.aten._flash_attention_forward.default._schema
    except (AttributeError, RuntimeError):
        return set()
    return {arg.name for arg in schema.arguments}


def _reference(q, k_cache, v_cache, table, seq_lens, block_size):
    """Per-request attention in float64 over the pages the table names (one query token each)."""
    import torch

    outs = []
    for i in range(q.shape[0]):
        n = int(seq_lens[i])
        blocks = table[i, : -(-n // block_size)].long()
        k = k_cache[blocks].reshape(-1, *k_cache.shape[2:])[:n].double()  # [n, H, D]
        v = v_cache[blocks].reshape(-1, *v_cache.shape[2:])[:n].double()
        qi = q[i].double()  # [H, D]
        scores = torch.einsum("hd,nhd->hn", qi, k) / (q.shape[-1] ** 0.5)
        outs.append(torch.einsum("hn,nhd->hd", torch.softmax(scores, dim=-1), v))
    return torch.stack(outs)  # [B, H, D]


def _sdpa_gathered(q, k_cache, v_cache, table, seq_lens, block_size):
    """SDPA over K/V gathered page by page with the block table (the CPU path)."""
    import torch
    import torch.nn.functional as F

    rows = table.shape[0]
    max_blocks = table.shape[1]
    k = k_cache[table.long()].reshape(rows, max_blocks * block_size, *k_cache.shape[2:])
    v = v_cache[table.long()].reshape(rows, max_blocks * block_size, *v_cache.shape[2:])
    pos = torch.arange(max_blocks * block_size, device=q.device)
    mask = pos[None, :] < seq_lens[:, None].to(q.device)  # [len(seq_lens), L]
    out = F.scaled_dot_product_attention(
        q.unsqueeze(2),  # [B, H, 1, D]
        k.transpose(1, 2),
        v.transpose(1, 2),  # [rows, H, L, D]
        attn_mask=mask[:, None, None, :],
    )
    return out.squeeze(2)  # [B, H, D]


def _varlen(q, k_cache, v_cache, table, seq_lens, block_size, paged: bool):
    """aten._flash_attention_forward in its varlen form: paged KV (``block_table``) when this
    torch has it, else over K/V gathered page by page with the table."""
    import torch

    b = q.shape[0]
    cu_q = torch.arange(b + 1, device=q.device, dtype=torch.int32)
    seqused = seq_lens.to(device=q.device, dtype=torch.int32)
    max_k = int(seq_lens.max())
    op = torch.ops.aten._flash_attention_forward
    if paged:
        cu_k = torch.zeros(b + 1, device=q.device, dtype=torch.int32)
        cu_k[1:] = torch.cumsum(seqused, 0)
        return op(
            q,
            k_cache,
            v_cache,
            cu_q,
            cu_k,
            1,
            max_k,
            0.0,
            False,
            False,
            seqused_k=seqused,
            block_table=table.to(torch.int32),
        )[0]
    rows = table.shape[0]
    lens = [int(seq_lens[i]) if i < len(seq_lens) else 0 for i in range(rows)]
    ks, vs = [], []
    for i in range(rows):
        blocks = table[i, : max(1, -(-lens[i] // block_size))].long()
        ks.append(k_cache[blocks].reshape(-1, *k_cache.shape[2:])[: lens[i]])
        vs.append(v_cache[blocks].reshape(-1, *v_cache.shape[2:])[: lens[i]])
    cu_k = torch.zeros(rows + 1, device=q.device, dtype=torch.int32)
    cu_k[1:] = torch.cumsum(torch.tensor(lens, device=q.device, dtype=torch.int32), 0)
    return op(q, torch.cat(ks), torch.cat(vs), cu_q, cu_k, 1, max_k, 0.0, False, False)[0]


def _block_table_case(ctx: Ctx, num_reqs: int, gen) -> dict:
    import torch

    t_case = time.perf_counter()
    dev = ctx.device
    cuda = dev.type == "cuda"
    heads, head_dim = (8, 128) if cuda else (4, 32)
    block_size = 256 if cuda else 16  # flash attention's paged KV wants pages of 256 tokens
    max_blocks = 4
    num_blocks = 8 * max_blocks * 4
    padded = _padded(num_reqs)
    dtype = torch.bfloat16 if cuda else torch.float32
    k_cache = torch.randn(num_blocks, block_size, heads, head_dim, generator=gen, device=dev).to(
        dtype
    )
    v_cache = torch.randn(num_blocks, block_size, heads, head_dim, generator=gen, device=dev).to(
        dtype
    )
    perm = torch.randperm(num_blocks, generator=gen, device=dev)[: padded * max_blocks]
    table = perm.view(padded, max_blocks).to(
        torch.int32
    )  # padded rows: stale tables of old requests
    seq_lens = torch.randint(1, max_blocks * block_size + 1, (num_reqs,), generator=gen, device=dev)
    q = torch.randn(num_reqs, heads, head_dim, generator=gen, device=dev).to(dtype)
    ref = _reference(q.float(), k_cache.float(), v_cache.float(), table, seq_lens, block_size)

    flash = _flash_args() if cuda else set()
    if "block_table" in flash:
        kernel = "aten._flash_attention_forward, varlen with paged KV (block_table)"

        def attend(t):
            return _varlen(q, k_cache, v_cache, t, seq_lens, block_size, paged=True)
    elif flash:
        kernel = "aten._flash_attention_forward, varlen over pages gathered with the block table"

        def attend(t):
            return _varlen(q, k_cache, v_cache, t, seq_lens, block_size, paged=False)
    else:
        kernel = "torch SDPA over pages gathered with the block table"

        def attend(t):
            return _sdpa_gathered(q, k_cache, v_cache, t, seq_lens, block_size)

    case: dict = {
        "num_reqs": num_reqs,
        "padded_to": padded,
        "kernel": kernel,
        "block_table_rows": padded,
        "block_size": block_size,
    }
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-4
    case["setup_s"] = round(time.perf_counter() - t_case, 4)
    # Unsliced: the padded table with metadata for the real requests.
    t_case = time.perf_counter()
    try:
        out = attend(table)
        sync(dev)
        out = out.reshape(-1, heads, head_dim)
        if out.shape[0] != num_reqs:
            case["unsliced"] = f"ran, returned {out.shape[0]} rows for {num_reqs} requests"
            case["unsliced_outcome"] = "wrong-rows"
        else:
            bad = int(((out.double() - ref).abs().amax(dim=(1, 2)) > tol).sum())
            case["unsliced"] = f"ran, {bad}/{num_reqs} rows differ from the reference"
            case["unsliced_outcome"] = "wrong-rows" if bad else "correct"
    except (RuntimeError, ValueError, IndexError) as err:
        case["unsliced"] = err_text(err)
        case["unsliced_outcome"] = "raises"
    case["unsliced_s"] = round(time.perf_counter() - t_case, 4)
    # Sliced to the real batch (the fix).
    t_case = time.perf_counter()
    out = attend(table[:num_reqs])
    sync(dev)
    case["sliced_s"] = round(time.perf_counter() - t_case, 4)
    case["sliced_max_abs_err"] = max_abs_err(out.reshape(num_reqs, heads, head_dim), ref)
    case["sliced_ok"] = bool(case["sliced_max_abs_err"] <= tol)
    case["tolerance"] = tol
    return case


# -- 2. sparse-indexer top-k write-back ----------------------------------------------------


def _indexer_case(ctx: Ctx, gen) -> dict:
    import torch

    dev = ctx.device
    cuda = dev.type == "cuda"
    next_n = 2  # 1 + num_speculative_tokens
    decode_lens = torch.tensor([2, 2, 1, 2, 1], device=dev)  # short prefills treated as decodes
    batch = decode_lens.numel()
    padded = _padded(batch)
    topk, max_len = (512, 4096) if cuda else (8, 64)
    seq_lens_padded = torch.randint(
        topk + next_n, max_len + 1, (padded,), generator=gen, device=dev
    )
    logits = torch.randn(
        padded * next_n, max_len, generator=gen, device=dev
    )  # padded logits buffer
    num_decode_tokens = batch * next_n  # the padded [batch, next_n] layout's row count
    real_rows = int(decode_lens.sum())
    case: dict = {
        "next_n": next_n,
        "decode_lens": decode_lens.tolist(),
        "batch": batch,
        "padded_batch": padded,
        "topk": topk,
        "max_len": max_len,
        "num_decode_tokens": num_decode_tokens,
        "unpacked_rows": real_rows,
    }

    pos = torch.arange(max_len, device=dev)
    j = torch.arange(next_n, device=dev)

    def topk_rows(seq_lens):
        # Position j of request b may see seq_len_b - decode_len_b + j + 1 keys (causal drafts).
        lens = decode_lens
        if len(seq_lens) > batch:  # padding requests count as full next_n rows
            lens = torch.cat(
                [decode_lens, torch.full((len(seq_lens) - batch,), next_n, device=dev)]
            )
        valid = (seq_lens[:, None] - lens[:, None] + j[None, :] + 1).reshape(-1)
        masked = logits[: batch * next_n].masked_fill(pos[None, :] >= valid[:, None], float("-inf"))
        return torch.topk(masked, topk, dim=-1).indices  # [len(seq_lens) * next_n, topk]

    # (1) seq_lens unsliced (padded batch) against buffers sized batch * next_n.
    try:
        topk_rows(seq_lens_padded)
        case["seq_lens_unsliced"] = "ran"
        case["seq_lens_unsliced_outcome"] = "no-error"
    except RuntimeError as err:
        case["seq_lens_unsliced"] = err_text(err)
        case["seq_lens_unsliced_outcome"] = "raises"
    seq_lens = seq_lens_padded[:batch]
    idx = topk_rows(seq_lens)  # [batch * next_n, topk]
    keep = (j[None, :] < decode_lens[:, None]).reshape(-1)
    unpacked = idx[keep]  # [sum(decode_lens), topk]: what unpack_seq returns

    # Reference: each real token on its own.
    ref_rows = []
    for b in range(batch):
        for t in range(int(decode_lens[b])):
            n = int(seq_lens[b]) - int(decode_lens[b]) + t + 1
            ref_rows.append(torch.topk(logits[b * next_n + t, :n], topk).indices)
    ref = torch.stack(ref_rows)

    buf_rows = padded * next_n
    # (2) write-back sized by the padded count.
    buf = torch.full((buf_rows, topk), -1, dtype=unpacked.dtype, device=dev)
    try:
        buf[:num_decode_tokens, : unpacked.shape[-1]] = unpacked
        sync(dev)
        wrong = int((buf[:real_rows].sort(-1).values != ref.sort(-1).values).any(-1).sum())
        case["writeback_padded"] = f"ran, {wrong}/{real_rows} rows differ"
        case["writeback_padded_outcome"] = "wrong-rows" if wrong else "correct"
    except RuntimeError as err:
        case["writeback_padded"] = err_text(err)
        case["writeback_padded_outcome"] = "raises"
    # (3) write-back sized by the unpacked rows (the fix).
    buf = torch.full((buf_rows, topk), -1, dtype=unpacked.dtype, device=dev)
    buf[: unpacked.shape[0], : unpacked.shape[-1]] = unpacked
    sync(dev)
    same = bool(torch.equal(buf[:real_rows].sort(-1).values, ref.sort(-1).values))
    case["writeback_fixed_ok"] = same
    case["writeback_untouched_rows_ok"] = bool((buf[real_rows:] == -1).all())
    return case


def run(ctx: Ctx) -> dict:
    import torch

    gen = torch.Generator(device=ctx.device).manual_seed(97 + ctx.rank)
    metrics: dict = {"device": str(ctx.device)}
    ctx.progress("block table: padded decode batches through attention")
    t0 = time.perf_counter()
    cases = [_block_table_case(ctx, n, gen) for n in (3, 5, 13)]
    metrics["block_table"] = cases
    metrics["block_table_s"] = round(time.perf_counter() - t0, 4)
    ctx.progress("sparse indexer: top-k write-back with next_n > 1")
    t0 = time.perf_counter()
    idx = _indexer_case(ctx, gen)
    metrics["indexer"] = idx
    metrics["indexer_s"] = round(time.perf_counter() - t0, 4)

    confirmed, problems = [], []
    bt_bug = [c for c in cases if c["unsliced_outcome"] in ("raises", "wrong-rows")]
    if not all(c["sliced_ok"] for c in cases):
        worst = max(c["sliced_max_abs_err"] for c in cases)
        problems.append(
            f"block table sliced to the real batch differs from the reference (max abs err {worst:.3g})"
        )
    if bt_bug:
        confirmed.append("SPEC002")
    ix_bug = (
        idx["writeback_padded_outcome"] in ("raises", "wrong-rows")
        or idx["seq_lens_unsliced_outcome"] == "raises"
    )
    if not (idx["writeback_fixed_ok"] and idx["writeback_untouched_rows_ok"]):
        problems.append("top-k write-back sized by the unpacked rows differs from the reference")
    if ix_bug:
        confirmed.append("SPEC003")
    if problems:
        return result("fail", "; ".join(problems), metrics, confirmed)
    first = cases[0]
    reason = (
        f"unsliced block table ({first['padded_to']} rows for {first['num_reqs']} requests): "
        f"{first['unsliced_outcome']}; sliced: matches the reference in "
        f"{len(cases)}/{len(cases)} batches; indexer write-back by padded count "
        f"({idx['num_decode_tokens']} rows for {idx['unpacked_rows']}): "
        f"{idx['writeback_padded_outcome']}; by unpacked rows: matches"
    )
    if not bt_bug or not ix_bug:
        missing = []
        if not bt_bug:
            missing.append("the unsliced block table gave correct output")
        if not ix_bug:
            missing.append("the padded write-back gave correct rows")
        return result(
            "warn", "; ".join(missing) + " on this stack", metrics, confirmed, notes=[reason]
        )
    return result("pass", reason, metrics, confirmed)
