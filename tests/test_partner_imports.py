"""What a companion imports from the package it plugs into (tools/partner_imports.py, the
stack_imports table) and how facts/release_partner.py judges it (ENV120, ENV121), over the
shipped table read from the real LMCache, quack-kernels, vLLM and CuTe DSL wheels."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

from judging import facts_with as judged_facts
from judging import verdict
from packaging.version import Version

from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES
from vllm_doctor.facts.model import Facts
from vllm_doctor.knowledge import load

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import companion_api  # noqa: E402
import partner_imports  # noqa: E402


def facts_with(values: dict, serve: str | None = None) -> Facts:
    return judged_facts(values, serve)


# -- the generator, on small archives --------------------------------------------------------


def write_zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def test_companion_reading_keeps_unguarded_module_level_imports(tmp_path: Path):
    wheel = write_zip(
        tmp_path / "comp.whl",
        {
            "comp/__init__.py": "",
            "comp/connector.py": (
                "from vllm.config import VllmConfig\n"
                "from comp.helpers import edit\n"
                "try:\n    from vllm.base import SupportsHMA\nexcept ImportError:\n    pass\n"
                "if True:\n    from vllm.maybe import Conditional\n"
                "def f():\n    from vllm.lazy import Lazy\n"
            ),
            "comp/helpers.py": "from vllm.v1.kv import KVCacheSpecKind\nedit = 1\n",
            "comp/tests/test_x.py": "from vllm.testing import Nope\n",
        },
    )
    modules = partner_imports.read_companion(wheel, "comp", "vllm")
    assert modules["comp.connector"]["uses"] == ["vllm.config:VllmConfig"]
    assert "comp.helpers" in modules["comp.connector"]["imports"]
    assert "comp.tests.test_x" not in modules
    found = partner_imports.closure(modules, "comp.connector")
    assert found == {
        "vllm.config:VllmConfig": "comp/connector.py",
        "vllm.v1.kv:KVCacheSpecKind": "comp/helpers.py",
    }


def test_partner_names_under_type_checking_and_compiled_modules(tmp_path: Path):
    archive = write_zip(
        tmp_path / "4.5.2.zip",
        {
            "nvidia_cutlass_dsl/python_packages/cutlass/__init__.py": "",
            "nvidia_cutlass_dsl/python_packages/cutlass/base_dsl/__init__.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .arch import Arch\n"
            ),
            "nvidia_cutlass_dsl/python_packages/cutlass/base_dsl/arch.py": "class Arch: pass\n",
            "nvidia_cutlass_dsl/python_packages/cutlass/_mlir/dialects/__init__.py": "",
            "nvidia_cutlass_dsl/python_packages/cutlass/_mlir/dialects/llvm.cpython-312-x86_64"
            "-linux-gnu.so": "",
        },
    )
    with zipfile.ZipFile(archive) as opened:
        api = partner_imports.LazyApi(opened, "cutlass")
        # only under TYPE_CHECKING: gone at run time (CuTe DSL 4.5's base_dsl and Arch)
        assert companion_api.resolve(api, "cutlass.base_dsl:Arch") is companion_api.MISSING
        assert companion_api.resolve(api, "cutlass.base_dsl.arch:Arch")["class"]
        # a compiled submodule exists though no .py names it
        assert companion_api.resolve(api, "cutlass._mlir.dialects:llvm") is not (
            companion_api.MISSING
        )
        assert companion_api.resolve(api, "cutlass.nothing:x") is companion_api.MISSING


# -- the shipped table -------------------------------------------------------------------------


def test_table_reads_the_lmcache_and_quack_imports_the_upstream_threads_name():
    table = load("stack_imports")
    companions = table.meta["companions"]
    assert companions["lmcache"]["partner"] == "vllm"
    assert companions["quack-kernels"]["partner"] == "nvidia-cutlass-dsl"
    # LMCache issue 3957: 0.5.0's generic MP connector imports KVCacheSpecKind
    spans = table.raw_spans("lmcache|lmcache.integration.vllm.lmcache_mp_connector")
    at_050 = next(s for s in spans if Version(s["first"]) <= Version("0.5.0") <= Version(s["last"]))
    assert "vllm.v1.kv_cache_interface:KVCacheSpecKind" in at_050["value"]["missing"]
    # vLLM issue 47570: quack 0.3.10-0.4.0 import Arch from cutlass.base_dsl; 4.5.x lack it
    spans = table.raw_spans("quack-kernels|quack.compile_utils")
    missing = {
        (s["first"], s["last"]): s["value"]["missing"].get("cutlass.base_dsl:Arch") for s in spans
    }
    # (4.6.x, whose Python DSL is in nvidia-cutlass-dsl-libs-core, lack it too; 4.7.0 has it)
    assert [r for r in missing[("0.3.10", "0.4.0")] if r[0] == "4.5.0"] == [["4.5.0", "4.6.3"]]
    assert all(v is None for k, v in missing.items() if k[0] in ("0.4.1", "0.3.0"))
    # quack PR 165: 0.5.0 annotates a def with cute.core.ThrMma, which CuTe DSL 4.6.0 removed;
    # read when the module is imported (an attribute, not an import), gone from quack 0.6
    spans = table.raw_spans("quack-kernels|quack.layout_utils")
    at = {(s["first"], s["last"]): s["value"] for s in spans}
    value = next(v for (a, b), v in at.items() if Version(a) <= Version("0.5.0") <= Version(b))
    assert value["missing"]["cutlass.cute:core.ThrMma"] == [["4.6.0", "4.8.1"]]
    assert value["files"]["cutlass.cute:core.ThrMma"] == "quack/layout_utils.py"
    assert "cutlass.cute:core.ThrMma" in value["reads"]
    newer = [v for (a, _b), v in at.items() if Version(a) >= Version("0.6.0")]
    assert not any("cutlass.cute:core.ThrMma" in v["missing"] for v in newer)


# -- the facts and the rules -------------------------------------------------------------------


def test_lmcache_050_on_0201_without_serve_line_is_at_risk_only():
    facts = facts_with({"vllm.version": "0.20.1", "packages.lmcache": "0.5.0"})
    assert facts.value("release.stack.partner_imports_missing") == []
    risky = facts.value("release.stack.partner_imports_at_risk")
    assert any("KVCacheSpecKind" in line and "vLLM 0.20.1 lacks" in line for line in risky)
    assert "0.22.0" in risky[0]  # the releases that have it, read from the wheels
    assert "lmcache==" in facts.value("release.stack.partner_imports_fix")
    assert verdict("ENV121", facts) == APPLIES
    assert verdict("ENV120", facts) == NOT_APPLIES


def test_lmcache_generic_connector_named_on_0201_is_an_error():
    serve = (
        "vllm serve deepseek-ai/DeepSeek-V4-Flash --kv-transfer-config "
        '\'{"kv_connector":"LMCacheMPConnector",'
        '"kv_connector_module_path":"lmcache.integration.vllm.lmcache_mp_connector"}\''
    )
    facts = facts_with({"vllm.version": "0.20.1", "packages.lmcache": "0.5.0"}, serve)
    missing = facts.value("release.stack.partner_imports_missing")
    assert any("kv_cache_group_edits.py imports KVCacheSpecKind" in line for line in missing)
    assert verdict("ENV120", facts) == APPLIES
    assert verdict("ENV121", facts) == NOT_APPLIES


def test_lmcache_not_configured_is_not_loaded():
    facts = facts_with(
        {"vllm.version": "0.15.0", "packages.lmcache": "0.3.7"}, "vllm serve Qwen/Qwen3-8B"
    )
    assert facts.value("release.stack.partner_imports_missing") == []
    assert facts.value("release.stack.partner_imports_at_risk") == []


def test_vllm_build_between_releases_is_not_judged():
    facts = facts_with({"vllm.version": "0.20.2rc1.dev5+gabc", "packages.lmcache": "0.5.0"})
    assert facts.get("release.stack.partner_imports_at_risk") is None or not facts.value(
        "release.stack.partner_imports_at_risk"
    )


def test_quack_unknown_names_the_versions_the_release_allows_that_fail():
    facts = facts_with({"vllm.version": "0.24.0", "packages.nvidia-cutlass-dsl": "4.5.2"})
    risky = facts.value("release.stack.partner_imports_at_risk")
    assert len(risky) == 1
    assert risky[0].startswith("quack-kernels 0.3.10–0.4.0 ")
    assert "cutlass.base_dsl.Arch of nvidia-cutlass-dsl 4.5.2" in risky[0]
    assert facts.value("release.stack.partner_imports_fix").startswith(
        "pip install 'quack-kernels=="
    )


def test_quack_known_bad_pair_defers_to_the_curated_rule():
    facts = facts_with(
        {
            "vllm.version": "0.24.0",
            "packages.nvidia-cutlass-dsl": "4.5.2",
            "packages.quack-kernels": "0.4.0",
        },
        "vllm serve Qwen/Qwen3-8B",
    )
    assert any("Arch" in line for line in facts.value("release.stack.partner_imports_missing"))
    # the curated rule names this pair; ENV120 defers to it (one cause, one finding)
    assert verdict("ENV012", facts) == APPLIES
    assert verdict("ENV120", facts) == APPLIES  # alone, before the report's deferral


def test_quack_050_reading_thrmma_on_cutlass_dsl_460_is_an_error():
    """vLLM 0.26.0 pins nvidia-cutlass-dsl==4.6.0 and allows quack-kernels>=0.4.0: 0.5.0 fails
    at import (quack PR 165), 0.6.1 reads cute.ThrMma and imports (marin PR 7803)."""
    serve = "vllm serve Qwen/Qwen3-8B"
    pins = {"vllm.version": "0.26.0", "packages.nvidia-cutlass-dsl": "4.6.0"}
    facts = facts_with({**pins, "packages.quack-kernels": "0.5.0"}, serve)
    missing = facts.value("release.stack.partner_imports_missing")
    assert any(
        "quack/layout_utils.py reads cutlass.cute.core.ThrMma when it is imported "
        "(AttributeError), which nvidia-cutlass-dsl 4.6.0 lacks" in line
        for line in missing
    )
    assert verdict("ENV120", facts) == APPLIES
    facts = facts_with({**pins, "packages.quack-kernels": "0.6.1"}, serve)
    assert facts.value("release.stack.partner_imports_missing") == []
    assert verdict("ENV120", facts) == NOT_APPLIES
    # the quack version unknown: the allowed versions that fail are named, a warning
    facts = facts_with(pins, serve)
    risky = facts.value("release.stack.partner_imports_at_risk")
    assert risky and risky[0].startswith("quack-kernels 0.4.0–0.5.0 ")
    assert "cutlass.cute.core.ThrMma" in risky[0]
    assert verdict("ENV121", facts) == APPLIES


# -- reading what a module evaluates when it is imported ------------------------------------------


def reads(source: str) -> set[str]:
    import ast

    return partner_imports.import_time_reads(ast.parse(source), "comp.m", False, "cutlass")


def test_import_time_reads_are_signatures_decorators_class_bodies_and_values():
    assert reads(
        "import cutlass.cute as cute\n"
        "from cutlass import base_dsl\n"
        "import cutlass\n"
        "def f(x: cute.core.ThrMma, y=cutlass.Float32) -> cute.Tensor:\n"
        "    return cute.never_read_body\n"
        "@cute.jit\n"
        "def g(): pass\n"
        "class K(base_dsl.Base):\n"
        "    attr = cute.arch.fmin\n"
        "    def m(self, t: cute.ThrCopy): return cute.not_in_method_body\n"
        "TABLE = {1: cute.nvgpu.CopyOp}\n"
        "lazy = lambda: cute.not_called\n"
    ) == {
        "cutlass.cute:core.ThrMma",
        "cutlass:Float32",
        "cutlass.cute:Tensor",
        "cutlass.cute:jit",
        "cutlass:base_dsl.Base",
        "cutlass.cute:arch.fmin",
        "cutlass.cute:ThrCopy",
        "cutlass.cute:nvgpu.CopyOp",
    }


def test_import_time_reads_leave_out_lazy_annotations_and_guarded_code():
    # `from __future__ import annotations` keeps annotations as strings
    assert reads(
        "from __future__ import annotations\n"
        "import cutlass.cute as cute\n"
        "def f(x: cute.core.ThrMma = cute.default): pass\n"
    ) == {"cutlass.cute:default"}
    # a partner module imported under try, and code under if/try: not judged
    assert (
        reads(
            "try:\n    import cutlass.cute as cute\nexcept ImportError:\n    cute = None\n"
            "def f(x: cute.core.ThrMma): pass\n"
        )
        == set()
    )
    assert (
        reads(
            "import cutlass.cute as cute\n"
            "if cute.HAS:\n    X = cute.maybe\n"
            "try:\n    Y = cute.other\nexcept AttributeError:\n    Y = None\n"
        )
        == set()
    )


def test_kept_partner_archives_name_the_distributions_they_were_made_from(tmp_path: Path):
    partner = partner_imports.PARTNERS["quack-kernels"]
    assert partner_imports.layout(partner, "4.5.3") == ("nvidia-cutlass-dsl-libs-base",)
    assert partner_imports.layout(partner, "4.6.0") == (
        "nvidia-cutlass-dsl-libs-base",
        "nvidia-cutlass-dsl-libs-core",
    )
    folder = tmp_path / "nvidia-cutlass-dsl" / "code"
    folder.mkdir(parents=True)
    write_zip(folder / "4.5.3.zip", {"x/cutlass/__init__.py": ""})  # before the comment
    write_zip(folder / "4.6.0.zip", {"x/cutlass/__init__.py": ""})  # libs-base alone: stale
    with zipfile.ZipFile(folder / "4.6.1.zip", "w") as archive:
        archive.comment = b"nvidia-cutlass-dsl-libs-base,nvidia-cutlass-dsl-libs-core"
        archive.writestr("x/cutlass/__init__.py", "")
    assert list(partner_imports.partner_archives(tmp_path, partner)) == ["4.5.3", "4.6.1"]


def test_generate_folds_each_module_over_the_companion_versions(tmp_path: Path, monkeypatch):
    """Two companion versions against three partner wheels: the name the newer companion
    imports exists only in the newest partner, and the table says so per module."""
    root = tmp_path / "wheels"
    (root / "part").mkdir(parents=True)
    for version, names in (("1.0", "A = 1\n"), ("1.1", "A = 1\n"), ("2.0", "A = 1\nB = 2\n")):
        write_zip(
            root / "part" / f"part-{version}-py3-none-any.whl",
            {"part/__init__.py": "", "part/api.py": names},
        )
    wheels = {
        "0.1": write_zip(
            tmp_path / "comp-0.1.whl",
            {"comp/__init__.py": "", "comp/conn.py": "from part.api import A\n"},
        ),
        "0.2": write_zip(
            tmp_path / "comp-0.2.whl",
            {
                "comp/__init__.py": "",
                "comp/conn.py": "from part.api import A\nfrom comp.edits import x\n",
                "comp/edits.py": "from part.api import B\nx = 1\n",
            },
        ),
    }
    monkeypatch.setitem(
        partner_imports.PARTNERS,
        "comp",
        # comp.conn imports part.api's A, the "connector base": a module a user may name
        partner_imports.Partner(
            "comp", "part", "part", "wheels", entry_prefixes=("comp.",), entry_base="A"
        ),
    )
    table = partner_imports.generate(root, "comp", wheels, set(), fetch=False)
    assert table is not None
    assert table["partner_releases"] == ["1.0", "1.1", "2.0"]
    assert table["releases"] == ["0.1", "0.2"]
    assert table["connectors"] == ["comp.conn"]  # comp.edits imports no A
    # 0.1 imports only A, which every partner has: no key for it
    assert table["entries"]["comp.conn"] == [
        {
            "first": "0.2",
            "last": "0.2",
            "value": {
                "missing": {"part.api:B": [["1.0", "1.1"]]},
                "files": {"part.api:B": "comp/edits.py"},
            },
        }
    ]
