"""Every `vllm serve` option of one release, read statically from its source (KIND "options").

For a release the extractor reads ``engine/arg_utils.py`` (``EngineArgs.add_cli_args`` and
``AsyncEngineArgs.add_cli_args``), the frontend file that defines ``make_arg_parser``
(``entrypoints/openai/cli_args.py`` or a later home) with its ``FrontendArgs`` dataclass,
and ``entrypoints/cli/serve.py``; it finds every ``add_argument`` call and derives each
option's kind the way vLLM does: from ``action=``/``type=``/``nargs=`` where they are written
(the 0.8/0.9 layout), else like ``get_kwargs``/``_compute_kwargs`` from the annotation of
the config dataclass field behind ``**<x>_kwargs["field"]`` (aliases and forward references
resolved by name across the package).

Value per option (key: the long name without dashes)::

    {"kind": "int", "aliases": ["-tp"], "choices": [...], "json": false, "deprecated": true,
     "negations": ["no-x"], "kvs": true}

``choices`` is present only where the source fixes them statically (a literal list, a
``Literal[...]`` annotation without ``str`` beside it, ``get_args(Alias)``, the values of an
enum); ``deprecated`` only where the source says so (``deprecated=True``, a Deprecated*
action, "[DEPRECATED]"/"is deprecated" in a literal help text).

Kinds: bool (BooleanOptionalAction: --x and --no-x), flag (store_true, no --no- form),
bool_or_str (bare flag = true, or one value), int, hrint (human-readable int), float,
str, list (nargs + or *), json (dataclass or dict parsed as JSON), json_or_str
(JSON when it looks like an object, else a string), kvs (``key=int,...`` pairs only),
append (repeatable string).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _package import Package

KIND = "options"
META = {
    "key": "long option name without the leading dashes",
    "value": {
        "kind": "bool | flag | bool_or_str | int | hrint | float | str | list | json | "
        "json_or_str | kvs | append (how vLLM's parser reads the value)",
        "aliases": "short aliases (-tp) and second long names (--device-memory-utilization)",
        "choices": "the values argparse accepts, where the source fixes them statically "
        "(absent: any value of the kind)",
        "json": "the option takes a JSON object",
        "deprecated": "the release's source marks the option deprecated",
        "negations": "option strings (without dashes) that set a bool option to false in this "
        "release (--no-x; --disable-x beside --enable-x where EnableDisableAction "
        "pairs them)",
        "kvs": "the JSON converter also reads key=value,... pairs (nullable_kvs)",
        "keys": "the keys a JSON option takes where the release refuses any other (its type "
        "is one config dataclass validated with extra keys forbidden)",
        "item": "the type each value of a list option is read with (int, float)",
    },
    "sources": ["engine/arg_utils.py", "entrypoints/*/cli_args.py", "entrypoints/cli/serve.py"],
}

HUMAN_INT_FIELDS = {
    "max_model_len",
    "max_num_batched_tokens",
    "max_num_scheduled_tokens",
    "kv_cache_memory_bytes",
    "safetensors_prefetch_block_size",
    "max_num_queued_tokens",
}
_DEPRECATED_HELP = re.compile(
    r"\[DEPRECATED\]|\bis deprecated\b|\bdeprecated and will be removed", re.IGNORECASE
)


def classify(field: str, hints: set[str]) -> str:
    """Mirror of _compute_kwargs's decision ladder."""
    if "dataclass" in hints:
        return "json"
    if hints == {"bool", "str", "None"}:
        return "bool_or_str"
    if "bool" in hints:
        return "bool"
    if "Literal" in hints:
        return "str"
    if hints & {"tuple", "list", "set"}:
        return "list"
    if "int" in hints:
        return "hrint" if field in HUMAN_INT_FIELDS else "int"
    if "float" in hints:
        return "float"
    if "dict" in hints and ("str" in hints or "other" in hints):
        return "json_or_str"
    if "dict" in hints:
        return "json"
    return "str"


