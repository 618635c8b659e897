"""What one wheel of a package around vLLM says, read as a zip archive (never installed).

``read(wheel)`` gives the reading ``tools/gen_stack_knowledge.py`` folds into the tables:

* ``requires``: every ``Requires-Dist`` of its METADATA (canonical name → spec, extra, marker);
* ``checks``: version checks the package makes at import time on a partner package, read
  from its code: an ``if`` whose test compares two ``*_version`` names (``!=``, or
  ``not a.startswith(b)``) around a ``raise`` whose message names the partner
  (``"flashinfer-cubin version ({…}) does not match flashinfer version ({…})"``), with the
  environment variables the test reads (the bypass) and the message;
* ``images``: the GPU code of its shared objects (``.nv_fatbin``) and raw ``.cubin`` files:
  a shared object by its import name, cubins by their folder (the kernel family, hash folders
  left out), each as groups of images (``tools/fatbin.py``);
* ``messages``: what its Python code raises, asserts or logs as an error
  (``tools/extractors/errors.py``: the same reader as vLLM's error catalogue);
* ``cuda``: the CUDA major its wheel is built for, from its ``nvidia-*-cuXX`` requirements or
  a ``+cuXYZ`` local version;
* ``ptxas``: the ``ptxas`` binaries it bundles (Triton's ``backends/nvidia/bin/ptxas``, and
  ``ptxas-blackwell`` where a release ships a second one): the CUDA release each comes from
  and the GPU names (``sm_120a``, ...) it accepts for ``--gpu-name``, read from the strings of
  the binary (never run).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import zipfile
from collections import Counter
from collections.abc import Callable
from email.parser import Parser
from pathlib import Path, PurePosixPath
from typing import Any

TOOLS = Path(__file__).resolve().parent
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

import fatbin  # noqa: E402
from packaging.requirements import InvalidRequirement, Requirement  # noqa: E402

_PARTNER = re.compile(r"\b([a-z][a-z0-9]*(?:-[a-z0-9]+)+) version\b")
_CUDA_REQ = re.compile(r"^nvidia-[a-z0-9-]+-cu(\d+)$")
_HASH_DIR = re.compile(r"^[0-9a-f]{16,}$")
MAX_TEXT = 4 << 20  # a Python file larger than this is not read for messages
# folders of third-party code a package carries (FlashInfer's data/ holds CUTLASS' and CCCL's
# Python tools) and its tests: their messages are not the package's own
VENDORED = {"data", "third_party", "3rdparty", "tests", "test"}


# the x86_64 platform tags a wheel may carry (pip matches a wheel's tag exactly)
LINUX_X86_64 = (
    *(f"manylinux_2_{minor}_x86_64" for minor in (35, 34, 31, 28, 27, 24, 18, 17)),
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
    "any",
)
# the same for aarch64 (GH200, GB200, GB10 and Jetson hosts)
LINUX_AARCH64 = (
    *(f"manylinux_2_{minor}_aarch64" for minor in (35, 34, 31, 28, 27, 24, 17)),
    "manylinux2014_aarch64",
    "any",
)
PLATFORMS = {"x86_64": LINUX_X86_64, "aarch64": LINUX_AARCH64}


def index_versions(dist: str) -> list[Any] | None:
    """Every version of ``dist`` on the package index, pre-releases included, as
    ``packaging`` Versions (``pip index versions``); None where pip finds none."""
    from packaging.version import InvalidVersion, Version

    proc = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", dist],
        capture_output=True,
        text=True,
        timeout=180,
    )
    match = re.search(r"Available versions:\s*(.+)", proc.stdout)
    if proc.returncode != 0 or not match:
        return None
    out = []
    for text in match.group(1).split(","):
        try:
            out.append(Version(text.strip()))
        except InvalidVersion:
            continue
    return out


def pip_download(
    folder: Path, dist: str, version: str, platforms: tuple[str, ...] = LINUX_X86_64
) -> bool:
    """``pip download DIST==VERSION --no-deps`` of a binary wheel for ``platforms`` (CPython
    3.12) into ``folder``; False, said on stderr, when the index has none."""
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", f"{dist}=={version}", "--no-deps"]
    cmd += ["--only-binary=:all:", *(a for p in platforms for a in ("--platform", p))]
    cmd += ["--python-version", "3.12", "-q", "-d", str(folder)]
    print(f"downloading {dist}=={version} ...", file=sys.stderr)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"  {dist}=={version}: no wheel ({proc.stderr.strip()[-200:]})", file=sys.stderr)
        return False
    return True


def metadata(archive: zipfile.ZipFile) -> str | None:
    for name in archive.namelist():
        if name.endswith(".dist-info/METADATA") and name.count("/") == 1:
            return archive.read(name).decode("utf-8", "replace")
    return None


def requirements(meta: str) -> dict[str, dict[str, Any]]:
    """``Requires-Dist`` by canonical name (one requirement of every install wins over an
    extra's), read as the dependencies extractor reads vLLM's own."""
    from extractors.dependencies import requirement_table

    reqs = []
    for line in Parser().parsestr(meta, headersonly=True).get_all("Requires-Dist") or []:
        try:
            reqs.append(Requirement(line))
        except InvalidRequirement:
            continue
    return requirement_table(reqs)


def cuda_major(version: str, requires: dict[str, dict[str, Any]]) -> int | None:
    local = re.search(r"\+cu(\d{2,3})$", version)
    if local:
        return int(local.group(1)[:-1])
    majors = {
        int(m.group(1)[:2]) if len(m.group(1)) > 2 else int(m.group(1))
        for name, req in requires.items()
        if req["extra"] is None and (m := _CUDA_REQ.match(name))
    }
    return majors.pop() if len(majors) == 1 else None


# -- version checks on partner packages ---------------------------------------------------------


def version_checks(path: str, text: str) -> dict[str, dict[str, Any]]:
    """Partner → the check: ``match`` (``equal`` or ``prefix``), ``bypass`` (environment
    variables whose setting skips it), ``fatal`` (false when every call of the function that
    raises is inside a ``try`` that catches it: FlashInfer 0.7 logs a mismatched cubin package
    and ignores it), ``file``, ``message`` (the raise's template), ``exception``."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    from extractors.errors import normalise

    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    caught = _caught_calls(tree)
    out: dict[str, dict[str, Any]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        for stmt in node.body:
            if not (isinstance(stmt, ast.Raise) and isinstance(stmt.exc, ast.Call)):
                continue
            message = _template(stmt.exc.args[0]) if stmt.exc.args else None
            if not message:
                continue
            partner = _PARTNER.search(message)
            match = _comparison(node.test)
            if partner is None or match is None:
                continue
            exception = _call_name(stmt.exc.func)
            function = _enclosing_function(node, parents)
            calls = caught.get(function, []) if function else []
            out[partner.group(1)] = {
                "match": match,
                "bypass": sorted(_env_reads(node.test)),
                "fatal": not (calls and all(exception in c or "*" in c for c in calls)),
                "file": path,
                "message": normalise(message),
                "exception": exception,
            }
    return out


def _enclosing_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str | None:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return node.name
    return None


def _caught_calls(tree: ast.AST) -> dict[str, list[set[str]]]:
    """Function name → for each call of it, the exception classes a ``try`` around the call
    catches (``*`` for ``except:``, ``Exception`` or ``BaseException``; empty: not caught)."""
    out: dict[str, list[set[str]]] = {}

    def visit(node: ast.AST, catching: set[str]) -> None:
        if isinstance(node, ast.Try):
            handled = set(catching)
            for handler in node.handlers:
                names = _handler_names(handler.type)
                handled |= {"*"} if names & {"*", "Exception", "BaseException"} else names
            for child in node.body:
                visit(child, handled)
            for child in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(child, catching)
            return
        if isinstance(node, ast.Call):
            name = _call_name(node.func)
            if name:
                out.setdefault(name, []).append(catching)
        for child in ast.iter_child_nodes(node):
            visit(child, catching)

    visit(tree, set())
    return out


def _handler_names(node: ast.expr | None) -> set[str]:
    if node is None:
        return {"*"}
    if isinstance(node, ast.Tuple):
        return {n for e in node.elts for n in _handler_names(e)}
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return {name} if name else set()


def _template(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{*}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        return (left or "{*}") + (right or "{*}")
    return None


def _comparison(test: ast.expr) -> str | None:
    """``prefix`` for ``not a.startswith(b)`` (with or without ``a != b`` beside it: the CUDA
    suffix of ``0.6.12+cu129`` allowed), else ``equal`` for ``a_version != b_version``."""
    found = None
    for node in ast.walk(test):
        if (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.NotEq)
            and all(_is_version_name(n) for n in (node.left, node.comparators[0]))
        ):
            found = "equal"
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.Not)
            and isinstance(node.operand, ast.Call)
            and isinstance(node.operand.func, ast.Attribute)
            and node.operand.func.attr == "startswith"
            and _is_version_name(node.operand.func.value)
            and node.operand.args
            and (
                _is_version_name(node.operand.args[0])
                or isinstance(node.operand.args[0], ast.JoinedStr)
            )
        ):
            return "prefix"
    return found


def _is_version_name(node: ast.expr) -> bool:
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return isinstance(name, str) and name.endswith("version")


def _env_reads(test: ast.expr) -> set[str]:
    found = set()
    for node in ast.walk(test):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = getattr(func, "attr", None) or getattr(func, "id", None)
            if called in ("getenv", "get") and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return found


def _call_name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", "Exception")


# -- bundled ptxas -------------------------------------------------------------------------------

PTXAS_FORMAT = 1  # what ptxas() records
_PTXAS_RELEASE = re.compile(rb"Cuda compilation tools, release (\d+\.\d+), V(\d+\.\d+\.\d+)")
# an architecture as ptxas's tables spell it, NUL-terminated: sm_XY or compute_XY, also as the
# tail of a longer string (the linker shares "sm_89" with "%s on sm_89")
_PTXAS_GPU = re.compile(rb"(?:sm|compute)_(\d{2,3}[af]?)(?=\x00)")


def _arch(name: bytes) -> int:
    """``120a`` → 120 (sm_11 and sm_12 of CUDA 1.x, below 20, are other GPUs entirely)."""
    return int(name.rstrip(b"af"))


def ptxas(archive: zipfile.ZipFile) -> dict[str, Any]:
    """Each bundled ptxas by its path: its CUDA release and the GPU names it accepts."""
    out: dict[str, Any] = {}
    for info in archive.infolist():
        base = PurePosixPath(info.filename).name
        if not (base == "ptxas" or base.startswith("ptxas-")) or "/bin/" not in info.filename:
            continue
        data = archive.read(info.filename)
        release = _PTXAS_RELEASE.search(data)
        out[info.filename] = {
            "cuda": release.group(2).decode() if release else None,
            "gpu_names": sorted(
                {f"sm_{m.decode()}" for m in _PTXAS_GPU.findall(data) if _arch(m) >= 20},
                key=lambda n: (int(re.sub(r"\D", "", n)), n),
            ),
        }
    return out


# -- GPU images ---------------------------------------------------------------------------------


def images(archive: zipfile.ZipFile) -> dict[str, Any]:
    """Shared objects by import name and cubin folders, each with its groups of images."""
    out: dict[str, Any] = {}
    cubins: dict[str, list[fatbin.Container]] = {}
    for info in archive.infolist():
        name = info.filename
        if name.endswith(".cubin"):
            image = fatbin.cubin_image(archive.read(name))
            if image is not None:
                cubins.setdefault(_cubin_family(name), []).append(
                    fatbin.Container((image,), None, [PurePosixPath(name).stem])
                )
        elif _is_shared_object(name):
            with fatbin.member(archive, name) as data:
                try:
                    groups = fatbin.group(fatbin.containers(data, with_kernels=True))
                except fatbin.FatbinError:
                    continue
            if groups:
                out[_module(name)] = {"file": name, "groups": groups}
    for family, found in sorted(cubins.items()):
        out[family] = {"file": family, "groups": fatbin.group(iter(found), names_per_group=4)}
    return out


def _is_shared_object(name: str) -> bool:
    base = PurePosixPath(name).name
    return base.endswith(".so") or ".so." in base


def _module(name: str) -> str:
    path = PurePosixPath(name)
    if path.name.endswith(".so") and "." in path.name[:-3]:
        return str(path.parent / path.name.split(".")[0]).replace("/", ".")
    return name


def _cubin_family(name: str) -> str:
    """``flashinfer_cubin/cubins/<hash>/fmha/trtllm-gen/x.cubin`` → ``…/cubins/fmha/trtllm-gen``."""
    parts = [p for p in PurePosixPath(name).parent.parts if not _HASH_DIR.match(p)]
    return "/".join(parts)


# -- messages -----------------------------------------------------------------------------------


def messages(
    archive: zipfile.ZipFile,
    package_dirs: set[str],
    keep: Callable[[str], bool] | None = None,
) -> tuple[dict[str, Any], Counter]:
    """The messages of the package's own Python files (``keep``: which of them to read)."""
    from extractors.errors import MAX_SITES, messages_in

    entries: dict[str, dict[str, Any]] = {}
    skipped: Counter = Counter()
    for info in archive.infolist():
        name = info.filename
        if not name.endswith(".py") or name.split("/", 1)[0] not in package_dirs:
            continue
        if VENDORED & set(name.split("/")[1:-1]):
            continue
        if keep is not None and not keep(name):
            continue
        if info.file_size > MAX_TEXT:
            skipped["file too large"] += 1
            continue
        text = archive.read(name).decode("utf-8", "replace")
        found, file_skipped = messages_in(text)
        skipped.update(file_skipped)
        for _kind, cls, template, func, cond in [*found, *str_messages(text)]:
            entry = entries.setdefault(f"{cls}: {template}", {"sites": []})
            site = [name, func, cond]
            if site not in entry["sites"]:
                entry["sites"].append(site)
    for entry in entries.values():
        entry["sites"] = sorted(entry["sites"])[:MAX_SITES]
    return entries, skipped


MESSAGES_FORMAT = 2  # what messages() records (2: exceptions whose __str__ gives the message)


def str_messages(text: str) -> list[tuple[str, str, str, str, str]]:
    """The messages of exception classes that build them in ``__str__`` (Triton's
    ``OutOfResources``: "out of resource: {name}, Required: ..."), as ``messages_in`` gives
    its raises: (kind, class, template, function, condition)."""
    from extractors.errors import MIN_LITERAL, _Messages, literal_parts, normalise

    if "__str__" not in text:
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef) or not any(
            _call_name(base).endswith(("Error", "Exception")) for base in node.bases
        ):
            continue
        for method in node.body:
            if not isinstance(method, ast.FunctionDef) or method.name != "__str__":
                continue
            assignments: dict[str, list[tuple[int, ast.expr]]] = {}
            for sub in ast.walk(method):
                if (
                    isinstance(sub, ast.Assign)
                    and len(sub.targets) == 1
                    and isinstance(sub.targets[0], ast.Name)
                ):
                    assignments.setdefault(sub.targets[0].id, []).append((sub.lineno, sub.value))
            for sub in ast.walk(method):
                if not isinstance(sub, ast.Return):
                    continue
                template = _Messages(assignments).template(sub.value, sub.lineno)
                if template is None:
                    continue
                template = normalise(template)
                parts = literal_parts(template)
                if parts and max(map(len, parts)) >= MIN_LITERAL:
                    out.append(("raise", node.name, template, f"{node.name}.__str__", ""))
    return out


