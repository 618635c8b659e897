"""Reader: vLLM's offline engine as a report pastes it, ``LLM(model=..., tensor_parallel_size=2)``
(a script, or ``python -c "from vllm import LLM; ..."``), as the serve line it amounts to.

``LLM(**kwargs)`` builds the same ``EngineArgs`` as ``vllm serve`` from the same names (the
option ``--tensor-parallel-size`` is the keyword ``tensor_parallel_size``), so each keyword with
a literal value becomes that option: ``True`` the bare flag, ``False`` the ``--no-`` form of a
boolean option (a store-true flag left out), a dict or list its JSON. The text is parsed with
``ast`` and literal values read with ``ast.literal_eval``: nothing is executed. A keyword whose
value is not a literal (a variable, a call) cannot be read: it is left out and said.

What the script writes to ``os.environ`` before the call (``os.environ["K"] = "v"``,
``.setdefault``, ``.update``, ``del``/``.pop``) is the environment vLLM reads in that process,
not this machine's: ``script_environment`` reads those writes the same way.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from vllm_doctor.errors import InputError
from vllm_doctor.serveline import SERVE_LINE

# `LLM(` or `vllm.LLM(` as a call, not the name inside a longer one (`MyLLM(`)
_CALL = re.compile(r"(?<![\w.])(?:vllm\.)?LLM\s*\(")
MAX_SOURCE = 256 * 1024


def is_llm_call(text: str) -> bool:
    """The text calls vLLM's ``LLM(...)`` (and is no shell serve command)."""
    return bool(_CALL.search(text))


def _call_source(text: str) -> str:
    """The ``LLM(...)`` call's own text, parentheses balanced (quotes respected), for a script
    that does not parse as a whole (a fragment, a REPL paste with ``>>>``)."""
    found = _CALL.search(text)
    assert found is not None
    depth, quote, i = 0, None, found.end() - 1
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return text[found.start() : i + 1]
        i += 1
    raise InputError(SERVE_LINE, "the LLM(...) call is not closed")


def _find_call(tree: ast.AST) -> ast.Call | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name == "LLM":
                return node
    return None


def _parse(text: str) -> ast.Call:
    cleaned = "\n".join(re.sub(r"^\s*(>>>|\.\.\.) ?", "", ln) for ln in text.splitlines())
    for source in (cleaned, None):
        try:
            tree = ast.parse(source if source is not None else _call_source(cleaned).strip())
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # not Python, NUL bytes, or nested past the parser's depth
        call = _find_call(tree)
        if call is not None:
            return call
    raise InputError(SERVE_LINE, "the LLM(...) call could not be parsed as Python")


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def llm_call_source(text: str) -> str:
    """The Python of the text: the code of ``python -c CODE`` (as the shell splits it),
    else the text itself (a script, a REPL paste)."""
    import shlex

    stripped = text.strip()
    if re.match(r"^(?:\S*/)?python[\d.]*\s+-c\s", stripped):
        try:
            words = shlex.split(stripped, posix=True)
        except ValueError:
            return text
        if len(words) >= 3 and words[1] == "-c":
            return words[2]
    return text


def llm_call_words(text: str) -> tuple[list[str], dict[str, str]]:
    """(the ``vllm serve`` words the call amounts to, option -> why its keyword's value is
    not known: a variable or a call, not a literal)."""
    from vllm_doctor.serveline.options import option_spec

    if len(text) > MAX_SOURCE:
        raise InputError(SERVE_LINE, f"{len(text):,} characters of Python; at most {MAX_SOURCE:,}")
    call = _parse(text)
    words: list[str] = ["vllm", "serve"]
    not_read: dict[str, str] = {}
    model: Any = None
    arguments = [("model", a) for a in call.args[:1]] + [(k.arg, k.value) for k in call.keywords]
    if any(k.arg is None for k in call.keywords):
        raise InputError(SERVE_LINE, "LLM(**kwargs): the keywords of a ** mapping are not read")
    for name, node in arguments:
        assert name is not None
        ok, value = _literal(node)
        spec = option_spec("--" + name.replace("_", "-"))
        option = spec.name if spec is not None else name.replace("_", "-")
        if not ok:
            try:
                shown = ast.unparse(node)[:60]
            except (ValueError, RecursionError):
                shown = "..."
            not_read[option] = f"LLM({name}={shown}): not a literal, its value is not known"
            continue
        if name == "model":
            model = value
            continue
        option = "--" + option
        if value is True:
            words.append(option)
        elif value is False:
            if spec is not None and spec.kind == "bool":
                words.append("--no-" + option[2:])
        elif value is None:
            continue  # the engine's default
        elif isinstance(value, (list, tuple)) and spec is not None and spec.kind == "list":
            words += [option, *(str(v) for v in value)]
        elif isinstance(value, (dict, list, tuple)):
            words += [option, json.dumps(value)]
        else:
            words += [option, str(value)]
    if isinstance(model, str) and model:
        words.insert(2, model)
    return words, not_read