def explicit_kind(call: ast.Call) -> str | None:
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    action = kw.get("action")
    if action is not None:
        text = ast.unparse(action)
        if "store_true" in text or "store_false" in text:
            return "flag"
        if "BooleanOptionalAction" in text:
            return "bool"
        if "StoreBoolean" in text:  # 0.8.0-0.8.4: bare (const "True") or one true/false word
            return "bool_or_str"
        if "append" in text:
            return "append"
        if "store_const" in text:
            return "flag"
    nargs = kw.get("nargs")
    if nargs is not None:
        text = ast.unparse(nargs)
        if text in ("'+'", "'*'", '"+"', '"*"'):
            return "list"
        if text in ("'?'", '"?"'):
            # an optional value: the bare flag is accepted too (0.12's --hf-token)
            return "bool_or_str"
    typ = kw.get("type")
    if typ is not None:
        text = ast.unparse(typ)
        if text == "int":
            return "int"
        if text == "float":
            return "float"
        if "human_readable_int" in text:
            return "hrint"
        if "json.loads" in text:
            return "json"
        if "nullable_kvs" in text:  # 0.8.0-0.8.4 --limit-mm-per-prompt: image=16,video=2
            return "kvs"
        return "str"
    if action is None and typ is None and "default" in kw:
        return "str"
    return None


def kwargs_source(call: ast.Call, kwargs_vars: dict[str, str]) -> tuple[str, str] | None:
    """(class name, field) behind **x_kwargs["field"] (also inside {**x_kwargs[...], ...})."""
    for k in call.keywords:
        if k.arg is not None:
            continue
        value = k.value
        candidates = [value]
        if isinstance(value, ast.Dict):
            candidates = [v for key, v in zip(value.keys, value.values, strict=True) if key is None]
        for cand in candidates:
            if (
                isinstance(cand, ast.Subscript)
                and isinstance(cand.value, ast.Name)
                and isinstance(cand.slice, ast.Constant)
            ):
                var = cand.value.id
                if var in kwargs_vars:
                    return kwargs_vars[var], cand.slice.value
    return None


def _deprecated(pkg: Package, call: ast.Call) -> bool:
    helps: list[ast.expr] = []
    for k in call.keywords:
        if k.arg == "deprecated" and isinstance(k.value, ast.Constant) and k.value.value is True:
            return True
        if k.arg == "action" and "Deprecated" in ast.unparse(k.value):
            return True
        if k.arg == "help":
            helps.append(k.value)
        if k.arg is None and isinstance(k.value, ast.Dict):  # **{**kwargs["x"], "help": ...}
            helps += [
                v
                for key, v in zip(k.value.keys, k.value.values, strict=True)
                if isinstance(key, ast.Constant) and key.value == "help"
            ]
    texts: list[str] = []
    for expr in helps:
        for node in ast.walk(expr):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                texts.append(node.value)
            elif (isinstance(node, ast.Name) and node.id.isupper()) or (
                isinstance(node, ast.Name) and node.id.startswith("_")
            ):
                alias = pkg.find_alias(node.id)
                if alias is not None:
                    texts += [
                        n.value
                        for n in ast.walk(alias)
                        if isinstance(n, ast.Constant) and isinstance(n.value, str)
                    ]
    return bool(_DEPRECATED_HELP.search(" ".join(texts)))


def _record(
    kind: str, aliases: tuple[str, ...], choices: list[Any] | None, deprecated: bool
) -> dict[str, Any]:
    value: dict[str, Any] = {
        "kind": kind,
        "aliases": list(aliases),
        "json": kind in ("json", "json_or_str"),
    }
    if choices is not None:
        plain = [c for c in choices if c is not None]
        if plain and all(
            isinstance(c, (str, int, float)) and not isinstance(c, bool) for c in plain
        ):
            value["choices"] = sorted(set(plain), key=lambda c: (str(type(c)), c))
    if deprecated:
        value["deprecated"] = True
    return value


