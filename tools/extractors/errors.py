"""The error catalogue: every message a vLLM release raises, asserts or logs as an error.

For each ``raise X("...")`` (f-strings, ``%``, ``.format`` and ``+`` included, and a message
built in a local variable just before), ``assert cond, "..."`` and
``logger.error/exception/critical/fatal("...")`` the extractor records the message template,
the exception class, the file and function, and the condition that guards it (the assert's
test, or the enclosing ``if``/``except``). Placeholders become ``{*}``; the literal parts
are what a crash log is matched on (vllm_doctor/engine/logmatch.py).

Key: ``<class>: <template>`` (``log.error: ...`` for logger lines), so it stays the same
across releases while the message text does; the sites (file, function, condition) are the
value, and a moved message starts a new span.

Not extracted (counted per release in the table's ``skipped``): messages with no literal
part long enough to recognise in a log (``raise ValueError(msg)`` from a parameter,
``f"{err}"``), bare ``raise X``, and files that do not parse. An ``assert cond`` without a
message is kept by its source line (``assert x is not None``), which the traceback prints,
when that line is long enough to be specific.
"""

from __future__ import annotations

import ast
import hashlib
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

KIND = "errors"
WILDCARD = "{*}"
# The longest literal part must be at least this long to recognise the message in a log:
# shorter ones ("Invalid", "{*} not found") would name a vLLM message for any line.
MIN_LITERAL = 12
MAX_CONDITION = 120
MAX_SITES = 3  # sites kept per message and release (the same text raised in many places)
LOG_LEVELS = {"error", "exception", "critical", "fatal"}

META = {
    "description": "Messages vLLM raises, asserts or logs at error level, by exception class and "
                   "template ({*} marks a placeholder). Value: the sites that emit it in that "
                   "release.",
    "value": {"sites": "[[file, function, condition], ...] (file relative to the vllm package; "
                       "condition: the assert test, the enclosing if (not (...) in its else), or "
                       "except X; '' when unconditional; at most 3 sites)"},
    "key": "<exception class>: <template>; log.error/log.exception/...: for logger lines; "
           "AssertionError: assert <source line> for an assert without a message (the traceback "
           "shows the line)",
    "wildcard": WILDCARD,
    "min_literal": MIN_LITERAL,
}

# per-release counts of what could not be extracted, filled by extract() (the driver writes
# them into the table)
SKIPPED: dict[str, Counter] = {}

_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?[diouxXeEfFgGcrsa%]")
_FORMAT_FIELD = re.compile(r"\{\{|\}\}|\{[^{}]*\}")
_SPACES = re.compile(r"\s+")
_WILDCARDS = re.compile(r"(?:\s*\{\*\}\s*)+")


def normalise(template: str) -> str:
    """One space for every whitespace run; a run of placeholders, with the whitespace around
    it, becomes one ``{*}`` (so ``"x: {}".format`` and ``f"x:{v}"`` give the same key)."""
    return _WILDCARDS.sub(WILDCARD, _SPACES.sub(" ", template)).strip()


def literal_parts(template: str) -> list[str]:
    return [p.strip() for p in template.split(WILDCARD) if p.strip()]


def _percent(fmt: str) -> str:
    return _PERCENT.sub(lambda m: "%" if m.group(0) == "%%" else WILDCARD, fmt)


def _brace(fmt: str) -> str:
    return _FORMAT_FIELD.sub(lambda m: {"{{": "{", "}}": "}"}.get(m.group(0), WILDCARD), fmt)


