"""The value a vLLM release takes for one of its environment variables, from the program the
generator read out of that release's ``vllm/envs.py`` (knowledge table ``envs``,
tools/extractors/envs.py describes the programs). The program is data: it is interpreted
here, never run as code, with Python's own conversions where vLLM's lambda uses them (so
``bool(int("true"))`` fails here as it fails in vLLM).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


class Opaque(Exception):
    """The release computes the value in code the table does not follow."""


class Refused(ValueError):
    """The release raises on this value (the message says what vLLM says)."""


def names(program: Any) -> set[str]:
    """The environment variables a program reads."""
    found: set[str] = set()
    if isinstance(program, list) and program:
        op = program[0]
        if op in ("env", "choices", "list_choices", "ifset") and len(program) > 1:
            found.add(str(program[1]))
        for item in program[1:]:
            found |= names(item)
    return found


def evaluate(program: Any, environ: Mapping[str, str]) -> Any:
    """The value of ``program`` with ``environ`` as the process environment."""
    if not isinstance(program, list) or not program:
        raise Opaque("not a program")
    op, args = program[0], program[1:]
    handler = _OPS.get(op)
    if handler is None:
        raise Opaque(str(args[0]) if op == "opaque" and args else f"unknown operation {op!r}")
    return handler(args, environ)


def _env(args: list[Any], environ: Mapping[str, str]) -> Any:
    name, default = args
    return environ.get(name, default)


def _text(method: str) -> Callable[[list[Any], Mapping[str, str]], Any]:
    def run(args: list[Any], environ: Mapping[str, str]) -> Any:
        value = evaluate(args[0], environ)
        if not isinstance(value, str):
            raise Refused(f"'{type(value).__name__}' object has no attribute '{method}'")
        return getattr(value, method)()

    return run


def _number(kind: type) -> Callable[[list[Any], Mapping[str, str]], Any]:
    def run(args: list[Any], environ: Mapping[str, str]) -> Any:
        value = evaluate(args[0], environ)
        try:
            return kind(value)
        except (TypeError, ValueError) as err:
            raise Refused(str(err)) from None

    return run


def _bool(args: list[Any], environ: Mapping[str, str]) -> Any:
    return bool(evaluate(args[0], environ))


def _maybe(kind: str) -> Callable[[list[Any], Mapping[str, str]], Any]:
    def run(args: list[Any], environ: Mapping[str, str]) -> Any:
        value = evaluate(args[0], environ)
        if value is None:
            return None
        number = _number(int)([["const", value]], environ)
        return bool(number) if kind == "bool" else number

    return run


def _choices(args: list[Any], environ: Mapping[str, str]) -> Any:
    name, default, choices, case_sensitive = args
    value = environ.get(name)
    if value is None:
        return default
    if choices is None:
        raise Opaque(f"the choices of {name} are computed at run time")
    folded = value if case_sensitive else value.lower()
    allowed = choices if case_sensitive else [c.lower() for c in choices]
    if folded not in allowed:
        raise Refused(f"Invalid value '{value}' for {name}. Valid options: {choices}.")
    return value


def _list_choices(args: list[Any], environ: Mapping[str, str]) -> Any:
    name, default, choices, case_sensitive = args
    value = environ.get(name)
    if value is None:
        return default
    values = [v.strip() for v in value.split(",") if v.strip()]
    if not values:
        return default
    if choices is None:
        raise Opaque(f"the choices of {name} are computed at run time")
    allowed = choices if case_sensitive else [c.lower() for c in choices]
    for item in values:
        if (item if case_sensitive else item.lower()) not in allowed:
            raise Refused(f"Invalid value '{item}' in {name}. Valid options: {choices}.")
    return values


_OPS: dict[str, Callable[[list[Any], Mapping[str, str]], Any]] = {
    "const": lambda args, environ: args[0],
    "env": _env,
    "lower": _text("lower"),
    "upper": _text("upper"),
    "strip": _text("strip"),
    "int": _number(int),
    "float": _number(float),
    "bool": _bool,
    "in": lambda args, environ: evaluate(args[0], environ) in args[1],
    "eq": lambda args, environ: evaluate(args[0], environ) == args[1],
    "ne": lambda args, environ: evaluate(args[0], environ) != args[1],
    "or": lambda args, environ: evaluate(args[0], environ) or evaluate(args[1], environ),
    "map": lambda args, environ: args[1].get(evaluate(args[0], environ)),
    "maybe_int": _maybe("int"),
    "maybe_bool": _maybe("bool"),
    "choices": _choices,
    "list_choices": _list_choices,
    "ifset": lambda args, environ: evaluate(args[1] if args[0] in environ else args[2], environ),
}