def extract_file(pkg: Package, rel: str, out: dict[str, dict[str, Any]]) -> None:
    tree = pkg.tree(rel)
    if tree is None:
        return
    kwargs_vars: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            fn = ast.unparse(node.value.func)
            if fn.endswith("get_kwargs") and node.value.args:
                arg = node.value.args[0]
                if isinstance(arg, ast.Name) and len(node.targets) == 1:
                    t = node.targets[0]
                    if isinstance(t, ast.Name):
                        kwargs_vars[t.id] = arg.id
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "add_argument":
            continue
        names = [
            a.value
            for a in node.args
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")
        ]
        longs = [n for n in names if n.startswith("--")]
        shorts = tuple(n for n in names if not n.startswith("--"))
        if not longs:
            continue
        kind = explicit_kind(node)
        choices = None
        explicit = next((k.value for k in node.keywords if k.arg == "choices"), None)
        if explicit is not None:
            choices = pkg.choices(explicit)
            converter = next((k.value for k in node.keywords if k.arg == "type"), None)
            if converter is not None and ast.unparse(converter) not in ("str", "int", "float"):
                choices = None  # argparse checks the converted value: not the raw word
        src = kwargs_source(node, kwargs_vars)
        key_value = False
        json_keys = None
        item_kind = None
        if src is not None:
            cls, field = src
            fields = pkg.class_fields(cls)
            if field in fields:
                if kind in (None, "str"):
                    hints = pkg.hints(fields[field].annotation)
                    kind = classify(field, hints)
                    key_value = kind == "json" and "dataclass" not in hints and pkg.dict_takes_kvs
                    if kind == "json":
                        json_keys = pkg.json_keys(fields[field].annotation)
                    if kind == "list":
                        item_kind = pkg.item_kind(fields[field].annotation)
                if explicit is None:
                    choices = pkg.field_choices(fields[field].annotation)
            elif kind is None:
                kind = "str"
        if kind is None:
            kind = "str"
        # -O was an alias of --compilation-config up to 0.11; the parser now rewrites -O<x>
        # to --optimization-level itself, so it is not kept as an alias.
        # A second long name (--device-memory-utilization) is an alias of the first.
        aliases = tuple(s for s in shorts if s != "-O") + tuple(longs[1:])
        if src is not None and f'["{src[1]}"]["choices"]' in pkg.text(rel):
            choices = None  # the release edits these choices in code: not static
        out[longs[0][2:]] = _record(kind, aliases, choices, _deprecated(pkg, node))
        if key_value:
            out[longs[0][2:]]["kvs"] = True
        if json_keys:
            out[longs[0][2:]]["keys"] = json_keys
        if item_kind:
            out[longs[0][2:]]["item"] = item_kind
    _loop_arguments(pkg, tree, out)


def _loop_arguments(pkg: Package, tree: ast.Module, out: dict[str, dict[str, Any]]) -> None:
    """``for arg, type in [("--x", str), ...]: group.add_argument(arg, type=type, ...)``
    (the deprecated guided-decoding flags of 0.11.x are added this way)."""
    for loop in ast.walk(tree):
        if not (isinstance(loop, ast.For) and isinstance(loop.iter, (ast.List, ast.Tuple))):
            continue
        targets = (
            [t.id for t in loop.target.elts if isinstance(t, ast.Name)]
            if isinstance(loop.target, ast.Tuple)
            else [loop.target.id]
            if isinstance(loop.target, ast.Name)
            else []
        )
        if not targets:
            continue
        calls = [
            n
            for stmt in loop.body
            for n in ast.walk(stmt)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "add_argument"
            and n.args
            and isinstance(n.args[0], ast.Name)
            and n.args[0].id == targets[0]
        ]
        for call in calls:
            kw = {k.arg: k.value for k in call.keywords if k.arg}
            type_var = kw.get("type")
            for element in loop.iter.elts:
                items = list(element.elts) if isinstance(element, ast.Tuple) else [element]
                bound = dict(zip(targets, items, strict=False))
                flag = bound.get(targets[0])
                if not (
                    isinstance(flag, ast.Constant)
                    and isinstance(flag.value, str)
                    and flag.value.startswith("--")
                ):
                    continue
                kind = explicit_kind(call) or "str"
                if isinstance(type_var, ast.Name) and type_var.id in bound:
                    typ = ast.unparse(bound[type_var.id])
                    kind = {"int": "int", "float": "float"}.get(typ, "str")
                out.setdefault(flag.value[2:], _record(kind, (), None, _deprecated(pkg, call)))


def extract_frontend(pkg: Package, rel: str, out: dict[str, dict[str, Any]]) -> None:
    extract_file(pkg, rel, out)
    tree = pkg.tree(rel)
    if tree is None:
        return
    text = pkg.text(rel)
    classes = [
        n.name for n in tree.body if isinstance(n, ast.ClassDef) and n.name.endswith("FrontendArgs")
    ]
    for cls in classes:
        for field, node in pkg.class_fields(cls).items():
            kind = classify(field, pkg.hints(node.annotation))
            out.setdefault(
                field.replace("_", "-"),
                _record(kind, (), pkg.field_choices(node.annotation), False),
            )
    # special cases made in _customize_cli_kwargs / add_cli_args
    for field in ("allowed_origins", "allowed_methods", "allowed_headers"):
        if f'["{field}"]["type"] = json.loads' in text:
            out[field.replace("_", "-")] = _record("json", (), None, False)
    if '["middleware"]["action"] = "append"' in text:
        out["middleware"] = _record("append", (), None, False)
    if '["lora_modules"]["action"]' in text or "LoRAParserAction" in text:
        out["lora-modules"] = _record("list", (), None, False)
    if '["default_chat_template_kwargs"]["type"] = json.loads' in text:
        out["default-chat-template-kwargs"] = _record("json", (), None, False)


