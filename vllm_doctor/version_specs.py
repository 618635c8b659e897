"""Requirement specifiers and environment markers judged as pip judges an installed package,
one cached reading for every collector: a judgement without a vLLM version asks the same
questions once per covered release (release_stack, installed_requires, release_api, ...).

packaging's modules are imported on first use: ``packaging.markers`` imports ``sysconfig``,
which reads the environment as it is imported.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=8192)
def admits(spec: str, version: str) -> bool | None:
    """Whether ``version`` meets the specifier set ``spec`` (pre-releases admitted, a local
    build as its public version); None when either cannot be read."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return SpecifierSet(spec).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return None


@lru_cache(maxsize=2048)
def marker_holds(marker: str, environment: tuple[tuple[str, str], ...]) -> bool | None:
    """Whether the environment marker holds where ``environment`` (pairs of marker variables
    and values) replaces those variables of the running interpreter's; None when it cannot be
    read or names a variable not defined."""
    from packaging.markers import InvalidMarker, Marker, UndefinedEnvironmentName

    try:
        return bool(Marker(marker).evaluate(dict(environment)))
    except (InvalidMarker, UndefinedEnvironmentName):
        return None