def top_level_packages(archive: zipfile.ZipFile) -> set[str]:
    """The importable top-level packages of the wheel (``flashinfer``, ``quack``)."""
    return {
        n.split("/", 1)[0]
        for n in archive.namelist()
        if n.endswith("/__init__.py") and n.count("/") == 1
    }


_CUDA_LINE = re.compile(r"""^cuda\s*(?::[^=]*)?=\s*['"](\d+\.\d+)['"]""", re.MULTILINE)


def build_cuda(archive: zipfile.ZipFile, packages: set[str]) -> str | None:
    """The CUDA version a package's generated ``version.py`` states (torch: ``cuda = '12.8'``)."""
    for package in sorted(packages):
        try:
            text = archive.read(f"{package}/version.py").decode("utf-8", "replace")
        except KeyError:
            continue
        found = _CUDA_LINE.search(text)
        if found:
            return found.group(1)
    return None


CHECKS_FORMAT = 2  # what version_checks records (2: fatal)


def checks_in(archive: zipfile.ZipFile) -> dict[str, Any]:
    checks: dict[str, Any] = {}
    for info in archive.infolist():
        if info.filename.endswith(".py") and info.file_size <= MAX_TEXT:
            text = archive.read(info.filename).decode("utf-8", "replace")
            if "raise" in text and _PARTNER.search(text):
                checks.update(version_checks(info.filename, text))
    return checks


def read(wheel: Path, version: str, with_messages: bool = True) -> dict[str, Any]:
    with zipfile.ZipFile(wheel) as archive:
        meta = metadata(archive) or ""
        requires = requirements(meta)
        checks = checks_in(archive)
        packages = top_level_packages(archive)
        found, skipped = messages(archive, packages) if with_messages else ({}, Counter())
        return {
            "requires": requires,
            "checks": checks,
            "checks_format": CHECKS_FORMAT,
            "images": images(archive),
            "ptxas": ptxas(archive),
            "ptxas_format": PTXAS_FORMAT,
            "messages": found,
            "messages_format": MESSAGES_FORMAT if with_messages else None,
            "skipped": dict(skipped),
            "cuda": cuda_major(version, requires),
            "cuda_version": build_cuda(archive, packages),
            "python": Parser().parsestr(meta, headersonly=True).get("Requires-Python"),
        }