def extract(release) -> dict[str, dict[str, Any]]:
    pkg = Package(release)
    if release.tree("engine/arg_utils.py") is None:
        release.problem("engine/arg_utils.py is missing or does not parse: no engine options")
    out: dict[str, dict[str, Any]] = {}
    extract_file(pkg, "engine/arg_utils.py", out)
    # make_arg_parser moved: entrypoints/openai/, entrypoints/launchers/, entrypoints/common/
    frontends = sorted(
        {
            rel
            for rel in release.glob("entrypoints/*cli_args.py")
            + release.glob("entrypoints/*/cli_args.py")
            if "def make_arg_parser" in pkg.text(rel)
        }
    )
    for rel in frontends:
        extract_frontend(pkg, rel, out)
    if not frontends:
        release.problem("no entrypoints/*/cli_args.py defines make_arg_parser: no frontend options")
    if release.text("entrypoints/cli/serve.py") is not None:
        extract_file(pkg, "entrypoints/cli/serve.py", out)
    _add_negations(pkg, out)
    return out


def _add_negations(pkg: Package, out: dict[str, dict[str, Any]]) -> None:
    """The option strings that set a BooleanOptionalAction option to false, as the release's
    argparse registers them: ``no-X`` for each long string, and with EnableDisableAction
    (0.33+) the ``enable-``/``disable-`` inverse of each."""
    inverses = (("enable-", "disable-"), ("disable-", "enable-"))
    for name, value in out.items():
        if value["kind"] != "bool":
            continue
        longs = [name] + [a[2:] for a in value["aliases"] if a.startswith("--")]
        negations = [f"no-{long}" for long in longs]
        if pkg.enable_disable_pairs:
            negations += [
                inverse + long[len(prefix) :]
                for long in longs
                for prefix, inverse in inverses
                if long.startswith(prefix)
            ]
        value["negations"] = negations


def _flag_groups(node: Any, version: str | None = None):
    """(serve.flags regex, ">=X" of the same `all` group or None) of a rule's `when`."""
    if isinstance(node, dict):
        if node.get("fact") == "serve.flags" and isinstance(node.get("matches"), str):
            yield node["matches"], version
            return
        if "all" in node:
            versions = [
                c.get("version")
                for c in node["all"]
                if isinstance(c, dict) and c.get("fact") == "vllm.version"
            ]
            for child in node["all"]:
                yield from _flag_groups(child, versions[0] if versions else version)
            return
        for value in node.values():
            yield from _flag_groups(value, version)
    elif isinstance(node, list):
        for value in node:
            yield from _flag_groups(value, version)


def audit(table: dict[str, Any], rules_dir) -> list[str]:
    """ARGS001/ARGS004 removal releases against the options table.

    Each removed flag the curated rules name must be in the table, and the first release
    after its last one must be the removal release the rule states (its ``>=X`` version
    test, or ARGS001's ``introduced`` event).
    """
    from pathlib import Path

    import yaml

    releases = table["releases"]
    problems = []
    for code in ("ARGS001", "ARGS004"):
        rule = yaml.safe_load((Path(rules_dir) / "args" / f"{code}.yaml").read_text("utf-8"))
        introduced = None
        for rng in (rule.get("affected") or {}).get("ranges", []):
            for event in rng.get("events", []):
                introduced = event.get("introduced", introduced)
        for pattern, version in _flag_groups(rule["when"]):
            removal = version[2:] if version and version.startswith(">=") else introduced
            regex = re.compile(pattern)
            names = [n for n in table["entries"] if regex.search(n)]
            if not names:
                problems.append(f"{code}: no option of any release matches {pattern!r}")
                continue
            for name in names:
                last = max((s["last"] for s in table["entries"][name]), key=releases.index)
                after = releases[releases.index(last) + 1] if last != releases[-1] else None
                if after != removal:
                    problems.append(
                        f"{code}: --{name} removed in {removal} by the rule, but "
                        f"the wheels have it up to {last} (first release without "
                        f"it: {after or 'none covered'})"
                    )
    return problems
