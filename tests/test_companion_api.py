"""What vLLM uses of its companion packages (tools/extractors/companion_uses.py), what each
companion version exports (tools/companion_api.py, the api: keys gen_stack_knowledge writes),
and how facts (release.api.*) and the log reader (companion-api) judge them."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import companion_api  # noqa: E402
import gen_stack_knowledge as gen  # noqa: E402
from extractors import companion_uses  # noqa: E402
from wheelsrc import ReleaseSource  # noqa: E402

VLLM_FILES = {
    "v1/attention/backends/flashinfer.py": """
from flashinfer import BatchDecodeWithPagedKVCacheWrapper as Wrapper
from flashinfer.decode import trtllm_batch_decode_with_kv_cache
import flashinfer.sampling as fs

def build(buf):
    w = Wrapper(buf, "NHD", use_tensor_cores=True)
    Wrapper.plan(w, kv_data_type=None)
    trtllm_batch_decode_with_kv_cache(query=1, sinks=None)
    return fs.top_k_sampling_from_probs(1, 2, deterministic=True)

class Backend:
    def __init__(self, buf):
        self.decode_wrapper = Wrapper(buf)

    def build(self):
        self.decode_wrapper.plan(1, q_data_type=None)
""",
    "model_executor/model_loader/weight_utils.py": """
def load(path):
    import instanttensor
    with instanttensor.safe_open(path, framework="pt", copy=True) as f:
        return f
""",
    "utils/flashinfer.py": """
import importlib
try:
    from flashinfer.comm import allreduce_fusion
except ImportError:
    allreduce_fusion = None
cutlass_fused_moe = _lazy_import_wrapper("flashinfer.fused_moe", "cutlass_fused_moe")
flashinfer_sparse_decode = _lazy_import_wrapper(
    "flashinfer.decode", "trtllm_batch_decode_sparse_mla_dsv4", fallback_fn=None
)

def dg():
    mod = importlib.import_module("deep_gemm")
    return getattr(mod, "fp8_gemm_nt", None), mod.get_num_sms()
""",
    "models/deepseek_v4/nvidia/flashinfer_sparse.py": """
from vllm.utils.flashinfer import flashinfer_sparse_decode

def decode(q):
    return flashinfer_sparse_decode(query=q, swa_topk_lens=None)
""",
    "third_party/deep_gemm/__init__.py": "from deep_gemm.jit import build\n",
}


def _release(tmp_path: Path) -> ReleaseSource:
    base = tmp_path / "0.26.0" / "vllm"
    for rel, text in VLLM_FILES.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text, encoding="utf-8")
    return ReleaseSource(Version("0.26.0"), tmp_path / "0.26.0")


def test_uses_read_from_a_release(tmp_path):
    uses = companion_uses.extract(_release(tmp_path))
    wrapper = uses["flashinfer:BatchDecodeWithPagedKVCacheWrapper"]
    assert wrapper["keywords"] == ["use_tensor_cores"] and wrapper["guarded"] is False
    assert wrapper["package"] == "flashinfer-python"
    # Wrapper.plan(w, kv_data_type=...) and self.decode_wrapper.plan(..., q_data_type=...)
    # where self.decode_wrapper = Wrapper(...)
    assert uses["flashinfer:BatchDecodeWithPagedKVCacheWrapper.plan"]["keywords"] == [
        "kv_data_type",
        "q_data_type",
    ]
    assert uses["flashinfer.decode:trtllm_batch_decode_with_kv_cache"]["keywords"] == [
        "query",
        "sinks",
    ]
    # `import flashinfer.sampling as fs` binds fs to the submodule
    assert uses["flashinfer.sampling:top_k_sampling_from_probs"]["keywords"] == ["deterministic"]
    assert uses["instanttensor:safe_open"]["keywords"] == ["copy", "framework"]
    # fallbacks: try/except ImportError, a lazy import, getattr with a default
    assert uses["flashinfer.comm:allreduce_fusion"]["guarded"] is True
    assert uses["flashinfer.fused_moe:cutlass_fused_moe"]["guarded"] is True
    # a lazy wrapper made in vllm/utils/flashinfer.py, called elsewhere: its keywords are the
    # function's (a missing name falls back, a missing keyword does not)
    sparse = uses["flashinfer.decode:trtllm_batch_decode_sparse_mla_dsv4"]
    assert sparse["keywords"] == ["query", "swa_topk_lens"] and sparse["guarded"] is True
    # the files are where it is called; a name only looked up lazily keeps the lookup's file
    assert sparse["files"] == ["models/deepseek_v4/nvidia/flashinfer_sparse.py"]
    assert uses["flashinfer.fused_moe:cutlass_fused_moe"]["files"] == ["utils/flashinfer.py"]
    assert uses["deep_gemm:fp8_gemm_nt"]["guarded"] is True
    assert uses["deep_gemm:get_num_sms"] == {
        "package": None,
        "keywords": [],
        "files": ["utils/flashinfer.py"],
        "guarded": False,
    }
    # vendored copies are not uses; an alias's inner chain links are not uses of their own
    assert "deep_gemm.jit:build" not in uses
    assert not any(key.endswith(":sampling") for key in uses)


COMPANION = {
    "flashinfer/__init__.py": """
