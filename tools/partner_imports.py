"""What a companion package imports from the package it plugs into, against what each version
of that package exports: the reverse of ``companion_api`` (vLLM's uses of a companion).

LMCache's vLLM connector imports ``vllm.*`` names; quack-kernels imports the CuTe DSL
(``cutlass.*``, shipped by nvidia-cutlass-dsl). A companion version whose modules import, at
module level and unguarded, a name that the installed partner version lacks fails at import
(``ImportError: cannot import name 'KVCacheSpecKind' from 'vllm.v1.kv_cache_interface'``,
``cannot import name 'Arch' from 'cutlass.base_dsl'``), and so does one that reads such a name
as an attribute of a partner module while it is imported (a ``def``'s annotation
``cute.core.ThrMma``: ``AttributeError: module 'cutlass.cute.core' has no attribute
'ThrMma'``, quack-kernels 0.5.0 with nvidia-cutlass-dsl 4.6.0).

Everything is read from archives with ``ast`` (never installed or imported):

* the companion's wheel: per module, the partner names it imports unguarded at module level
  (an import under ``try``/``if`` is guarded: it has a fallback or a condition this reader
  does not evaluate), those it reads from an imported partner module while it is imported
  (``import_time_reads``: a ``def``'s decorators, defaults and annotations, a class body, a
  module-level value; never a function body) and the companion's own modules it imports the
  same way (their imports run too, and so do the parent packages' ``__init__``);
* each partner version's code (the vLLM release wheels; the CuTe DSL's Python files, kept as
  small archives by ``fetch_partner`` from every distribution of the version's layout: from
  4.6.0 the Python DSL is in nvidia-cutlass-dsl-libs-core, ``cutlass._mlir`` in libs-base):
  whether each such name exists, resolved through re-exports by ``companion_api.resolve`` (a
  name it cannot decide is never called missing).

Written: ``vllm_doctor/knowledge/data/stack_imports.json``: per companion, its read versions,
the partner's read versions, and for each entry module (those the covered vLLM releases import
from the companion, and for LMCache every module of its vLLM integration, the connectors a
``kv_connector_module_path`` names) spans over the companion's versions of the partner names
it lacks, each with the partner versions that lack it (``[[first, last], ...]`` over the
partner's read versions) and the companion file that imports it. A module with nothing missing
in any read partner version has no key.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import companion_api
from packaging.utils import parse_wheel_filename
from packaging.version import InvalidVersion, Version

READING_FORMAT = 2  # the companion's imports and import-time attribute reads, per version
EXPORTS_FORMAT = 4  # the partner's resolved names, per version


@dataclass(frozen=True)
class Partner:
    """The package a companion plugs into."""

    own: str  # the companion's import name
    distribution: str  # whose versions are judged (its version is what a pip list shows)
    top: str  # the import name the companion imports from
    code: str  # "wheels": <root>/<distribution>/*.whl; "code": <root>/<distribution>/code/<v>.zip
    # the companion's own modules users name directly (a kv_connector_module_path): those
    # under these prefixes that import this partner class (the connector base they subclass;
    # LMCache's old v0 adapter, which vLLM 0.8-0.10 imported itself, is no connector)
    entry_prefixes: tuple[str, ...] = ()
    entry_base: str = ""
    # the distributions a partner version's Python code is in, oldest layout first
    # ((first version, (distribution, ...))): the CuTe DSL moved into
    # nvidia-cutlass-dsl-libs-base at 4.4.0, and its Python DSL (cutlass.cute, base_dsl) on
    # into nvidia-cutlass-dsl-libs-core at 4.6.0 (libs-base keeps cutlass._mlir)
    code_from: tuple[tuple[str, tuple[str, ...]], ...] = ()


PARTNERS: dict[str, Partner] = {
    "lmcache": Partner(
        "lmcache",
        "vllm",
        "vllm",
        "wheels",
        entry_prefixes=("lmcache.integration.vllm.",),
        entry_base="KVConnectorBase_V1",
    ),
    "quack-kernels": Partner(
        "quack",
        "nvidia-cutlass-dsl",
        "cutlass",
        "code",
        code_from=(
            ("0", ("nvidia-cutlass-dsl",)),
            ("4.4.0", ("nvidia-cutlass-dsl-libs-base",)),
            ("4.6.0", ("nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-core")),
        ),
    ),
}


# -- the companion's side ------------------------------------------------------------------------


def _module_of(path: str, top: str) -> tuple[str, bool] | None:
    """(module, is_package) of an archive path whose parts reach the top package ``top``."""
    parts = PurePosixPath(path).with_suffix("").parts
    if top not in parts:
        return None
    parts = parts[parts.index(top) :]
    if not all(p.isidentifier() for p in parts):
        return None
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def _unguarded(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements that always run (a ``with`` block's too)."""
    for stmt in body:
        if isinstance(stmt, ast.With):
            yield from _unguarded(stmt.body)
        else:
            yield stmt


