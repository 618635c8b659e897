"""tools/flashinfer_aot.py: the JIT modules FlashInfer's AOT build (flashinfer-jit-cache)
yields, under which capabilities, and the modules each entry point vLLM uses loads — read from
a small wheel built here with the shapes of flashinfer-python 0.6.8.post1's aot.py and
sampling.py; and the generated table's keys for the real wheels."""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import flashinfer_aot  # noqa: E402
import gen_stack_knowledge as gen  # noqa: E402

AOT_PY = """
from .jit.sampling import gen_sampling_module

def gen_fa3(dtype, has_sm90):
    yield gen_batch_prefill_module(backend="fa3")

def gen_attention(has_sm90, has_sm100):
    yield gen_single_decode_module()
    if has_sm90:
        yield from gen_fa3(1, has_sm90)
    if has_sm100:
        yield gen_trtllm_gen_fmha_module()

def gen_all_modules(add_moe, add_misc, sm_capabilities):
    jit_specs = []
    has_sm90 = sm_capabilities.get("sm90", False)
    has_sm100 = sm_capabilities.get("sm100", False)
    has_sm120 = sm_capabilities.get("sm120", False)
    has_sm121 = sm_capabilities.get("sm121", False)
    jit_specs += list(gen_attention(has_sm90, has_sm100))
    if add_moe:
        if has_sm120 or has_sm121:
            jit_specs.append(gen_cutlass_fused_moe_sm120_module())
        if not has_sm90:
            jit_specs.append(gen_fallback_module())
    if add_misc:
        jit_specs.append(gen_sampling_module())
    return jit_specs

def detect_sm_capabilities():
    def has_sm(compute, version):
        return True
    return {
        "sm90": has_sm("compute_90", "12.3"),
        "sm121": has_sm("compute_121", "12.9"),
    }
"""

SAMPLING_PY = """
from .jit.sampling import gen_sampling_module
from .api_logging import flashinfer_api

def get_sampling_module():
    return gen_sampling_module().build_and_load()

@flashinfer_api
def top_p_sampling_from_probs(probs, top_p):
    return _to_tensor_scalar_tuple(get_sampling_module(), probs, top_p)

def softmax(logits):
    return logits.softmax(-1)

class Sampler:
    def run(self, x):
        return self._module(x)

    def _module(self, x):
        return get_sampling_module()
"""

INIT_PY = "from . import sampling as sampling\nfrom .sampling import softmax as softmax\n"
API_LOGGING_PY = """
def flashinfer_api(fn):
    gen_api_log_stats_module()
    return fn
"""


def _wheel() -> zipfile.ZipFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("flashinfer/__init__.py", INIT_PY)
        archive.writestr("flashinfer/aot.py", AOT_PY)
        archive.writestr("flashinfer/sampling.py", SAMPLING_PY)
        archive.writestr("flashinfer/api_logging.py", API_LOGGING_PY)
        archive.writestr("flashinfer/jit/sampling.py", "def gen_sampling_module():\n    pass\n")
    buffer.seek(0)
    return zipfile.ZipFile(buffer)


def test_aot_conditions_follow_helpers_and_or_clauses():
    aot = flashinfer_aot.aot_modules(AOT_PY)
    assert aot["gen_sampling_module"] == [[]]  # every architecture of the build
    assert aot["gen_single_decode_module"] == [[]]
    assert aot["gen_batch_prefill_module"] == [[["sm90"]]]  # through gen_fa3 under has_sm90
    assert aot["gen_trtllm_gen_fmha_module"] == [[["sm100"]]]
    assert aot["gen_cutlass_fused_moe_sm120_module"] == [[["sm120", "sm121"]]]
    # a negated capability gates nothing the build could have: unconditional, not sm90
    assert aot["gen_fallback_module"] == [[]]


def test_capabilities_name_their_cuda():
    caps = flashinfer_aot.capabilities(AOT_PY)
    assert caps == {
        "sm121": {"compute": "compute_121", "cuda": "12.9"},
        "sm90": {"compute": "compute_90", "cuda": "12.3"},
    }


def test_uses_resolve_through_reexports_classes_and_not_decorators():
    reading = flashinfer_aot.read(
        _wheel(),
        [
            "flashinfer:sampling.top_p_sampling_from_probs",
            "flashinfer.sampling:Sampler",
            "flashinfer:softmax",
            "flashinfer:not_there",
        ],
    )
    uses = reading["uses"]
    # the decorator's own module is not the entry point's
    assert uses["flashinfer:sampling.top_p_sampling_from_probs"] == ["gen_sampling_module"]
    assert uses["flashinfer.sampling:Sampler"] == ["gen_sampling_module"]  # through self._module
    assert uses["flashinfer:softmax"] == []  # defined, loads no JIT module
    assert "flashinfer:not_there" not in uses
    assert reading["format"] == flashinfer_aot.AOT_FORMAT


def test_values_of_writes_aot_keys():
    reading = {
        "requires": {},
        "checks": {},
        "images": {},
        "wheel": "flashinfer_python-0.0.1-py3-none-any.whl",
        "aot": flashinfer_aot.read(_wheel(), ["flashinfer:sampling.top_p_sampling_from_probs"]),
    }
    values = gen.values_of(reading)
    assert values["aot:gen_sampling_module"] == {"when": [[]]}
    assert values["aot_capability:sm121"] == {"compute": "compute_121", "cuda": "12.9"}
    assert values["jit:flashinfer:sampling.top_p_sampling_from_probs"] == {
        "modules": ["gen_sampling_module"]
    }


def test_reading_is_redone_when_vllm_uses_more_names(monkeypatch):
    monkeypatch.setattr(gen, "used_names", lambda dist: {"flashinfer:a": set()})
    current = {"aot": {"format": flashinfer_aot.AOT_FORMAT, "asked": ["flashinfer:a"]}}
    assert not gen._lacks_aot("flashinfer-python", current)
    monkeypatch.setattr(
        gen, "used_names", lambda dist: {"flashinfer:a": set(), "flashinfer:b": set()}
    )
    assert gen._lacks_aot("flashinfer-python", current)
    assert not gen._lacks_aot("flashinfer-cubin", {})  # only flashinfer-python is read


def test_api_logging_is_not_followed():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("flashinfer/__init__.py", "")
        archive.writestr(
            "flashinfer/api_logging.py",
            "def flashinfer_api(fn):\n    return _stats()\n\n"
            "def _stats():\n    return gen_api_log_stats_module()\n",
        )
        archive.writestr(
            "flashinfer/norm.py",
            "from .api_logging import flashinfer_api\n\n"
            "def rmsnorm(x):\n    flashinfer_api(x)\n    return gen_norm_module()\n",
        )
    buffer.seek(0)
    reading = flashinfer_aot.read(zipfile.ZipFile(buffer), ["flashinfer.norm:rmsnorm"])
    assert reading["uses"]["flashinfer.norm:rmsnorm"] == ["gen_norm_module"]


def test_shipped_table_backs_the_sampler_claim():
    """ENV170 takes flashinfer-jit-cache as shipping the sampler's module: in every
    flashinfer-python version read, the names vLLM's sampler calls load only modules the AOT
    build yields for every architecture of the build."""
    from vllm_doctor.knowledge import load

    table = load("stack/flashinfer-python")
    for version in table.releases:
        values = table.at(version)
        sampler = values.get("jit:flashinfer:sampling.top_p_sampling_from_probs")
        assert sampler is not None, version
        assert "gen_sampling_module" in sampler["modules"], version
        for module in sampler["modules"]:
            assert [] in values[f"aot:{module}"]["when"], (version, module)
