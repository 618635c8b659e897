"""Bytecode for the probe processes where the installed packages ship without it.

An image built with ``PYTHONDONTWRITEBYTECODE=1``, or by an installer that does not compile
(uv's default), holds torch as sources only. Then every probe process compiles torch's Python
sources as it imports them, one file after another on one core: on an H200 node 3.4 s of
``import torch`` and 4-5 s more for ``torch._dynamo``, paid again by every rank and by every
isolated sub-check. Instead the run compiles them once, on the idle cores, into a bytecode
tree inside its run directory, and starts the probe processes with ``PYTHONPYCACHEPREFIX``
naming that tree. Nothing waits for it: a process that reaches a module before its bytecode
is written compiles that module itself, as it would have anyway.

What is compiled: the modules the probe processes import as they load, found by following the
``import`` statements of the sources from the roots (the worker, torch, and what the selected
sub-checks import; ``package.*`` for every module of a package that is loaded by name).
Function bodies and ``if TYPE_CHECKING:`` blocks are not followed; extension modules, built-in
and frozen modules have no source. Under ``PYTHONPYCACHEPREFIX`` Python reads bytecode only
from the prefix tree, so a module whose bytecode already sits beside its source is linked into
the tree rather than compiled, and so is all the bytecode of the standard library, which other
modules import from inside functions. The files are the ones Python writes itself (PEP 552,
checked against the source's time stamp and size), so one that is stale or missing only costs
the importing process that module's compile.

Nothing outside the run directory is written, and nothing is done where torch has its
bytecode (``wanted``); ``VLLM_DOCTOR_PROBE_BYTECODE=0`` turns it off, ``=1`` forces it.
"""

from __future__ import annotations

import argparse
import ast
import importlib.machinery
import importlib.util
import json
import marshal
import os
import sys
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

SWITCH = "VLLM_DOCTOR_PROBE_BYTECODE"
# the roots every probe process imports; sub-checks add their own (Part.imports)
ROOTS = ("vllm_doctor.probes.worker", "torch", "torch.distributed")
# compiling processes: fewer idle cores than MIN_JOBS and it would only slow the probes down
MIN_JOBS, MAX_JOBS = 4, 12


def _has_bytecode(source: str) -> bool:
    """Whether the bytecode beside ``source`` (``__pycache__``) is there and current: a
    time-stamp pyc that matches the source's time and size, or a hash-based one (PEP 552, as
    pip and compileall write under SOURCE_DATE_EPOCH; the importer checks its hash)."""
    try:
        cached = importlib.util.cache_from_source(source)
        with open(cached, "rb") as fh:
            header = fh.read(16)
        stat = os.stat(source)
    except (OSError, ValueError, NotImplementedError):
        return False
    if len(header) != 16 or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags = int.from_bytes(header[4:8], "little")
    if flags & 1:
        return True
    return (
        flags == 0
        and int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF
    )


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask, within a cgroup's CPU quota
    (taskset, Slurm and container limits make os.cpu_count() too many)."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as fh:  # cgroup v2
            quota, period = fh.read().split()[:2]
        if quota != "max" and int(period) > 0:
            count = min(count, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, count)


def wanted(python: str, environ: dict[str, str] | None = None) -> bool:
    """Whether the probe processes would compile torch's sources as they import them.

    Only for the interpreter this process runs (another one's files are not looked up from
    here), not where the user places bytecode already (``PYTHONPYCACHEPREFIX``), and not
    where torch and ``torch._dynamo`` have current bytecode beside their sources.
    """
    env = os.environ if environ is None else environ
    switch = env.get(SWITCH, "")
    if switch == "0":
        return False
    if env.get("PYTHONPYCACHEPREFIX") or sys.pycache_prefix is not None:
        return False
    if os.path.abspath(python) != os.path.abspath(
        sys.executable
    ):  # a venv's python is not its base's
        return False
    if switch == "1":
        return True
    try:
        spec = importlib.util.find_spec("torch")  # finds the package; imports nothing
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.origin or not spec.origin.endswith("__init__.py"):
        return False
    package = os.path.dirname(spec.origin)
    return not all(
        _has_bytecode(os.path.join(package, *sub, "__init__.py")) for sub in ((), ("_dynamo",))
    )


# -- finding the modules ------------------------------------------------------------------------


@dataclass(frozen=True)
class Module:
    name: str
    source: str | None  # None: a namespace package (directories only)
    search: tuple[str, ...] = ()  # where its submodules are, for a package

    @property
    def is_package(self) -> bool:
        return bool(self.search)


