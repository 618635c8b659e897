"""Read the files of vLLM release wheels without installing or importing them.

A release is read either from its wheel (a zip) or from an unpacked copy of it
(``<root>/<version>/vllm/...``, as ``tools/unpack_wheels.py`` writes), whichever the
directory holds; both give the same ``ReleaseSource``. Text and ASTs are cached per file.
"""

from __future__ import annotations

import ast
import fnmatch
import zipfile
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

PACKAGE = "vllm"


def wheel_version(path: Path) -> Version | None:
    try:
        name, version, _build, _tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename:
        return None
    return version if name == PACKAGE else None


MACHINES = ("x86_64", "aarch64")


def wheel_machine(path: Path) -> str | None:
    """The CPU architecture a wheel is built for (``x86_64``, ``aarch64``), from its tags."""
    try:
        _name, _version, _build, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename:
        return None
    for tag in tags:
        for machine in MACHINES:
            if tag.platform.endswith(machine):
                return machine
    return None


class ReleaseSource:
    """The files of one release's ``vllm`` package, by path relative to the package."""

    def __init__(self, version: Version, location: Path):
        self.version = version
        self.location = location
        self._zip: zipfile.ZipFile | None = None
        self._text: dict[str, str | None] = {}
        self._ast: dict[str, ast.Module | None] = {}
        # what an extractor could not read from this release, and why (the generator
        # writes these into the table's meta)
        self.problems: list[str] = []

    def problem(self, reason: str) -> None:
        """Record something an extractor could not read from this release."""
        if reason not in self.problems:
            self.problems.append(reason)

    def __repr__(self) -> str:
        return f"ReleaseSource({self.version}, {self.location})"

    @cached_property
    def names(self) -> list[str]:
        prefix = f"{PACKAGE}/"
        if self.location.is_file():
            self._zip = zipfile.ZipFile(self.location)
            return sorted(
                n[len(prefix) :]
                for n in self._zip.namelist()
                if n.startswith(prefix) and not n.endswith("/")
            )
        base = self.location / PACKAGE
        return sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())

    def exists(self, rel: str) -> bool:
        return rel in set(self.names)

    def glob(self, pattern: str) -> list[str]:
        return [n for n in self.names if fnmatch.fnmatchcase(n, pattern)]

    def text(self, rel: str) -> str | None:
        """The file's text, or None when the release has no such file."""
        if rel not in self._text:
            if rel not in self._name_set:
                self._text[rel] = None
            elif self._zip is not None:
                self._text[rel] = self._zip.read(f"{PACKAGE}/{rel}").decode("utf-8", "replace")
            else:
                self._text[rel] = (self.location / PACKAGE / rel).read_text("utf-8", "replace")
        return self._text[rel]

    def tree(self, rel: str) -> ast.Module | None:
        """The file's AST, or None when it is missing or does not parse."""
        if rel not in self._ast:
            text = self.text(rel)
            try:
                self._ast[rel] = ast.parse(text) if text is not None else None
            except SyntaxError:
                self._ast[rel] = None
        return self._ast[rel]

    @cached_property
    def _name_set(self) -> set[str]:
        return set(self.names)

    @cached_property
    def metadata(self) -> str | None:
        """The wheel's METADATA (Requires-Dist carries the pins)."""
        if self.location.is_file():
            _ = self.names  # opens the zip
            assert self._zip is not None
            for n in self._zip.namelist():
                if n.endswith(".dist-info/METADATA"):
                    return self._zip.read(n).decode("utf-8", "replace")
            return None
        for p in self.location.glob("*.dist-info/METADATA"):
            return p.read_text("utf-8", "replace")
        return None

    @cached_property
    def wheel(self) -> Path | None:
        """The release's wheel: the location itself, or a wheel beside an unpacked tree."""
        if self.location.is_file():
            return self.location
        for folder in (self.location.parent, self.location.parent.parent):
            for found in sorted(folder.glob(f"vllm-{self.version}-*.whl")):
                return found
        return None

    @cached_property
    def root(self) -> Path:
        """The directory the release was found in (``find_releases``' root)."""
        if self.location.is_file():
            return self.location.parent
        parent = self.location.parent
        return parent.parent if parent.name == "src" else parent

    def platform_wheels(self) -> dict[str, Path]:
        """The release's wheels by machine (``x86_64``, ``aarch64``): beside the release and
        in the root's ``aarch64/`` / ``x86_64/`` folders (``gen_knowledge.py --download``
        puts the aarch64 wheels there, so the release itself stays the x86_64 wheel)."""
        found: dict[str, Path] = {}
        folders = [self.root, *(self.root / m for m in MACHINES)]
        if self.wheel is not None:
            folders.insert(0, self.wheel.parent)
        for folder in folders:
            for path in sorted(folder.glob(f"{PACKAGE}-{self.version}-*.whl")):
                machine = wheel_machine(path)
                if machine is not None:
                    found.setdefault(machine, path)
        return found

    def requires_dist(self) -> Iterator:
        """The parsed ``Requires-Dist`` requirements of the METADATA (unparsable ones left out)."""
        from email.parser import Parser

        from packaging.requirements import InvalidRequirement, Requirement

        if self.metadata is None:
            return
        for line in (
            Parser().parsestr(self.metadata, headersonly=True).get_all("Requires-Dist") or []
        ):
            try:
                yield Requirement(line)
            except InvalidRequirement:
                continue


def find_releases(
    root: Path, min_version: str | None = None, max_version: str | None = None
) -> list[ReleaseSource]:
    """Every release under ``root``: unpacked ``<version>/vllm`` trees win over wheels."""
    found: dict[Version, Path] = {}
    for path in sorted(root.glob(f"{PACKAGE}-*.whl")):
        v = wheel_version(path)
        if v is not None and not (v.is_prerelease or v.is_devrelease):
            found.setdefault(v, path)
    for sub in (root / "src", root):
        if not sub.is_dir():
            continue
        for path in sub.iterdir():
            if (path / PACKAGE).is_dir():
                try:
                    found[Version(path.name)] = path
                except InvalidVersion:
                    continue
    lo = Version(min_version) if min_version else None
    hi = Version(max_version) if max_version else None
    return [
        ReleaseSource(v, p)
        for v, p in sorted(found.items())
        if (lo is None or v >= lo) and (hi is None or v <= hi)
    ]


def iter_py(release: ReleaseSource, prefix: str = "") -> Iterator[str]:
    return (n for n in release.names if n.endswith(".py") and n.startswith(prefix))
