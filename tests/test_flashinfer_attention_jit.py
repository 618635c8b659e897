"""facts/flashinfer_attention_jit.py against the shipped tables: the backend vLLM runs, the
FlashInfer names its file uses in the release (companion_uses) and the JIT modules they load in
the installed flashinfer-python (stack/flashinfer-python jit: keys)."""

from __future__ import annotations

from vllm_doctor.facts.flashinfer_attention_jit import (
    MODULES,
    OTHERS,
    PATH,
    collect_flashinfer_attention_jit,
)
from vllm_doctor.facts.model import Facts


def _collect(values: dict) -> Facts:
    facts = Facts.from_flat(values)
    collect_flashinfer_attention_jit(facts)
    return facts


def test_forced_flashinfer_without_jit_cache_builds_batch_prefill():
    facts = _collect(
        {
            "vllm.version": "0.14.0",
            "serve.attention_backend": "FLASHINFER",
            "packages.flashinfer-python": "0.5.3",
        }
    )
    assert facts.value(PATH) is True
    modules = facts.value(MODULES)
    assert "batch_prefill" in modules and "batch_decode" in modules
    assert "v1/attention/backends/flashinfer.py" in facts.get(PATH).detail


def test_jit_cache_leaves_it_undecided():
    facts = _collect(
        {
            "vllm.version": "0.26.0",
            "serve.attention_backend": "FLASHINFER",
            "packages.flashinfer-python": "0.6.11.post2",
            "packages.flashinfer-jit-cache": "0.6.11.post2+cu129",
        }
    )
    assert facts.get(PATH) is None
    assert "ahead-of-time grid" in facts.why_missing(PATH)


def test_backend_without_flashinfer_needs_no_jit():
    facts = _collect(
        {
            "vllm.version": "0.26.0",
            "serve.attention_backend": "TRITON_ATTN",
            "packages.flashinfer-python": "0.6.11.post2",
        }
    )
    assert facts.value(PATH) is False


def test_priority_choice_needs_every_earlier_candidate_refused():
    base = {
        "vllm.version": "0.26.0",
        "packages.flashinfer-python": "0.6.11.post2",
        "release.attention.candidates": ["FLASHINFER", "FLASH_ATTN", "TRITON_ATTN"],
    }
    facts = _collect(
        {
            **base,
            "release.attention.supporting": ["FLASHINFER", "TRITON_ATTN"],
            "release.attention.rejections": [],
        }
    )
    assert facts.value(PATH) is True
    assert facts.value(OTHERS) == "TRITON_ATTN"
    # FLASH_ATTN first and not refused: vLLM runs it, whether FLASHINFER accepts or not
    facts = _collect(
        {
            **base,
            "release.attention.candidates": ["FLASH_ATTN", "FLASHINFER"],
            "release.attention.supporting": ["FLASH_ATTN", "FLASHINFER"],
            "release.attention.rejections": [],
        }
    )
    assert facts.value(PATH) is False
    # an earlier candidate whose verdict is open: not decided
    facts = _collect(
        {
            **base,
            "release.attention.candidates": ["FLASH_ATTN", "FLASHINFER"],
            "release.attention.supporting": ["FLASHINFER"],
            "release.attention.rejections": [],
        }
    )
    assert facts.get(PATH) is None
    assert "FLASH_ATTN" in facts.why_missing(PATH)


def test_flashinfer_python_not_installed():
    facts = _collect({"vllm.version": "0.26.0", "serve.attention_backend": "FLASHINFER"})
    assert facts.value(PATH) is False


def test_unknown_release_is_missing():
    facts = Facts()
    facts.mark_missing("vllm.version", "no vLLM here")
    collect_flashinfer_attention_jit(facts)
    assert facts.get(PATH) is None and "no vLLM here" in facts.why_missing(PATH)