class Locator:
    """Module name → source file, the way the path finder looks them up (no import)."""

    def __init__(self, path: Iterable[str]):
        self.path = [os.path.abspath(entry or os.curdir) for entry in path]
        self.found: dict[str, Module | None] = {}
        self.extensions = tuple(importlib.machinery.EXTENSION_SUFFIXES)

    def __call__(self, name: str) -> Module | None:
        if name not in self.found:
            self.found[name] = self._locate(name)
        return self.found[name]

    def submodules(self, name: str) -> list[str]:
        """The modules and packages directly inside package ``name`` that have a source."""
        package = self(name)
        found = []
        for directory in package.search if package is not None else ():
            try:
                entries = sorted(os.listdir(directory))
            except OSError:
                continue
            for entry in entries:
                stem, dot, ext = entry.partition(".")
                if (
                    stem.isidentifier()
                    and stem != "__init__"
                    and (
                        ext == "py"
                        or (
                            not dot
                            and os.path.isfile(os.path.join(directory, entry, "__init__.py"))
                        )
                    )
                ):
                    found.append(f"{name}.{stem}")
        return found

    def _locate(self, name: str) -> Module | None:
        parent, _, leaf = name.rpartition(".")
        if parent:
            outer = self(parent)
            if outer is None or not outer.is_package:
                return None
            directories = outer.search
        else:
            if name in sys.builtin_module_names:
                return None
            directories = tuple(self.path)
        portions = []
        for directory in directories:
            base = os.path.join(directory, leaf)
            if os.path.isdir(base):
                if any(os.path.isfile(os.path.join(base, "__init__" + s)) for s in self.extensions):
                    return None
                init = os.path.join(base, "__init__.py")
                if os.path.isfile(init):
                    return Module(name, init, (base,))
                if os.path.isfile(init + "c"):  # sourceless: nothing to compile, submodules to find
                    return Module(name, None, (base,))
                portions.append(base)
            if any(os.path.isfile(base + s) for s in self.extensions):
                return None
            if os.path.isfile(base + ".py"):
                return Module(name, base + ".py")
        if portions:  # a namespace package: nothing to compile, its portions to search
            return Module(name, None, tuple(portions))
        return None


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_names(tree: ast.Module, module: str, is_package: bool) -> list[str]:
    """The absolute names of what a module's import statements may load as it executes:
    statements at module level and in class bodies, in ``if``/``try``/``with`` blocks, but
    not in function bodies or under ``if TYPE_CHECKING:``. ``from a import b`` gives ``a``
    and ``a.b`` (``b`` may be a submodule or an attribute: the locator tells)."""
    package = module if is_package else module.rpartition(".")[0]
    names: list[str] = []
    stack: list[ast.AST] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                if not anchor:
                    continue  # beyond the top-level package: the import would fail too
                base = f"{anchor}.{base}" if base else anchor
            if not base:
                continue
            names.append(base)
            names.extend(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.If) and _type_checking(node.test):
            stack.extend(reversed(node.orelse))
        else:
            stack.extend(
                reversed(
                    [
                        child
                        for child in ast.iter_child_nodes(node)
                        if isinstance(child, (ast.stmt, ast.excepthandler))
                    ]
                )
            )
    return names


# -- compiling ------------------------------------------------------------------------------


_PYC = f".{sys.implementation.cache_tag}.pyc"


def target_path(source: str, prefix: str) -> str:
    """Where Python looks for the bytecode of ``source`` under ``PYTHONPYCACHEPREFIX=prefix``
    (importlib's cache_from_source with a prefix, without setting sys.pycache_prefix here)."""
    head, tail = os.path.split(source)
    if not os.path.isabs(head):
        head = os.path.join(os.getcwd(), head)
    stem = tail.rpartition(".")[0] or tail
    return os.path.join(prefix, head.lstrip(os.sep), stem + _PYC)


# not walked for bytecode to link: installed packages (walked only through the closure) and
# the standard library's own test suites
_NOT_WALKED = frozenset(
    {"site-packages", "dist-packages", "test", "tests", "idlelib", "turtledemo"}
)


def standard_library() -> list[str]:
    import sysconfig

    paths = sysconfig.get_paths()
    return list(dict.fromkeys(p for p in (paths.get("stdlib"), paths.get("platstdlib")) if p))


def link_existing(roots: Iterable[str], prefix: str, skip: Iterable[str] = ()) -> int:
    """Link every current-interpreter bytecode file that sits beside its source under
    ``roots`` (the standard library) into the prefix tree, so that the modules the import
    closure misses (imports inside functions, start-up hooks) keep their bytecode under
    PYTHONPYCACHEPREFIX. The importer checks each against its source, as always. Returns how
    many were linked."""
    skip = {os.path.abspath(p) for p in skip}
    linked = 0
    seen: set[str] = set()
    for given in roots:
        root = os.path.abspath(given or os.curdir)
        if not os.path.isdir(root) or root in skip:
            continue
        for directory, subdirs, files in os.walk(root):
            real = os.path.realpath(directory)
            if real in seen:
                subdirs[:] = []
                continue
            seen.add(real)
            has_cache = "__pycache__" in subdirs
            subdirs[:] = [
                d
                for d in subdirs
                if d != "__pycache__"
                and d not in _NOT_WALKED
                and os.path.join(directory, d) not in skip
            ]
            if not has_cache:
                continue
            cache = os.path.join(directory, "__pycache__")
            try:
                names = os.listdir(cache)
            except OSError:
                continue
            sources = set(files)
            for name in names:
                if not name.endswith(_PYC):
                    continue
                stem = name[: -len(_PYC)]
                if stem + ".py" not in sources:
                    continue
                target = target_path(os.path.join(directory, stem + ".py"), prefix)
                try:
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    os.symlink(os.path.join(cache, name), target)
                    linked += 1
                except FileExistsError:  # compiled or linked by the closure already
                    pass
                except OSError:
                    pass
    return linked