@dataclass
class ScriptEnvironment:
    """What the script writes to ``os.environ`` before its ``LLM(...)`` call."""

    assigned: dict[str, str] = field(default_factory=dict)  # os.environ["K"] = "v", .update
    defaults: dict[str, str] = field(default_factory=dict)  # .setdefault("K", "v")
    unset: set[str] = field(default_factory=set)  # del os.environ["K"], .pop("K")
    not_read: dict[str, str] = field(default_factory=dict)  # K -> why its value is not known

    def environ_of(self, environ: dict[str, str]) -> dict[str, str]:
        """The process's environment at the call, from the one it started with."""
        result = {k: v for k, v in environ.items() if k not in self.unset}
        result.update({k: v for k, v in self.defaults.items() if k not in result})
        result.update(self.assigned)
        return result

    def write_facts(self, facts: Any, source: str) -> None:
        """The script's variables over this machine's (``env.*``), with what it writes."""
        from vllm_doctor.redact import REDACTED, is_secret_name

        for key in self.unset:
            facts.values.pop(f"env.{key}", None)
        for key, value in self.defaults.items():
            if f"env.{key}" not in facts.values:
                shown = REDACTED if is_secret_name(key) else value
                facts.set(f"env.{key}", shown, source, f"os.environ.setdefault({key!r}, ...)")
        for key, value in self.assigned.items():
            shown = REDACTED if is_secret_name(key) else value
            facts.set(f"env.{key}", shown, source, f"os.environ[{key!r}] = {shown!r}")
        for key, why in self.not_read.items():
            if key == "*":  # any variable may have been written: none of this machine's stands
                for path in [p for p in facts.values if p.startswith("env.")]:
                    if path.removeprefix("env.") not in self.assigned:
                        del facts.values[path]
                facts.mark_missing("env", why)
            else:
                facts.values.pop(f"env.{key}", None)
                facts.mark_missing(f"env.{key}", why)


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` or a bare ``environ`` (``from os import environ``)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and isinstance(node.value, ast.Name)
    return isinstance(node, ast.Name) and node.id == "environ"


def script_environment(text: str) -> ScriptEnvironment:
    """The writes to ``os.environ`` above the ``LLM(...)`` call of a script that parses
    (nothing for a fragment): a literal value is read, anything else leaves the variable
    unknown (a key that is not a literal: every variable)."""
    found = ScriptEnvironment()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return found
    call = _find_call(tree)
    before = call.lineno if call is not None else None
    writes = [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.Call, ast.Delete))
        and (before is None or node.lineno <= before)
    ]

    def put(key_node: ast.AST | None, value_node: ast.AST | None, into: dict[str, str]) -> None:
        key_ok, key = _literal(key_node) if key_node is not None else (False, None)
        if not key_ok or not isinstance(key, str):
            shown = ast.unparse(key_node) if key_node is not None else "**"
            found.not_read["*"] = f"os.environ[{shown[:40]}]: the variable it sets is not known"
            return
        value_ok, value = _literal(value_node) if value_node is not None else (False, None)
        if value_ok and isinstance(value, (str, int, float)):
            into[key] = str(value)
            found.unset.discard(key)
            found.not_read.pop(key, None)
        else:
            shown = ast.unparse(value_node)[:60] if value_node is not None else "..."
            found.not_read[key] = f"os.environ[{key!r}] = {shown}: not a literal, not known"

    for node in sorted(writes, key=lambda n: (n.lineno, n.col_offset)):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and _is_environ(target.value):
                    put(target.slice, node.value, found.assigned)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and _is_environ(target.value):
                    ok, key = _literal(target.slice)
                    if ok and isinstance(key, str):
                        found.assigned.pop(key, None)
                        found.unset.add(key)
        elif isinstance(node.func, ast.Attribute) and _is_environ(node.func.value):
            method = node.func.attr
            if method == "setdefault" and node.args:
                put(node.args[0], node.args[1] if len(node.args) > 1 else None, found.defaults)
            elif method == "pop" and node.args:
                ok, key = _literal(node.args[0])
                if ok and isinstance(key, str):
                    found.assigned.pop(key, None)
                    found.unset.add(key)
            elif method == "update":
                mapping = node.args[0] if node.args else None
                if isinstance(mapping, ast.Dict):
                    for key_node, value_node in zip(mapping.keys, mapping.values, strict=True):
                        put(key_node, value_node, found.assigned)
                elif mapping is not None:
                    put(None, None, found.assigned)
                for keyword in node.keywords:
                    put(
                        ast.Constant(keyword.arg) if keyword.arg else None,
                        keyword.value,
                        found.assigned,
                    )
    return found
