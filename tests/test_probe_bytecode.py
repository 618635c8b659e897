"""The probe run's bytecode compiler (vllm_doctor/probes/bytecode.py), on small package trees."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from doctor_forks import doctor_run

from vllm_doctor.probes import bytecode
from vllm_doctor.probes.bytecode import Locator, compile_closure, imported_names, target_path

ROOT = Path(__file__).resolve().parent.parent


def names_of(source: str, module: str = "pkg.mod", is_package: bool = False) -> list[str]:
    return imported_names(ast.parse(textwrap.dedent(source)), module, is_package)


def test_imports_followed_are_those_that_run_as_the_module_loads():
    found = names_of("""
        import os, a.b.c
        from typing import TYPE_CHECKING
        from . import sibling
        from .sub import thing
        from .. import top_level_of_pkg
        try:
            import fast
        except ImportError:
            import slow
        class K:
            import in_class_body
            def method(self):
                import in_method
        def f():
            import in_function
        if TYPE_CHECKING:
            import only_for_types
        else:
            import at_run_time
        with ctx():
            from x.y import *
    """)
    assert {
        "os",
        "a.b.c",
        "typing",
        "typing.TYPE_CHECKING",
        "pkg",
        "pkg.sibling",
        "pkg.sub",
        "pkg.sub.thing",
        "fast",
        "slow",
        "in_class_body",
        "at_run_time",
        "x.y",
    } <= set(found)
    assert not {"in_method", "in_function", "only_for_types"} & set(found)
    # beyond the top-level package: the import would fail, nothing to follow
    assert "top_level_of_pkg" not in found and ".top_level_of_pkg" not in found


def test_relative_imports_of_a_package_are_relative_to_itself():
    assert names_of("from .core import x", module="pkg", is_package=True) == [
        "pkg.core",
        "pkg.core.x",
    ]
    assert names_of("from . import y", module="pkg.sub.mod") == ["pkg.sub", "pkg.sub.y"]


def make_tree(root: Path) -> None:
    files = {
        "pkgx/__init__.py": "from .core import VALUE\nfrom . import helpers\n",
        "pkgx/core.py": "import json, colorsys\nVALUE = json.dumps({'v': 42})\n",
        "pkgx/helpers.py": "def later():\n    import pkgx.lazy\n    return pkgx.lazy\n",
        "pkgx/lazy.py": "LAZY = 1\n",
        "pkgx/typed.py": "X = 1\n",
        "nspace/part.py": "import pkgx\n",  # a namespace package (no __init__)
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / "fastext.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")


def test_locator_finds_packages_modules_namespaces_and_skips_extensions(tmp_path):
    make_tree(tmp_path)
    locate = Locator([str(tmp_path)])
    assert locate("pkgx").source == str(tmp_path / "pkgx" / "__init__.py")
    assert locate("pkgx").is_package
    assert locate("pkgx.core").source == str(tmp_path / "pkgx" / "core.py")
    assert locate("pkgx.VALUE") is None  # an attribute, not a module
    assert locate("pkgx.core.json") is None  # core is a module: nothing below it
    ns = locate("nspace")
    assert ns is not None and ns.source is None and ns.is_package
    assert locate("nspace.part").source == str(tmp_path / "nspace" / "part.py")
    assert locate("sys") is None  # built in
    assert locate.submodules("pkgx") == ["pkgx.core", "pkgx.helpers", "pkgx.lazy", "pkgx.typed"]
    assert locate.submodules("nosuch") == []
    import importlib.machinery

    if ".cpython-311-x86_64-linux-gnu.so" in importlib.machinery.EXTENSION_SUFFIXES:
        assert locate("fastext") is None


def test_the_compiled_tree_is_what_python_imports_from(tmp_path):
    """Bytecode written for every module that loads with the package (not the lazy one),
    and read by a process under PYTHONPYCACHEPREFIX: the sources are replaced by junk of the
    same size and time stamp, and the import still gives the compiled values."""
    src = tmp_path / "src"
    make_tree(src)
    prefix = tmp_path / "pyc"
    locate = Locator([str(src), *sys.path])
    summary = compile_closure(["pkgx", "nspace.part"], str(prefix), jobs=2, locate=locate)
    assert summary["failed"] == 0 and summary["compiled"] >= 4, summary
    for rel in ("pkgx/__init__.py", "pkgx/core.py", "pkgx/helpers.py", "nspace/part.py"):
        assert Path(target_path(str(src / rel), str(prefix))).is_file(), rel
    assert not Path(target_path(str(src / "pkgx/lazy.py"), str(prefix))).exists()
    compile_closure(["pkgx.*"], str(prefix), jobs=1, locate=locate)  # every module of pkgx
    assert Path(target_path(str(src / "pkgx/lazy.py"), str(prefix))).is_file()
    # a standard module with bytecode beside its source is linked, not compiled
    import colorsys

    if bytecode._has_bytecode(colorsys.__file__):
        assert summary["linked"] >= 1
        assert Path(target_path(colorsys.__file__, str(prefix))).is_symlink()
    for rel in ("pkgx/__init__.py", "pkgx/core.py"):
        path = src / rel
        stat = path.stat()
        path.write_bytes(b"#" * (stat.st_size - 1) + b"!")  # a syntax error if it were compiled
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    env = dict(
        os.environ,
        PYTHONPATH=str(src),
        PYTHONPYCACHEPREFIX=str(prefix),
        PYTHONDONTWRITEBYTECODE="1",
    )
    run = subprocess.run(
        [sys.executable, "-c", "import pkgx; print(pkgx.VALUE)"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"v": 42}


def test_a_source_changed_after_compiling_is_compiled_again_by_the_importer(tmp_path):
    src = tmp_path / "src"
    make_tree(src)
    prefix = tmp_path / "pyc"
    compile_closure(["pkgx"], str(prefix), jobs=1, locate=Locator([str(src), *sys.path]))
    core = src / "pkgx" / "core.py"
    core.write_text("VALUE = 'changed after compiling, longer than before'\n", encoding="utf-8")
    env = dict(
        os.environ,
        PYTHONPATH=str(src),
        PYTHONPYCACHEPREFIX=str(prefix),
        PYTHONDONTWRITEBYTECODE="1",
    )
    run = subprocess.run(
        [sys.executable, "-c", "import pkgx; print(pkgx.VALUE)"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=tmp_path,
    )
    assert run.stdout.strip() == "changed after compiling, longer than before", run.stderr


def test_wanted_only_where_it_can_help(monkeypatch):
    python = sys.executable
    assert bytecode.wanted(python, {bytecode.SWITCH: "0"}) is False
    assert bytecode.wanted(python, {bytecode.SWITCH: "1"}) is True
    # the user's own bytecode tree, or another interpreter: left alone
    assert bytecode.wanted(python, {bytecode.SWITCH: "1", "PYTHONPYCACHEPREFIX": "/x"}) is False
    assert bytecode.wanted("/usr/bin/false", {bytecode.SWITCH: "1"}) is False
    # this test environment's torch (pip-installed) has its bytecode: nothing to do
    torch_init = Path(sys.prefix)
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
    except ImportError:
        spec = None
    if spec is None or not spec.origin:
        assert bytecode.wanted(python, {}) is False
        return
    torch_init = Path(spec.origin)
    has = bytecode._has_bytecode(str(torch_init)) and bytecode._has_bytecode(
        str(torch_init.parent / "_dynamo" / "__init__.py")
    )
    assert bytecode.wanted(python, {}) is (not has)


@pytest.mark.slow
def test_a_probe_run_compiles_its_imports_and_gives_the_same_results(tmp_path):
    """`probe --device cpu` with the compiler forced on: its summary in the JSON report, the
    same probe outcomes as without it."""
    outcomes = {}
    for switch in ("1", "0"):
        env = dict(
            os.environ,
            **{bytecode.SWITCH: switch},
            VLLM_DOCTOR_CACHE_DIR=str(tmp_path / switch),
            PYTHONPATH=str(ROOT),
        )
        env.pop("PYTHONPYCACHEPREFIX", None)
        # forked from the doctor's server (doctor_forks): the ranks it spawns start fresh
        run = doctor_run(
            "probe",
            "pp-handoff",
            "--device",
            "cpu",
            "--tp",
            "2",
            "--format",
            "json",
            env=env,
            timeout=240,
            cwd=tmp_path,
        )
        assert run.returncode in (0, 1), run.stderr[-2000:]
        doc = json.loads(run.stdout)
        outcomes[switch] = {r["name"]: r["status"] for r in doc["results"]}
        if switch == "1":
            info = doc["bytecode"]
            assert "torch" in info["roots"] and "vllm_doctor.probes.pp_handoff" in info["roots"]
            assert info.get("compiled", 0) + info.get("linked", 0) > 100 or info.get(
                "unfinished"
            ), info
        else:
            assert "bytecode" not in doc
    assert outcomes["1"] == outcomes["0"]


def test_target_path_is_where_the_importer_looks(tmp_path):
    import importlib.util

    source = str(tmp_path / "pkg" / "mod.py")
    before = sys.pycache_prefix
    sys.pycache_prefix = str(tmp_path / "pyc")
    try:
        expected = importlib.util.cache_from_source(source)
    finally:
        sys.pycache_prefix = before
    assert target_path(source, str(tmp_path / "pyc")) == expected


def test_existing_bytecode_outside_the_closure_is_linked_not_lost(tmp_path):
    """Under PYTHONPYCACHEPREFIX the importer looks only in the prefix tree: bytecode beside
    the sources (a hash-based one too) is linked there; a pyc whose source is gone is not."""
    import py_compile

    src = tmp_path / "src"
    (src / "lib").mkdir(parents=True)
    (src / "lib" / "__init__.py").write_text("")
    (src / "lib" / "used_later.py").write_text("X = 1\n")
    (src / "lib" / "orphan.py").write_text("Y = 1\n")
    for name in ("__init__", "used_later", "orphan"):
        py_compile.compile(
            str(src / "lib" / f"{name}.py"),
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
        )
    (src / "lib" / "orphan.py").unlink()
    assert bytecode._has_bytecode(str(src / "lib" / "used_later.py"))  # hash-based counts
    prefix = tmp_path / "pyc"
    linked = bytecode.link_existing([str(src)], str(prefix), skip=[str(prefix)])
    assert linked == 2
    target = Path(target_path(str(src / "lib" / "used_later.py"), str(prefix)))
    assert target.is_symlink() and target.resolve().parent.name == "__pycache__"
    assert not Path(target_path(str(src / "lib" / "orphan.py"), str(prefix))).exists()


def test_locator_prefers_an_extension_package_and_searches_a_sourceless_one(tmp_path):
    import importlib.machinery

    ext = importlib.machinery.EXTENSION_SUFFIXES[0]
    (tmp_path / "fast").mkdir()
    (tmp_path / "fast" / "__init__.py").write_text("")
    (tmp_path / "fast" / f"__init__{ext}").write_bytes(b"")
    (tmp_path / "frozen_pkg").mkdir()
    (tmp_path / "frozen_pkg" / "__init__.pyc").write_bytes(b"")
    (tmp_path / "frozen_pkg" / "part.py").write_text("")
    locate = Locator([str(tmp_path)])
    assert locate("fast") is None
    sourceless = locate("frozen_pkg")
    assert sourceless is not None and sourceless.source is None and sourceless.is_package
    assert locate("frozen_pkg.part").source == str(tmp_path / "frozen_pkg" / "part.py")


def test_usable_cpus_is_within_what_the_machine_has():
    assert 1 <= bytecode.usable_cpus() <= (os.cpu_count() or 1)