def imports_of(tree: ast.Module, module: str, is_package: bool, own: str, partner: str):
    """(partner uses ``"<module>:<name>"``, own modules imported) of one module."""
    uses: set[str] = set()
    imported: set[str] = set()
    for stmt in _unguarded(tree.body):
        if isinstance(stmt, ast.ImportFrom):
            source = companion_api._absolute(module, is_package, stmt.level, stmt.module)
            top = source.split(".", 1)[0]
            for alias in stmt.names:
                if top == partner and alias.name != "*":
                    uses.add(f"{source}:{alias.name}")
                elif top == own:
                    imported.add(source)
                    if alias.name != "*":
                        imported.add(f"{source}.{alias.name}")  # kept when it is a module
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                top = alias.name.split(".", 1)[0]
                if top == partner:
                    uses.add(f"{alias.name}:")
                elif top == own:
                    imported.add(alias.name)
    return uses, imported


def _partner_names(tree: ast.Module, module: str, is_package: bool, partner: str):
    """{local name: what it stands for} bound at module level to the partner: ``import
    cutlass.cute as cute`` -> ``cutlass.cute:`` , ``import cutlass.cute`` -> ``cutlass:``,
    ``from cutlass import cute`` -> ``cutlass:cute``."""
    bound: dict[str, str] = {}
    for stmt in _unguarded(tree.body):
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.name.split(".", 1)[0] != partner:
                    continue
                if alias.asname:
                    bound[alias.asname] = f"{alias.name}:"
                else:
                    bound[partner] = f"{partner}:"
        elif isinstance(stmt, ast.ImportFrom):
            source = companion_api._absolute(module, is_package, stmt.level, stmt.module)
            if source.split(".", 1)[0] != partner:
                continue
            for alias in stmt.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name] = f"{source}:{alias.name}"
    return bound