from .decode import BatchDecodeWithPagedKVCacheWrapper as BatchDecodeWithPagedKVCacheWrapper
from . import sampling
from .mla import *
""",
    "flashinfer/decode.py": """
class BatchDecodeWithPagedKVCacheWrapper:
    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_tensor_cores=False):
        pass
    def plan(self, indptr, *, q_data_type=None):
        pass

def trtllm_batch_decode_with_kv_cache(query, kv_cache, **kwargs):
    pass
""",
    "flashinfer/sampling.py": "def top_k_sampling_from_probs(probs, top_k, *, generator=None):\n"
    "    pass\n",
    "flashinfer/mla/__init__.py": "from ._core import trtllm_batch_decode_sparse_mla_dsv4\n",
    "flashinfer/mla/_core.py": "def trtllm_batch_decode_sparse_mla_dsv4(query, sinks=None):\n"
    "    pass\n",
    "flashinfer/lazy.py": "def __getattr__(name):\n    return name\n",
    "flashinfer/data/cutlass/tool.py": "def vendored():\n    pass\n",
}


@pytest.fixture
def api(tmp_path):
    path = tmp_path / "flashinfer_python-0.6.13-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in COMPANION.items():
            archive.writestr(name, text)
    with zipfile.ZipFile(path) as archive:
        return companion_api.api_in(archive, {"flashinfer"})


def test_companion_names_and_signatures(api):
    resolve = companion_api.resolve
    wrapper = resolve(api, "flashinfer:BatchDecodeWithPagedKVCacheWrapper")
    assert wrapper["params"] == ["float_workspace_buffer", "kv_layout", "use_tensor_cores"]
    assert companion_api.lacks(wrapper, ["use_tensor_cores", "backend"]) == ["backend"]
    plan = resolve(api, "flashinfer:BatchDecodeWithPagedKVCacheWrapper.plan")
    assert plan["params"] == ["indptr", "q_data_type"]
    # **kwargs accepts any keyword
    decode = resolve(api, "flashinfer.decode:trtllm_batch_decode_with_kv_cache")
    assert companion_api.lacks(decode, ["anything"]) == []
    # a submodule imported in __init__, and a name re-exported through a star import
    assert resolve(api, "flashinfer:sampling.top_k_sampling_from_probs")["params"] == [
        "probs",
        "top_k",
        "generator",
    ]
    assert companion_api.lacks(
        resolve(api, "flashinfer:trtllm_batch_decode_sparse_mla_dsv4"), ["swa_topk_lens"]
    ) == ["swa_topk_lens"]
    # missing in the package's own code: decided; lazy or elsewhere: not decided
    assert resolve(api, "flashinfer:top_p_renorm_probs") is companion_api.MISSING
    assert resolve(api, "flashinfer.comm:allreduce_fusion") is companion_api.MISSING
    assert resolve(api, "flashinfer.lazy:anything") is None
    assert resolve(api, "torch:compile") is None
    assert not any(module.startswith("flashinfer.data") for module in api)


def test_api_keys_of_a_version(api):
    used = {
        "flashinfer:BatchDecodeWithPagedKVCacheWrapper": {"backend"},
        "flashinfer:top_p_renorm_probs": set(),
        "flashinfer.lazy:anything": set(),
        "flashinfer.decode:trtllm_batch_decode_with_kv_cache": {"sinks"},
    }
    keys = gen.api_values({"api": api}, used)
    assert keys["api:flashinfer:top_p_renorm_probs"] == {"missing": True}
    assert keys["api:flashinfer:BatchDecodeWithPagedKVCacheWrapper"] == {
        "params": ["float_workspace_buffer", "kv_layout", "use_tensor_cores"],
        "kwargs": False,
    }
    assert keys["api:flashinfer.decode:trtllm_batch_decode_with_kv_cache"]["kwargs"] is True
    assert "api:flashinfer.lazy:anything" not in keys  # not decidable: no key


# -- over the shipped tables (read from the real wheels) -------------------------------------


def test_facts_name_the_keyword_and_the_versions_that_have_it():
    sys.path.insert(0, str(REPO / "tests"))
    from test_release_stack import facts_with, verdict

    facts = facts_with({"vllm.version": "0.26.0", "packages.instanttensor": "0.1.8"})
    (line,) = facts.value("release.api.missing")
    assert line.startswith("instanttensor 0.1.8: instanttensor.safe_open takes no keyword copy")
    assert "instanttensor 0.1.9–" in line
    assert "instanttensor>=0.1.9" in facts.value("release.api.fix")
    assert facts.value("release.api.model_code_only") is False
    # one cause, one finding: ENV102 leaves instanttensor to ENV104
    assert verdict("ENV104", facts) == "applies"
    assert verdict("ENV102", facts) == "not-applies"
    # the companions of known version are judged; the others are named as not judged
    fine = facts_with({"vllm.version": "0.26.0", "packages.instanttensor": "0.1.9"})
    assert fine.value("release.api.missing") == []
    assert "not judged: flashinfer-python" in fine.get("release.api.missing").detail
    # a companion the release names no version of (LMCache) is never judged: cannot decide
    lmcache = facts_with({"vllm.version": "0.20.1", "packages.lmcache": "0.5.0"})
    assert lmcache.value("release.api.missing") is None
    assert "lmcache 0.5.0" in lmcache.why_missing("release.api.missing")
    # what the release's own pin lacks too is not the install's doing (0.24.0's DeepSeek-V4
    # decode passes keywords its pin 0.6.12 lacks)
    at_pin = facts_with({"vllm.version": "0.24.0", "packages.flashinfer-python": "0.6.12"})
    assert at_pin.value("release.api.missing") == []
    behind = facts_with({"vllm.version": "0.26.0", "packages.flashinfer-python": "0.6.13"})
    assert any("swa_topk_lens" in line for line in behind.value("release.api.missing"))


def test_reader_names_package_releases_and_versions():
    from vllm_doctor.logreaders import read_log

    reading = read_log(
        "companion-api",
        "TypeError: trtllm_batch_decode_sparse_mla_dsv4() got an unexpected keyword argument "
        "'swa_topk_lens'",
        "0.24.0",
    )
    assert reading is not None
    assert "flashinfer-python" in reading.cause and "0.24.0" in reading.cause
    assert any(fix.startswith("pip install 'flashinfer-python") for fix in reading.fixes)
    assert (
        read_log("companion-api", "TypeError: f() got an unexpected keyword argument 'x'", None)
        is None
    )


def test_a_what_if_release_does_not_judge_this_machines_packages():
    from vllm_doctor.facts.collect import CollectOptions, collect_facts
    from vllm_doctor.facts.model import Facts, Source

    given = Facts()
    given.set("vllm.version", "0.26.0", Source.USER, "--vllm-version")
    given.set("packages.instanttensor", "0.1.8", Source.MACHINE, "installed here")
    facts = collect_facts(
        CollectOptions(
            serve_string="vllm serve Qwen/Qwen3-8B",
            probe_machine=False,
            environ={},
            given=given,
        )
    )
    assert facts.value("release.api.missing") is None
    assert "what-if" in facts.why_missing("release.api.missing")
