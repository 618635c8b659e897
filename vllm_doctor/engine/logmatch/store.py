"""The shipped catalogue, loaded from its compact build (vllm_doctor.compact): made on first
use from the knowledge tables ``errors`` and ``stack_errors``, read back while their bytes
and the code that builds it are unchanged."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from vllm_doctor.engine.logmatch.catalogue import Catalogue

# the modules whose code shapes the compact catalogue (a change to them is a rebuild)
_BUILDERS = ("catalogue.py", "store.py", "text.py")

_CATALOGUE_KEYS = {
    "meta",
    "spans",
    "keys",
    "parts",
    "anchors",
    "prefixes",
    "package_spans",
    "package_versions",
}


@lru_cache(maxsize=1)
def load_catalogue() -> Catalogue:
    """The catalogue of the shipped knowledge table ``errors``, from its compact build
    (vllm_doctor.compact: made on first use, checked against the table's bytes)."""
    from vllm_doctor.compact import cached
    from vllm_doctor.knowledge import DATA_DIR, KnowledgeError, Table

    path = DATA_DIR / "errors.json"
    try:
        source = path.read_bytes()
    except OSError as err:
        raise KnowledgeError(f"knowledge table 'errors' cannot be read: {err}") from None
    try:  # the packages around vLLM (tools/gen_stack_knowledge.py); optional
        stack_source = (DATA_DIR / "stack_errors.json").read_bytes()
    except OSError:
        stack_source = b"{}"
    here = Path(__file__).parent  # a change to how it is built is a new build too
    builders = [(f"logmatch/{name}", (here / name).read_bytes()) for name in _BUILDERS]
    compact = _without_gc(
        lambda: cached(
            "catalogue",
            [
                ("errors.json", source),
                ("stack_errors.json", stack_source),
                *builders,
            ],
            lambda: _compact_catalogue(source, stack_source),
            valid=lambda value: isinstance(value, dict) and value.keys() >= _CATALOGUE_KEYS,
        )
    )
    table = Table("errors", {**compact["meta"], "entries": _JsonValues(compact["spans"])})
    catalogue = Catalogue(
        compact["keys"], compact["parts"], compact["anchors"], table, compact["prefixes"]
    )
    catalogue.packages = _JsonValues(compact["package_spans"])
    catalogue.package_versions = compact["package_versions"]
    return catalogue


def _compact_catalogue(source: bytes, stack_source: bytes = b"{}") -> dict[str, Any]:
    """The catalogue as plain data: its matchers (vLLM's messages and those of the packages
    around it), and each message's spans kept as JSON text (decoded only for the few
    messages a log shows)."""
    import json

    from vllm_doctor.knowledge import KnowledgeError

    try:
        data = json.loads(source)
        entries = data["entries"]
    except (ValueError, KeyError, TypeError) as err:
        raise KnowledgeError(f"knowledge table 'errors' cannot be read: {err}") from None
    try:
        stack = json.loads(stack_source)
        packages = stack.get("entries") or {}
        versions = stack.get("packages") or {}
    except (ValueError, AttributeError) as err:
        raise KnowledgeError(f"knowledge table 'stack_errors' cannot be read: {err}") from None
    # vLLM's own messages are also found after a terminal wrapped their first words (an end
    # anchor each); the packages' tens of thousands are not, which would double the anchors
    catalogue = Catalogue.build(
        [*entries, *(k for k in packages if k not in entries)], wrapped=entries
    )
    return {
        "meta": {k: v for k, v in data.items() if k != "entries"},
        "keys": catalogue.keys,
        "parts": catalogue.parts,
        "anchors": catalogue.by_anchor,
        "prefixes": catalogue.prefixes,
        "spans": {key: json.dumps(spans, separators=(",", ":")) for key, spans in entries.items()},
        "package_spans": {
            key: json.dumps(spans, separators=(",", ":")) for key, spans in packages.items()
        },
        "package_versions": versions,
    }


class _JsonValues(Mapping[str, Any]):
    """A mapping whose values are stored as JSON text and decoded on first access."""

    def __init__(self, texts: dict[str, str]):
        self._texts = texts
        self._decoded: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        try:
            return self._decoded[key]
        except KeyError:
            import json

            value = self._decoded[key] = json.loads(self._texts[key])
            return value

    def __contains__(self, key: object) -> bool:
        return key in self._texts

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)


T = TypeVar("T")


def _without_gc(make: Callable[[], T]) -> T:
    """Tens of thousands of small objects, none cyclic: the cyclic collector would only rescan
    them again and again while they are made (a third of the time)."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        return make()
    finally:
        if enabled:
            gc.enable()