def _evaluated_at_import(stmt: ast.stmt, lazy_annotations: bool) -> Iterator[ast.AST]:
    """The expressions Python evaluates when it runs a module-level statement: a ``def``'s
    decorators, defaults and (without ``from __future__ import annotations``) annotations, a
    class's bases, decorators and body, an assignment's or expression's value; never a
    function body (it runs when called) and nothing under ``if``/``try``/loops (conditional,
    or guarded like a ``try`` import)."""
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        yield from stmt.decorator_list
        args = stmt.args
        yield from (d for d in (*args.defaults, *args.kw_defaults) if d is not None)
        if not lazy_annotations:
            every = (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
            yield from (a.annotation for a in every if a is not None and a.annotation)
            if stmt.returns is not None:
                yield stmt.returns
    elif isinstance(stmt, ast.ClassDef):
        yield from stmt.decorator_list
        yield from stmt.bases
        yield from (k.value for k in stmt.keywords)
        for inner in stmt.body:
            yield from _evaluated_at_import(inner, lazy_annotations)
    elif isinstance(stmt, ast.Assign | ast.AugAssign | ast.Expr):
        yield stmt.value
    elif isinstance(stmt, ast.AnnAssign):
        if stmt.value is not None:
            yield stmt.value
        if not lazy_annotations:
            yield stmt.annotation


def _chains(node: ast.AST) -> Iterator[list[str]]:
    """The longest ``a.b.c`` chains in an expression (a lambda's body is not evaluated)."""
    if isinstance(node, ast.Lambda):
        yield from _chains(node.args)
        return
    if isinstance(node, ast.Attribute):
        parts: list[str] = []
        inner: ast.AST = node
        while isinstance(inner, ast.Attribute):
            parts.append(inner.attr)
            inner = inner.value
        if isinstance(inner, ast.Name):
            yield [inner.id, *parts[::-1]]
            return
    for child in ast.iter_child_nodes(node):
        yield from _chains(child)


def import_time_reads(tree: ast.Module, module: str, is_package: bool, partner: str) -> set[str]:
    """The partner names a module reads as attributes when it is imported, ``"<module>:<dotted
    name>"`` (``thr_mma: cute.core.ThrMma`` in a ``def``'s signature, with ``import
    cutlass.cute as cute`` -> ``cutlass.cute:core.ThrMma``): a name the partner version lacks
    stops the import with ``AttributeError: module 'cutlass.cute.core' has no attribute
    'ThrMma'``."""
    bound = _partner_names(tree, module, is_package, partner)
    if not bound:
        return set()
    lazy = any(
        isinstance(s, ast.ImportFrom)
        and s.module == "__future__"
        and any(a.name == "annotations" for a in s.names)
        for s in tree.body
    )
    reads: set[str] = set()
    for stmt in _unguarded(tree.body):
        for expression in _evaluated_at_import(stmt, lazy):
            for chain in _chains(expression):
                base = bound.get(chain[0])
                if base is None or len(chain) < 2:
                    continue
                source, _, name = base.partition(":")
                reads.add(f"{source}:{'.'.join(filter(None, [name, *chain[1:]]))}")
    return reads


def read_companion(wheel: Path, own: str, partner: str) -> dict[str, Any]:
    """{module: {"uses": [...], "reads": [...], "imports": [...], "file": path}} of a companion
    wheel (``reads``: the uses that are attribute reads at import, not imports)."""
    modules: dict[str, Any] = {}
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if not name.endswith(".py") or not name.startswith(f"{own}/"):
                continue
            if {"tests", "test"} & set(name.split("/")[1:-1]):
                continue
            found = _module_of(name, own)
            if found is None:
                continue
            module, is_package = found
            try:
                tree = ast.parse(archive.read(name).decode("utf-8", "replace"))
            except (SyntaxError, ValueError):
                continue
            uses, imported = imports_of(tree, module, is_package, own, partner)
            reads = import_time_reads(tree, module, is_package, partner) - uses
            modules[module] = {
                "uses": sorted(uses | reads),
                "reads": sorted(reads),
                "imports": sorted(imported),
                "file": name,
            }
    for entry in modules.values():  # keep only own imports that are modules
        entry["imports"] = [m for m in entry["imports"] if m in modules]
    return modules


def closure(modules: dict[str, Any], start: str) -> dict[str, str]:
    """{partner use: the companion file importing it} of everything importing ``start`` runs:
    its own imports, followed, and every parent package's ``__init__``."""
    seen: set[str] = set()
    todo = [start]
    found: dict[str, str] = {}
    while todo:
        module = todo.pop()
        parts = module.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if name in seen or name not in modules:
                continue
            seen.add(name)
            entry = modules[name]
            for use in entry["uses"]:
                found.setdefault(use, entry["file"])
            todo.extend(entry["imports"])
    return found


# -- the partner's side ----------------------------------------------------------------------------


class LazyApi(Mapping):
    """``companion_api``'s ``{module: names}`` of a partner archive, parsed module by module
    on first use (a vLLM wheel has ~2000 modules; a few dozen are asked for)."""

    def __init__(self, archive: zipfile.ZipFile, top: str):
        self._archive = archive
        self._files: dict[str, tuple[str, bool]] = {}
        self._parsed: dict[str, dict[str, Any]] = {}
        for name in archive.namelist():
            path = PurePosixPath(name)
            if name.endswith(".py"):
                found = _module_of(name, top)
                if found is not None and found[0] not in self._files:
                    self._files[found[0]] = (name, found[1])
            elif path.suffix in (".so", ".pyd"):  # a compiled module: present, not readable
                found = _module_of(str(path.with_name(path.name.split(".", 1)[0])) + ".py", top)
                if found is not None:
                    self._parsed.setdefault(found[0], {"?": True})
        for module in list(self._files) + list(self._parsed):  # packages without __init__
            parts = module.split(".")
            for i in range(1, len(parts)):
                parent = ".".join(parts[:i])
                if parent not in self._files:
                    self._parsed.setdefault(parent, {"?": True})

    def __getitem__(self, module: str) -> dict[str, Any]:
        if module not in self._parsed:
            if module not in self._files:
                raise KeyError(module)
            name, is_package = self._files[module]
            try:
                tree = ast.parse(self._archive.read(name).decode("utf-8", "replace"))
                self._parsed[module] = companion_api.module_api(
                    tree, module, is_package, type_checking=False
                )
            except (SyntaxError, ValueError):
                self._parsed[module] = {"?": True}
        return self._parsed[module]

    def __contains__(self, module: object) -> bool:
        return module in self._files or module in self._parsed

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(self._files), **dict.fromkeys(self._parsed)})

    def __len__(self) -> int:
        return len(set(self._files) | set(self._parsed))


