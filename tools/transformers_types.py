"""Which transformers release knows which model_type, and which model types each vLLM release
registers a config class of its own for (table ``transformers_types``).

vLLM builds a model's config with transformers' ``AutoConfig`` unless the model_type is in its
own ``_CONFIG_REGISTRY`` (``vllm/transformers_utils/config.py``); ``AutoConfig`` looks the
model_type up in ``CONFIG_MAPPING_NAMES`` (``transformers/models/auto/configuration_auto.py``)
and fails with ``The checkpoint you are trying to load has model type `X` but Transformers does
not recognize this architecture`` when the installed release predates the model.

Read with ``ast`` from the wheels (never installed or imported):

* every transformers release from ``FIRST`` (vLLM 0.8.0's floor) on: the keys of
  ``CONFIG_MAPPING_NAMES``; only the files that build it are kept (``<dir>/transformers/
  readings/<version>.zip``), the wheel is deleted once read;
* every vLLM release wheel in ``<dir>/vllm/``: the keys of ``_CONFIG_REGISTRY`` (a dict
  literal up to 0.10, ``LazyConfigDict(name="Class", ...)`` later).

Written: ``vllm_doctor/knowledge/data/transformers_types.json``: the release-table layout over
transformers versions (key: model_type, value 1: known from ``first`` to ``last``), and
``vllm_configs`` (model_type -> ``[[first, last], ...]`` over ``vllm_releases``).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from packaging.utils import parse_wheel_filename
from packaging.version import InvalidVersion, Version

FIRST = "4.48.0"
# the files CONFIG_MAPPING_NAMES is built in (auto_mappings.py: generated, 5.2x on)
CONFIG_FILES = (
    "transformers/models/auto/configuration_auto.py",
    "transformers/models/auto/auto_mappings.py",
)
# the version check transformers makes on other packages when it is imported
CHECK_FILES = (
    "transformers/dependency_versions_check.py",
    "transformers/dependency_versions_table.py",
)
KEPT_FILES = CONFIG_FILES + CHECK_FILES


def _assigned(node: ast.AST, name: str) -> ast.expr | None:
    """The value ``node`` assigns to ``name`` (a plain or annotated assignment), else None."""
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign):
        targets = [node.target]
    else:
        return None
    return node.value if any(getattr(t, "id", None) == name for t in targets) else None


def _config_mapping_keys(tree: ast.Module) -> set[str]:
    """The model types one module puts into ``CONFIG_MAPPING_NAMES``: its assignment (tuples,
    dict literals, ``**{...}``) and ``CONFIG_MAPPING_NAMES.update({...})``."""
    found: set[str] = set()

    def literal_keys(value: ast.AST) -> None:
        for item in ast.walk(value):
            if (
                isinstance(item, ast.Tuple)
                and len(item.elts) == 2
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in item.elts)
            ):
                found.add(item.elts[0].value)
            elif isinstance(item, ast.Dict):
                found.update(k.value for k in item.keys if isinstance(k, ast.Constant))
            elif isinstance(item, ast.Call):
                found.update(kw.arg for kw in item.keywords if kw.arg)

    for node in ast.walk(tree):
        assigned = _assigned(node, "CONFIG_MAPPING_NAMES")
        if assigned is not None:
            literal_keys(assigned)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "update"
            and getattr(node.func.value, "id", None) == "CONFIG_MAPPING_NAMES"
        ):
            for arg in node.args:
                literal_keys(arg)
    return found


def model_types(sources: dict[str, str]) -> list[str]:
    """The model types ``CONFIG_MAPPING_NAMES`` holds, from configuration_auto.py and, where
    the release generates the table there (5.2x), auto_mappings.py."""
    found: set[str] = set()
    for source in sources.values():
        found |= _config_mapping_keys(ast.parse(source))
    return sorted(found)


def runtime_checks(sources: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The packages transformers checks when it is imported (``pkgs_to_check_at_runtime`` of
    dependency_versions_check.py, ``require_version_core``: ImportError when the installed
    version is outside the spec of dependency_versions_table.py's ``deps``): ``{package:
    {"spec": ..., "optional": true when checked only if installed}}``. ``python`` left out."""
    check = sources.get(CHECK_FILES[0])
    table = sources.get(CHECK_FILES[1])
    if not check or not table:
        return {}
    deps: dict[str, str] = {}
    for node in ast.walk(ast.parse(table)):
        if (
            isinstance(node, ast.Assign)
            and any(getattr(t, "id", None) == "deps" for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                    deps[str(key.value)] = str(value.value)
    checked: list[str] = []
    optional: set[str] = set()
    for node in ast.walk(ast.parse(check)):
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == "pkgs_to_check_at_runtime" for t in node.targets
        ):
            if isinstance(node.value, ast.List):
                checked = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
        elif (  # `if pkg == "tokenizers": ... if not is_tokenizers_available(): continue`
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and getattr(node.test.left, "id", None) == "pkg"
            and any(isinstance(n, ast.Continue) for n in ast.walk(node))
        ):
            optional.update(c.value for c in node.test.comparators if isinstance(c, ast.Constant))
    out: dict[str, dict[str, Any]] = {}
    for name in checked:
        requirement = deps.get(name)
        if name == "python" or not requirement:
            continue
        spec = requirement[len(name) :].strip() if requirement.startswith(name) else ""
        if spec:
            out[name] = {"spec": spec, "optional": name in optional}
    return out


def vllm_config_registry(source: str) -> list[str]:
    """The model types of ``_CONFIG_REGISTRY`` in one vLLM transformers_utils/config.py."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        value = _assigned(node, "_CONFIG_REGISTRY")
        if value is None:
            continue
        keys: list[str] = []
        if isinstance(value, ast.Dict):
            keys = [k.value for k in value.keys if isinstance(k, ast.Constant)]
        elif isinstance(value, ast.Call):
            keys = [kw.arg for kw in value.keywords if kw.arg]
            for arg in value.args:
                if isinstance(arg, ast.Dict):
                    keys += [k.value for k in arg.keys if isinstance(k, ast.Constant)]
        return sorted(set(keys))
    return []


def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def _complete(target: Path) -> bool:
    try:
        with zipfile.ZipFile(target) as archive:
            return CHECK_FILES[0] in archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def fetch_transformers(root: Path, only: set[str] | None = None, scratch: str = "download") -> None:
    """Keep the KEPT_FILES of every transformers release from FIRST on that the folder lacks
    (pip download, the files read out, the wheel deleted); ``only`` limits the versions."""
    folder = root / "transformers" / "readings"
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "transformers"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    line = next((x for x in proc.stdout.splitlines() if "Available versions:" in x), "")
    versions = [v.strip() for v in line.split(":", 1)[-1].split(",") if v.strip()]
    where = root / "transformers" / scratch
    for text in versions:
        version = _version(text)
        if version < Version(FIRST) or version.is_prerelease or version.is_devrelease:
            continue
        target = folder / f"{text}.zip"
        if (only is not None and text not in only) or _complete(target):
            continue
        where.mkdir(parents=True, exist_ok=True)
        print(f"downloading transformers=={text} ...", file=sys.stderr)
        cmd = [sys.executable, "-m", "pip", "download", f"transformers=={text}", "--no-deps"]
        subprocess.run([*cmd, "-q", "-d", str(where)], capture_output=True, text=True)
        for wheel in where.glob("*.whl"):
            with (
                zipfile.ZipFile(wheel) as archive,
                zipfile.ZipFile(target.with_suffix(".tmp"), "w", zipfile.ZIP_DEFLATED) as kept,
            ):
                for name in KEPT_FILES:
                    if name in archive.namelist():
                        kept.writestr(name, archive.read(name))
            target.with_suffix(".tmp").rename(target)
            wheel.unlink()


def readings(root: Path) -> dict[str, dict[str, str]]:
    """{version: {file: source}} of the kept transformers files."""
    out: dict[str, dict[str, str]] = {}
    for path in (root / "transformers" / "readings").glob("*.zip"):
        with zipfile.ZipFile(path) as archive:
            out[path.stem] = {n: archive.read(n).decode("utf-8") for n in archive.namelist()}
    return dict(sorted(out.items(), key=lambda item: _version(item[0])))


def vllm_wheels(root: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted((root / "vllm").glob("*.whl")):
        try:
            version = str(parse_wheel_filename(path.name)[1])
        except ValueError:
            continue
        out.setdefault(version, path)
    return dict(sorted(out.items(), key=lambda item: _version(item[0])))


def write_table(root: Path, out: Path, fetch: bool) -> None:
    from vllm_doctor.knowledge import FORMAT
    from vllm_doctor.knowledge.ranges import dump, fold

    if fetch:
        fetch_transformers(root)
    per_version: dict[str, dict[str, int]] = {}
    for version, sources in readings(root).items():
        types = model_types({k: v for k, v in sources.items() if k in CONFIG_FILES})
        if types:
            per_version[version] = dict.fromkeys(types, 1)
            for name, check in runtime_checks(sources).items():
                per_version[version][f"check:{name}"] = check
    if not per_version:
        print("transformers_types: no configuration_auto.py readings: not written", file=sys.stderr)
        return
    registry: dict[str, dict[str, int]] = {}
    for version, wheel in vllm_wheels(root).items():
        with zipfile.ZipFile(wheel) as archive:
            try:
                source = archive.read("vllm/transformers_utils/config.py").decode("utf-8")
            except KeyError:
                continue
        registry[version] = dict.fromkeys(vllm_config_registry(source), 1)
    vllm_releases, vllm_spans = fold(registry)
    releases, entries = fold(per_version)
    table = {
        "kind": "transformers_types",
        "format": FORMAT,
        "key": "model_type in transformers' CONFIG_MAPPING_NAMES; check:<package>: a package "
        "transformers checks when imported",
        "value": {
            "<model_type>": "1: the transformers releases from first to last know it",
            "check:<package>": "spec (the versions it accepts), optional (checked only when "
            "installed)",
        },
        "generated_by": "tools/gen_stack_knowledge.py (tools/transformers_types.py)",
        "vllm_releases": vllm_releases,
        "vllm_configs": {
            model_type: [[s["first"], s["last"]] for s in spans]
            for model_type, spans in vllm_spans.items()
        },
        "releases": releases,
        "entries": entries,
    }
    out.write_text(dump(table), encoding="utf-8")