class _Messages:
    """Turns a message expression into a template, resolving local names when it can."""

    def __init__(self, assignments: dict[str, list[tuple[int, ast.expr]]]):
        self.assignments = assignments

    def template(self, node: ast.expr | None, line: int, depth: int = 0) -> str | None:
        if node is None or depth > 4:
            return None
        if isinstance(node, ast.Constant):
            return node.value.replace(WILDCARD, "") if isinstance(node.value, str) else None
        if isinstance(node, ast.JoinedStr):
            out = []
            for part in node.values:
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    out.append(part.value)
                    continue
                inner = None
                # f"{msg} To allow ...": a local message variable assigned once is inlined (one
                # assigned in several branches could hold any of them: a placeholder)
                if (isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name)
                        and part.format_spec is None and part.conversion in (-1, ord("s"))
                        and len(self.assignments.get(part.value.id, ())) == 1):
                    inner = self.template(part.value, line, depth + 1)
                out.append(inner if inner is not None else WILDCARD)
            return "".join(out)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            left = self.template(node.left, line, depth + 1)
            return _percent(left) if left is not None else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self.template(node.left, line, depth + 1)
            right = self.template(node.right, line, depth + 1)
            if left is None and right is None:
                return None
            return (left if left is not None else WILDCARD) + (right if right is not None else WILDCARD)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "format"):
            base = self.template(node.func.value, line, depth + 1)
            return _brace(base) if base is not None else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join":
            return WILDCARD
        if isinstance(node, ast.Name):
            # `msg = (...)` shortly before `raise X(msg)`: the last assignment above the line
            earlier = [value for at, value in self.assignments.get(node.id, ()) if at < line]
            if earlier:
                return self.template(earlier[-1], line, depth + 1)
        return None


def _name(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _trim(text: str) -> str:
    text = _SPACES.sub(" ", text).strip()
    return text if len(text) <= MAX_CONDITION else text[:MAX_CONDITION - 1] + "…"


def _unparse(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - a node ast cannot print gives no condition, not a crash
        return ""


class _Walker(ast.NodeVisitor):
    def __init__(self, lines: list[str]):
        self.lines = lines
        self.found: list[tuple[str, str, str, str, str]] = []  # (kind, cls, template, func, cond)
        self.skipped: Counter = Counter()
        self._scope: list[str] = []
        self._guards: list[str] = []
        self._messages = [_Messages({})]

    # scopes ------------------------------------------------------------------------------
    def _function(self, node):
        assignments: dict[str, list[tuple[int, ast.expr]]] = {}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
                assignments.setdefault(sub.targets[0].id, []).append((sub.lineno, sub.value))
            elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name) and sub.value:
                assignments.setdefault(sub.target.id, []).append((sub.lineno, sub.value))
        for values in assignments.values():
            values.sort(key=lambda item: item[0])
        self._scope.append(node.name)
        self._messages.append(_Messages(assignments))
        saved, self._guards = self._guards, []
        self.generic_visit(node)
        self._guards = saved
        self._messages.pop()
        self._scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node):
        self._scope.append(node.name)
        self.generic_visit(node)
        self._scope.pop()

    def visit_If(self, node):
        test = _unparse(node.test)
        self.visit(node.test)
        self._guards.append(test)
        for child in node.body:
            self.visit(child)
        negated = node.test.operand if isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not) else None
        self._guards[-1] = _unparse(negated) if negated is not None else f"not ({test})"
        for child in node.orelse:
            self.visit(child)
        self._guards.pop()

    def visit_ExceptHandler(self, node):
        self._guards.append(f"except {_unparse(node.type)}" if node.type is not None else "except")
        self.generic_visit(node)
        self._guards.pop()

    def _source_line(self, node) -> str:
        line = self.lines[node.lineno - 1] if 0 < node.lineno <= len(self.lines) else ""
        return _SPACES.sub(" ", line).strip().replace(WILDCARD, "")

    # messages ----------------------------------------------------------------------------
    def _record(self, kind: str, cls: str, message: ast.expr | None, line: int, cond: str) -> None:
        template = self._messages[-1].template(message, line)
        if template is None:
            self.skipped["message not a string template"] += 1
            return
        template = normalise(template)
        parts = literal_parts(template)
        if not parts or max(len(p) for p in parts) < MIN_LITERAL:
            self.skipped[f"no literal part of {MIN_LITERAL}+ characters"] += 1
            return
        self.found.append((kind, cls, template, ".".join(self._scope) or "<module>", _trim(cond)))

    def visit_Raise(self, node):
        exc = node.exc
        if isinstance(exc, ast.Call):
            cls = _name(exc) or "Exception"
            message = exc.args[0] if exc.args else next(
                (k.value for k in exc.keywords if k.arg in ("msg", "message", "detail")), None)
            if message is None:
                self.skipped["raise without a message"] += 1
            else:
                self._record("raise", cls, message, node.lineno, self._guards[-1] if self._guards else "")
        elif exc is not None:
            self.skipped["raise without a message"] += 1
        self.generic_visit(node)

    def visit_Assert(self, node):
        if node.msg is None:
            # the log shows only the traceback's source line: `    assert x is not None`
            line = self._source_line(node)
            if line and line.startswith("assert ") and len(line) >= MIN_LITERAL + 7:
                self.found.append(("assert-line", "AssertionError", line,
                                   ".".join(self._scope) or "<module>", ""))
            else:
                self.skipped["assert without a message, source line too short"] += 1
        else:
            self._record("assert", "AssertionError", node.msg, node.lineno, _unparse(node.test))
        self.generic_visit(node)

    def visit_Call(self, node):
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr in LOG_LEVELS and node.args
                and "log" in (_name(func.value) or "").lower()):
            # logging formats its arguments with %: "... %s", value
            message = node.args[0]
            if len(node.args) > 1 and isinstance(message, ast.Constant) and isinstance(message.value, str):
                message = ast.BinOp(message, ast.Mod(), ast.Tuple(node.args[1:], ast.Load()))
            self._record("log", f"log.{func.attr}", message, node.lineno,
                         self._guards[-1] if self._guards else "")
        self.generic_visit(node)