def layout(partner: Partner, version: str) -> tuple[str, ...]:
    """The distributions whose Python code makes up ``version`` of the partner."""
    return [d for first, d in partner.code_from if _version(version) >= _version(first)][-1]


def _kept_from(path: Path) -> tuple[str, ...]:
    """The distributions a kept archive was made from (its zip comment; none recorded: the
    one distribution of a layout before the comment was written)."""
    try:
        with zipfile.ZipFile(path) as archive:
            comment = archive.comment.decode("ascii", "replace")
    except (OSError, zipfile.BadZipFile):
        return ("?",)
    return tuple(comment.split(",")) if comment else ()


def _kept_matches(path: Path, partner: Partner, version: str) -> bool:
    kept = _kept_from(path)
    wanted = layout(partner, version)
    return kept == wanted or (not kept and len(wanted) == 1)


def partner_archives(root: Path, partner: Partner) -> dict[str, Path]:
    """{version: archive} of the partner versions present under ``root`` (a kept archive made
    from another layout than its version's is left out: ``fetch_partner`` makes it again)."""
    folder = root / partner.distribution
    out: dict[str, Path] = {}
    if partner.code == "wheels":
        for path in sorted(folder.glob("*.whl")):
            try:
                version = str(parse_wheel_filename(path.name)[1])
            except ValueError:
                continue
            if "x86_64" in path.name or path.name.endswith("-any.whl"):
                out.setdefault(version, path)
    else:
        for path in sorted((folder / "code").glob("*.zip")):
            if _kept_matches(path, partner, path.stem):
                out[path.stem] = path
    return dict(sorted(out.items(), key=lambda item: _version(item[0])))


def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def fetch_partner(root: Path, partner: Partner, version: str) -> Path | None:
    """Keep a partner version's Python files (the CuTe DSL's ``cutlass`` package, from every
    distribution of its layout) as a small archive ``<root>/<distribution>/code/<version>.zip``
    whose comment names those distributions; the wheels are deleted once read."""
    target = root / partner.distribution / "code" / f"{version}.zip"
    if target.exists() and _kept_matches(target, partner, version):
        return target
    scratch = root / partner.distribution / "code" / "download"
    scratch.mkdir(parents=True, exist_ok=True)
    wheels: list[Path] = []
    for dist in layout(partner, version):
        before = set(scratch.glob("*.whl"))
        cmd = [sys.executable, "-m", "pip", "download", f"{dist}=={version}", "--no-deps", "-q"]
        cmd += ["--only-binary=:all:", "--python-version", "3.12"]
        cmd += ["--platform", "manylinux_2_28_x86_64", "-d", str(scratch)]
        print(f"downloading {dist}=={version} ...", file=sys.stderr)
        if subprocess.run(cmd, capture_output=True, text=True).returncode != 0:
            return None
        new = sorted(set(scratch.glob("*.whl")) - before)
        if not new:
            return None
        wheels += new
    with zipfile.ZipFile(target.with_suffix(".tmp"), "w", zipfile.ZIP_DEFLATED) as kept:
        kept.comment = ",".join(layout(partner, version)).encode("ascii")
        written: set[str] = set()
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as source:
                for name in source.namelist():
                    if f"/{partner.top}/" not in f"/{name}" or name.endswith("/"):
                        continue
                    if name in written:
                        continue
                    written.add(name)
                    # the Python files, and the names of the rest (compiled modules import)
                    kept.writestr(name, source.read(name) if name.endswith(".py") else b"")
    target.with_suffix(".tmp").replace(target)
    for wheel in wheels:
        wheel.unlink()
    return target


