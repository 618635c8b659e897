"""fp8-scaled-mm-3d: vLLM's torch FP8 scaled-mm kernels on a 3-D activation (vLLM PR 38093).

The kernel flattens ``x`` ``[batch, seq, hidden]`` to 2-D for ``torch._scaled_mm`` but keeps the
3-D ``output_shape``; the buggy code narrows the output by ``output_shape[0]`` (the batch
only) before ``.view(*output_shape)``; the fix narrows by the token count
``prod(output_shape[:-1])``. Both run here on ``torch._scaled_mm`` and the fixed output is
compared with a reference from the dequantised operands and with the unquantised bf16 product.

FP8 matrix units need compute capability 8.9: below it the probe is skipped, and vLLM's FP8
path there is the weight-only Marlin fallback (QUANT002).
"""

from __future__ import annotations

import math

from vllm_doctor.probes._common import Ctx, err_text, rel_err, result, sync, time_op

FP8_MAX = 448.0  # float8_e4m3fn


def _scaled_mm(a, b, sa, sb, out_dtype):
    import torch

    out = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=out_dtype)
    return out[0] if isinstance(out, tuple) else out


def run(ctx: Ctx) -> dict:
    import torch

    dev = ctx.device
    major, minor = torch.cuda.get_device_capability(dev)
    cap = major * 10 + minor
    name = torch.cuda.get_device_name(dev)
    metrics: dict = {"gpu": name, "compute_capability": cap}
    if cap < 89:
        return result(
            "skip",
            f"needs compute capability ≥ 8.9 (this GPU: {major}.{minor}); vLLM runs "
            "FP8 checkpoints here through the weight-only FP8 Marlin kernel (W8A16)",
            metrics,
            ["QUANT002"],
        )
    fp8 = torch.float8_e4m3fn
    gen = torch.Generator(device=dev).manual_seed(7 + ctx.rank)
    batch, seq, k, n = 2, 7, 256, 512
    x = torch.randn(batch, seq, k, generator=gen, device=dev, dtype=torch.float32).to(
        torch.bfloat16
    )
    w = (torch.randn(n, k, generator=gen, device=dev, dtype=torch.float32) * 0.05).to(
        torch.bfloat16
    )
    sx = (x.abs().max().float() / FP8_MAX).reshape(())
    sw = (w.abs().max().float() / FP8_MAX).reshape(())
    xq = (x.float() / sx).clamp(-FP8_MAX, FP8_MAX).to(fp8)
    wq = (w.float() / sw).clamp(-FP8_MAX, FP8_MAX).to(fp8)
    output_shape = [batch, seq, n]
    x2d = xq.view(-1, k)
    out = _scaled_mm(x2d, wq.t(), sx, sw, torch.bfloat16)
    sync(dev)
    metrics.update(
        x_shape=[batch, seq, k],
        weight_shape=[n, k],
        output_shape=output_shape,
        flattened_rows=int(x2d.shape[0]),
        scaled_mm_out_shape=list(out.shape),
    )

    try:
        bad = torch.narrow(out, 0, 0, output_shape[0]).view(*output_shape)
        sync(dev)
        metrics["narrow_by_output_shape0"] = f"no error: got shape {list(bad.shape)}"
        bug = False
    except RuntimeError as err:
        metrics["narrow_by_output_shape0"] = err_text(err)
        bug = True
    tokens = math.prod(output_shape[:-1])
    fixed = torch.narrow(out, 0, 0, tokens).view(*output_shape)
    ref_deq = (xq.float() * sx) @ (wq.float() * sw).t()
    ref_bf16 = (x @ w.t()).float()
    metrics["narrow_by_tokens_rel_err_vs_dequantised"] = rel_err(fixed, ref_deq)
    metrics["narrow_by_tokens_rel_err_vs_bf16"] = rel_err(fixed, ref_bf16)
    tol = 1e-2
    metrics["tolerance_rel"] = tol

    # What FP8 buys at a serving-size GEMM (4096 tokens x 4096 x 4096), median of 10.
    big = 4096
    a8 = torch.randn(big, big, device=dev).to(fp8)
    b8 = torch.randn(big, big, device=dev).to(fp8)
    a16, b16 = a8.to(torch.bfloat16), b8.to(torch.bfloat16)
    one = torch.ones((), device=dev)
    t8 = time_op(lambda: _scaled_mm(a8, b8.t(), one, one, torch.bfloat16), dev, iters=10, warmup=3)
    t16 = time_op(lambda: a16 @ b16.t(), dev, iters=10, warmup=3)
    flops = 2 * big**3
    metrics["fp8_tflops_4096"] = round(flops / t8 / 1e12, 1)
    metrics["bf16_tflops_4096"] = round(flops / t16 / 1e12, 1)

    confirmed = ["QUANT001"] if bug else []
    refuted = ["QUANT002"]
    rel = metrics["narrow_by_tokens_rel_err_vs_dequantised"]
    if not rel <= tol:
        return result(
            "fail",
            f"narrowing by the token count is off the reference (rel err {rel:.3g})",
            metrics,
            confirmed,
            refuted,
        )
    reason = (
        f"narrow by output_shape[0] on a 3-D input: "
        f"{metrics['narrow_by_output_shape0'].split(':')[0]}; narrow by tokens ({tokens}) matches "
        f"the reference (rel err {rel:.2g}; {metrics['narrow_by_tokens_rel_err_vs_bf16']:.2g} vs "
        f"unquantised bf16); FP8 {metrics['fp8_tflops_4096']} vs bf16 "
        f"{metrics['bf16_tflops_4096']} TFLOP/s at 4096³"
    )
    if not bug:
        return result(
            "warn",
            "narrowing by output_shape[0] did not fail here",
            metrics,
            [],
            refuted,
            notes=[reason],
        )
    return result("pass", reason, metrics, confirmed, refuted)
