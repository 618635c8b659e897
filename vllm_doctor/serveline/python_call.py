"""Reader: vLLM's offline engine as a report pastes it, ``LLM(model=..., tensor_parallel_size=2)``
(a script, or ``python -c "from vllm import LLM; ..."``), as the serve line it amounts to.

``LLM(**kwargs)`` builds the same ``EngineArgs`` as ``vllm serve`` from the same names (the
option ``--tensor-parallel-size`` is the keyword ``tensor_parallel_size``), so each keyword with
a literal value becomes that option: ``True`` the bare flag, ``False`` the ``--no-`` form of a
boolean option (a store-true flag left out), a dict or list its JSON. The text is parsed with
``ast`` and literal values read with ``ast.literal_eval``: nothing is executed. A keyword whose
value is not a literal (a variable, a call) cannot be read: it is left out and said.
"""

from __future__ import annotations

import ast
import json
import re
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