def exports(root: Path, partner: Partner, version: str, archive: Path, uses: set[str]):
    """{use: True present / False missing} for a partner version (undecidable uses left out);
    cached in ``<root>/<distribution>/exports/<version>.json``."""
    cache_path = root / partner.distribution / "exports" / f"{version}.json"
    cache: dict[str, Any] = {}
    try:
        stored = json.loads(cache_path.read_text(encoding="utf-8"))
        if stored.get("format") == EXPORTS_FORMAT and stored.get("archive") == archive.name:
            cache = stored["uses"]
    except (OSError, ValueError, KeyError):
        pass
    wanted = sorted(uses - set(cache))
    if wanted:
        with zipfile.ZipFile(archive) as opened:
            api = LazyApi(opened, partner.top)
            if partner.top not in api._files:
                # nvidia-cutlass-dsl 4.6 on: the CuTe DSL's Python code is in none of its
                # wheels as source; nothing can be judged missing there
                print(f"{archive.name}: no {partner.top}/__init__.py: not read", file=sys.stderr)
                return None
            for use in wanted:
                entry = companion_api.resolve(api, use)  # type: ignore[arg-type]
                cache[use] = None if entry is None else not entry.get("missing", False)
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        cache_path.write_text(
            json.dumps(
                {"format": EXPORTS_FORMAT, "archive": archive.name, "uses": cache},
                sort_keys=True,
            ),
            encoding="utf-8",
        )
    return {use: cache[use] for use in uses if cache.get(use) is not None}


def _spans(order: list[str], chosen: set[str]) -> list[list[str]]:
    out: list[list[str]] = []
    previous = False
    for version in order:
        if version in chosen and previous:
            out[-1][1] = version
        elif version in chosen:
            out.append([version, version])
        previous = version in chosen
    return out


def entry_modules(dist: str, partner: Partner, modules: dict[str, Any], used: set[str]):
    """The companion's modules that vLLM imports (``used``) or users name as a connector."""

    def connector(module: str) -> bool:
        return any(module.startswith(p) for p in partner.entry_prefixes) and any(
            use.endswith(f":{partner.entry_base}") for use in modules[module]["uses"]
        )

    return sorted(m for m in modules if m in used or connector(m))