def _write(path: str, data: bytes) -> None:
    """Atomically: a process importing the module sees the whole file or none; the partial
    file is created new (never through a link that was there)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = f"{path}.{os.getpid()}.tmp"
    fd = os.open(
        partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644
    )
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(partial, path)


def compile_module(module: Module, prefix: str) -> tuple[str, list[str]]:
    """Write one module's bytecode under ``prefix``; return how (``compiled``, ``linked`` to
    the bytecode beside the source, ``failed``) and the names it imports."""
    source = module.source
    assert source is not None
    try:
        stat = os.stat(source)
        with open(source, "rb") as fh:
            text = fh.read()
        with warnings.catch_warnings():  # the importing process warns, if anything
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=source)
            names = imported_names(tree, module.name, module.is_package)
            target = target_path(source, prefix)
            if _has_bytecode(source):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                link = f"{target}.{os.getpid()}.tmp"
                os.symlink(importlib.util.cache_from_source(source), link)
                os.replace(link, target)
                return "linked", names
            code = compile(tree, source, "exec", dont_inherit=True)
        header = (
            importlib.util.MAGIC_NUMBER
            + (0).to_bytes(4, "little")
            + (int(stat.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
            + (stat.st_size & 0xFFFFFFFF).to_bytes(4, "little")
        )
        _write(target, header + marshal.dumps(code))
        return "compiled", names
    except Exception:
        return "failed", []


def _die_with_coordinator() -> None:
    from vllm_doctor.probes.worker import die_with_parent

    die_with_parent(os.getppid())


def compile_closure(
    roots: Iterable[str],
    prefix: str,
    jobs: int,
    locate: Locator | None = None,
    search_path: list[str] | None = None,
) -> dict[str, object]:
    """Compile the modules reachable from ``roots`` with ``jobs`` processes, and link the
    bytecode that exists beside the sources under ``search_path`` (default: the standard
    library); a summary."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    started = time.perf_counter()
    locate = locate or Locator(sys.path)
    counts = {"compiled": 0, "linked": 0, "failed": 0}
    seen: set[str] = set()
    pending = set()

    def visit(names: Iterable[str], pool) -> None:
        for name in names:
            if name.endswith(".*"):  # every module of a package (one it loads by name in a loop)
                visit(locate.submodules(name[:-2]), pool)
                continue
            if name in seen:
                continue
            seen.add(name)
            parent = name.rpartition(".")[0]
            if parent:  # importing a.b.c runs a and a.b first
                visit([parent], pool)
            if importlib.machinery.FrozenImporter.find_spec(name) is not None:
                continue  # in the interpreter itself
            module = locate(name)
            if module is not None and module.source is not None:
                pending.add(pool.submit(compile_module, module, prefix))

    import threading

    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    existing: dict[str, float] = {}

    def link_the_rest() -> None:  # beside the compiling: mostly system calls
        t0 = time.perf_counter()
        existing["linked"] = link_existing(
            search_path if search_path is not None else standard_library(), prefix, skip=[prefix]
        )
        existing["seconds"] = round(time.perf_counter() - t0, 3)

    with ProcessPoolExecutor(
        max_workers=max(1, jobs), mp_context=context, initializer=_die_with_coordinator
    ) as pool:
        visit(roots, pool)  # forks the compiling processes before the thread starts
        linker = threading.Thread(target=link_the_rest, name="link-existing-bytecode", daemon=True)
        linker.start()
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                pending.discard(future)
                how, names = future.result()
                counts[how] += 1
                visit(names, pool)
        linker.join()
    return dict(
        counts,
        seconds=round(time.perf_counter() - started, 3),
        jobs=jobs,
        roots=list(roots),
        existing_linked=existing.get("linked", 0),
        existing_link_s=existing.get("seconds"),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vllm_doctor.probes.bytecode", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--prefix", required=True, help="the bytecode tree (PYTHONPYCACHEPREFIX)")
    parser.add_argument("--roots", required=True, help="comma-separated module names")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--summary", help="write the counts and the time here (JSON)")
    args = parser.parse_args(argv)
    from vllm_doctor.probes.worker import die_with_parent

    die_with_parent()
    summary = compile_closure([r for r in args.roots.split(",") if r], args.prefix, args.jobs)
    if args.summary:
        _write(args.summary, json.dumps(summary).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