_FILE_CACHE: dict[str, tuple[list, Counter]] = {}  # file text hash -> (found, skipped)


def messages_in(text: str) -> tuple[list[tuple[str, str, str, str, str]], Counter]:
    """The messages of one source file (cached by content: most files repeat across releases)."""
    digest = hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()
    cached = _FILE_CACHE.get(digest)
    if cached is None:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            cached = ([], Counter({"file does not parse": 1}))
        else:
            walker = _Walker(text.splitlines())
            walker.visit(tree)
            cached = (walker.found, walker.skipped)
        _FILE_CACHE[digest] = cached
    return cached


def extract(release) -> dict[str, Any]:
    entries: dict[str, dict[str, Any]] = {}
    skipped: Counter = Counter()
    for rel in release.names:
        if not rel.endswith(".py"):
            continue
        text = release.text(rel)
        if text is None:
            skipped["file unreadable"] += 1
            continue
        found, file_skipped = messages_in(text)
        skipped.update(file_skipped)
        for kind, cls, template, func, cond in found:
            entry = entries.setdefault(f"{cls}: {template}", {"sites": []})
            site = [rel, func, cond]
            if site not in entry["sites"]:
                entry["sites"].append(site)
    for entry in entries.values():
        entry["sites"] = sorted(entry["sites"])[:MAX_SITES]
    SKIPPED[str(release.version)] = skipped
    return entries


def main(argv: Iterable[str] | None = None) -> int:
    """Generate the table alone (until tools/gen_knowledge.py drives every extractor)."""
    import argparse

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tools.wheelsrc import find_releases
    from vllm_doctor.knowledge import DATA_DIR
    from vllm_doctor.knowledge.ranges import dump, table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, default=Path("/work/wheels"))
    parser.add_argument("--out", type=Path, default=DATA_DIR / f"{KIND}.json")
    args = parser.parse_args(list(argv) if argv is not None else None)
    per_release = {}
    for release in find_releases(args.wheels):
        per_release[str(release.version)] = extract(release)
        print(f"{release.version}: {len(per_release[str(release.version)])} messages", file=sys.stderr)
    counts = {r: len(v) for r, v in per_release.items()}
    skipped = {r: dict(sorted(SKIPPED[r].items())) for r in per_release}
    args.out.write_text(dump(table(KIND, per_release, **META, counts=counts, skipped=skipped)),
                        encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