def generate(
    root: Path, dist: str, versions: dict[str, Path], used_modules: set[str], fetch: bool
) -> dict[str, Any] | None:
    """The ``stack_imports`` entry of one companion: ``{"partner", "partner_releases",
    "releases", "connectors", "entries"}`` (entries: spans over the companion's versions)."""
    from vllm_doctor.knowledge.ranges import fold

    partner = PARTNERS[dist]
    own = partner.own
    readings: dict[str, dict[str, Any]] = {}
    for version, wheel in versions.items():
        cache = root / dist / "partner_imports" / f"{version}.json"
        try:
            stored = json.loads(cache.read_text(encoding="utf-8"))
            if stored.get("format") == READING_FORMAT and stored.get("wheel") == wheel.name:
                readings[version] = stored["modules"]
                continue
        except (OSError, ValueError, KeyError):
            pass
        print(f"reading the {partner.top} imports of {wheel.name} ...", file=sys.stderr)
        modules = read_companion(wheel, own, partner.top)
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(
            json.dumps({"format": READING_FORMAT, "wheel": wheel.name, "modules": modules}),
            encoding="utf-8",
        )
        readings[version] = modules
    if not readings:
        return None
    per_version: dict[str, dict[str, dict[str, str]]] = {}
    all_uses: set[str] = set()
    connectors: set[str] = set()
    for version, modules in readings.items():
        per_version[version] = {}
        connectors |= set(entry_modules(dist, partner, modules, set()))
        for module in entry_modules(dist, partner, modules, used_modules):
            found = closure(modules, module)
            per_version[version][module] = found
            all_uses |= set(found)
    archives = partner_archives(root, partner)
    if fetch and partner.code == "code":
        for version in _partner_versions(root, partner):
            path = fetch_partner(root, partner, version)
            if path is not None:
                archives[version] = path
        archives = dict(sorted(archives.items(), key=lambda item: _version(item[0])))
    order = list(archives)
    present: dict[str, dict[str, bool]] = {}
    for version, path in archives.items():
        found_exports = exports(root, partner, version, path, all_uses)
        if found_exports is not None:
            present[version] = found_exports
    order = [v for v in order if v in present]
    values: dict[str, dict[str, Any]] = {}
    for version, by_module in per_version.items():
        values[version] = {}
        reads = {r for entry in readings[version].values() for r in entry.get("reads", ())}
        for module, found in by_module.items():
            missing = {}
            files = {}
            for use, file in sorted(found.items()):
                lacking = {v for v in order if present[v].get(use) is False}
                if lacking:
                    missing[use] = _spans(order, lacking)
                    files[use] = file
            if missing:
                values[version][module] = {"missing": missing, "files": files}
                if reads & set(missing):
                    values[version][module]["reads"] = sorted(reads & set(missing))
    releases, entries = fold(values)
    return {
        "partner": partner.distribution,
        "partner_top": partner.top,
        "entry_prefixes": list(partner.entry_prefixes),
        "connectors": sorted(connectors),
        "partner_releases": order,
        "releases": releases,
        "entries": entries,
    }


def _partner_versions(root: Path, partner: Partner) -> list[str]:
    """The partner versions the stack knowledge read (its readings)."""
    folder = root / partner.distribution / "readings"
    return sorted((p.stem for p in folder.glob("*.json")), key=_version)


def used_modules(dist: str) -> set[str]:
    """The companion's modules that some covered vLLM release imports (``companion_uses``)."""
    from vllm_doctor.knowledge import load

    uses = load("companion_uses")
    owners = uses.meta.get("modules") or {}
    out: set[str] = set()
    for key in uses:
        module, _, dotted = key.partition(":")
        if owners.get(module.split(".", 1)[0]) != dist:
            continue
        out.add(module)
        out.add(f"{module}.{dotted.split('.', 1)[0]}")  # `from quack import copy_utils`
    return out


def write_table(root: Path, wheels: dict[str, dict[str, Path]], out: Path, fetch: bool) -> None:
    """Write ``stack_imports.json`` from the companions' wheels ``{dist: {version: wheel}}``."""
    from vllm_doctor.knowledge import FORMAT
    from vllm_doctor.knowledge.ranges import dump

    companions: dict[str, Any] = {}
    for dist in PARTNERS:
        found = generate(root, dist, wheels.get(dist, {}), used_modules(dist), fetch)
        if found is not None:
            companions[dist] = found
    entries = {
        f"{dist}|{module}": spans
        for dist, data in companions.items()
        for module, spans in data.pop("entries").items()
    }
    table = {
        "kind": "stack_imports",
        "format": FORMAT,
        "key": "<companion distribution>|<its module>",
        "value": {
            "missing": "partner name (<module>:<name>) -> the partner versions that lack it "
            "([[first, last], ...] over partner_releases)",
            "files": "partner name -> the companion file that imports it unguarded",
            "reads": "the partner names of missing that the file reads as attributes when it "
            "is imported (a def's annotation or default, a class body), not imports "
            "(AttributeError, not ImportError)",
        },
        "generated_by": "tools/gen_stack_knowledge.py (tools/partner_imports.py)",
        "companions": companions,
        "entries": entries,
    }
    out.write_text(dump(table), encoding="utf-8")
