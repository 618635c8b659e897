"""Safe YAML loading, through libyaml's C parser when PyYAML has it (about 10× faster).

The loader builds only plain data: mappings, lists, strings, numbers, booleans and null.
No tags construct objects; timestamps stay the strings they were written as (a YAML date
in a serve config is the text the user typed, and ``expires: 2024-13-45`` is a bad date the
caller reports rather than a crash inside the parser); ``!!binary``, ``!!set``, ``!!omap`` and
``!!pairs`` are refused. The loaded value is then held to the bounds of
``vllm_doctor.bounds.check_value`` (depth, values with aliases expanded, cycles, finite
numbers), so an anchor bomb is refused in milliseconds. Every refusal is a ``YAMLError``.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from vllm_doctor.bounds import MAX_DEPTH, ValueBoundsError, check_value

YAMLError = yaml.YAMLError
_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YAMLBoundsError(yaml.YAMLError):
    """A document that parses but is not plain data within bounds."""


def hashable_key(key: Any) -> Any:
    """A mapping key as Python can hold it: YAML allows a mapping or a sequence as a key
    (``{{NAME}}: x`` in a template left unrendered), Python dicts do not; such a key becomes
    a tuple of its items (pairs for a mapping), which compares like the YAML value."""
    if isinstance(key, dict):
        return tuple((hashable_key(k), hashable_key(v)) for k, v in key.items())
    if isinstance(key, list):
        return tuple(hashable_key(item) for item in key)
    return key


class _PlainLoader(_Base):  # type: ignore[misc, valid-type]
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        """Merge keys (``<<``) as YAML defines them, and complex keys held as tuples."""
        self.flatten_mapping(node)
        mapping = {}
        for key_node, value_node in node.value:
            key = hashable_key(self.construct_object(key_node, deep=True))
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def _timestamp_as_text(loader: yaml.BaseLoader, node: yaml.Node) -> str:
    return loader.construct_scalar(node)  # type: ignore[arg-type]


def _refuse(tag: str):
    def construct(loader: yaml.BaseLoader, node: yaml.Node) -> Any:
        mark = node.start_mark
        raise YAMLBoundsError(f"line {mark.line + 1}: the tag {tag} is not plain data")

    return construct


_PlainLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)
for _tag in ("binary", "set", "omap", "pairs"):
    _PlainLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse(f"!!{_tag}"))


_FLOW = re.compile(r"[\[\]{}]")
_FLOW_DEPTH_LIMIT = 4 * MAX_DEPTH


def _flow_depth_exceeds(text: str, limit: int) -> bool:
    """Whether ``[``/``{`` nest deeper than ``limit`` (quotes ignored: a cheap upper bound that
    spares the parser a deep document, which it walks slowly)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _FLOW.finditer(text):
        depth += 1 if match.group() in "[{" else -1
        if depth > limit:
            return True
    return False


# the loader builds Python objects at ~15 µs a value: a cheap count of the characters that
# start values (``:``, ``,``, line ends) keeps a load under a second; the shipped rule files
# have a few hundred
MAX_ITEMS = 50_000


def _check_size(text: str) -> None:
    if _flow_depth_exceeds(text, _FLOW_DEPTH_LIMIT):
        raise YAMLBoundsError(f"nested more than {MAX_DEPTH} levels deep")
    items = text.count(":") + text.count(",") + text.count("\n")
    if items > MAX_ITEMS:
        raise YAMLBoundsError(f"too large: about {items:,} values (at most {MAX_ITEMS:,} are read)")


def _bounded(data: Any) -> Any:
    try:
        return check_value(data)
    except ValueBoundsError as err:
        raise YAMLBoundsError(f"the document {err}") from None


def _load(text: str, loader: type, everything: bool = False) -> Any:
    _check_size(text)
    try:
        if everything:
            return list(yaml.load_all(text, Loader=loader))
        return yaml.load(text, Loader=loader)
    except RecursionError:
        raise YAMLBoundsError("nested too deeply") from None
    except (TypeError, ValueError) as err:  # e.g. a mapping key that cannot be hashed
        raise YAMLBoundsError(f"not plain data: {err}") from None


def safe_load(text: str) -> Any:
    return _bounded(_load(text, _PlainLoader))


# -- documents that remember where each value was written ---------------------------------


class LineDict(dict):
    """A mapping from the YAML, with the 1-based line of the mapping (``line``) and of each
    key (``lines``); read from a directory, the file it came from (``file``), and for a
    mapping joined from two files (a KServe service and its runtime) the file of each key
    that came from the other one (``files``)."""

    line: int = 0
    lines: dict[Any, int]
    file: str | None = None
    files: dict[Any, str]


class LineList(list):
    """A sequence from the YAML, with its line and each item's (``lines``); the file it came
    from and, joined from two files, each item's (``file``, ``files``: see ``LineDict``)."""

    line: int = 0
    lines: list[int]
    file: str | None = None
    files: list[str | None]


class _LineLoader(_PlainLoader):
    pass


def _line_map(loader: Any, node: yaml.MappingNode):
    data = LineDict()
    data.line, data.lines = node.start_mark.line + 1, {}
    yield data
    loader.flatten_mapping(node)  # merge keys (<<) as the safe loader reads them
    for key_node, value_node in node.value:
        key = hashable_key(loader.construct_object(key_node, deep=True))
        data[key] = loader.construct_object(value_node, deep=True)
        data.lines[key] = key_node.start_mark.line + 1


def _line_seq(loader: Any, node: yaml.SequenceNode):
    data = LineList()
    data.line, data.lines = node.start_mark.line + 1, []
    yield data
    for item in node.value:
        data.append(loader.construct_object(item, deep=True))
        data.lines.append(item.start_mark.line + 1)


_LineLoader.add_constructor("tag:yaml.org,2002:map", _line_map)
_LineLoader.add_constructor("tag:yaml.org,2002:seq", _line_seq)


def safe_load_all_with_lines(text: str) -> list[Any]:
    """Every document of a multi-document YAML stream (``helm template`` output, ``kubectl -o
    yaml``), mappings and sequences carrying their lines (``LineDict``, ``LineList``); the same
    plain data and bounds as ``safe_load``."""
    return [_bounded(doc) for doc in _load(text, _LineLoader, everything=True)]


def safe_load_with_lines(text: str) -> Any:
    """One document (a serve config), its mappings and sequences carrying their lines
    (``LineDict``, ``LineList``); the same plain data and bounds as ``safe_load``."""
    return _bounded(_load(text, _LineLoader))


def mapping_at(doc: Any, key: str) -> dict[str, Any]:
    """``doc[key]`` where it is a mapping, else an empty one (a manifest's optional sections)."""
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, dict) else {}
