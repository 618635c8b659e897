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
from typing import Any

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
BUILTIN_SIMPLE = {"bool", "int", "float", "str", "dict", "list", "tuple", "set", "None"}
_DEPRECATED_HELP = re.compile(
    r"\[DEPRECATED\]|\bis deprecated\b|\bdeprecated and will be removed", re.IGNORECASE
)


class Package:
    """Class, alias and enum lookup by name across one release's package."""

    SKIP = (
        "model_executor/models/",
        "benchmarks/",
        "third_party/",
        "vllm_flash_attn/",
        "tests/",
        "kernels/",
    )

    def __init__(self, release):
        self.release = release
        self._classes: dict[str, ast.ClassDef | None] = {}
        self._aliases: dict[str, ast.expr | None] = {}
        self._files: list[str] | None = None

    def files(self) -> list[str]:
        if self._files is None:

            def rank(rel: str) -> int:
                if rel.startswith("config/") or rel == "config.py":
                    return 0
                if rel.startswith(("engine/", "entrypoints/")):
                    return 1
                return 2

            self._files = sorted(
                (
                    n
                    for n in self.release.names
                    if n.endswith(".py") and not n.startswith(self.SKIP)
                ),
                key=rank,
            )
        return self._files

    def text(self, rel: str) -> str:
        return self.release.text(rel) or ""

    def tree(self, rel: str) -> ast.Module | None:
        return self.release.tree(rel)

    def find_class(self, name: str) -> ast.ClassDef | None:
        if name in self._classes:
            return self._classes[name]
        found = None
        for rel in self.files():
            if f"class {name}" not in self.text(rel):
                continue
            tree = self.tree(rel)
            if tree is None:
                continue
            found = next(
                (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None
            )
            if found is not None:
                break
        self._classes[name] = found
        return found

    @property
    def runtime_any(self) -> set[str]:
        """Names a config module binds to ``Any`` at run time (``if TYPE_CHECKING: from ...
        import QuantizationMethods`` / ``else: QuantizationMethods = Any``): get_kwargs sees
        Any there, not the Literal the name stands for when type checking (0.9-0.12's
        --quantization takes any word)."""
        if getattr(self, "_runtime_any", None) is None:
            names: set[str] = set()
            for rel in self.files():
                if not (rel.startswith("config/") or rel == "config.py"):
                    continue
                tree = self.tree(rel)
                if tree is None or "TYPE_CHECKING" not in self.text(rel):
                    continue
                for node in tree.body:
                    if not (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)):
                        continue
                    for stmt in node.orelse:
                        if (
                            isinstance(stmt, ast.Assign)
                            and ast.unparse(stmt.value).split(".")[-1] == "Any"
                        ):
                            names |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
            self._runtime_any = names
        return self._runtime_any

    def find_alias(self, name: str) -> ast.expr | None:
        if name in self._aliases:
            return self._aliases[name]
        found = None
        pattern = re.compile(rf"^{re.escape(name)}\s*(:[^=]*)?=", re.MULTILINE)
        for rel in self.files():
            text = self.text(rel)
            if not pattern.search(text) and f"type {name}" not in text:
                continue
            tree = self.tree(rel)
            if tree is None:
                continue
            for node in tree.body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    t = node.targets[0]
                    if isinstance(t, ast.Name) and t.id == name:
                        found = node.value
                if (
                    isinstance(node, ast.AnnAssign)
                    and isinstance(node.target, ast.Name)
                    and node.target.id == name
                    and node.value is not None
                ):
                    found = node.value
                if (
                    hasattr(ast, "TypeAlias")
                    and isinstance(node, ast.TypeAlias)
                    and node.name.id == name
                ):
                    found = node.value
                if found is not None:
                    break
            if found is not None:
                break
        self._aliases[name] = found
        return found

    def class_fields(self, name: str, seen: frozenset = frozenset()) -> dict[str, ast.AnnAssign]:
        cls = self.find_class(name)
        if cls is None or name in seen:
            return {}
        out: dict[str, ast.AnnAssign] = {}
        for base in cls.bases:
            if isinstance(base, ast.Name):
                out.update(self.class_fields(base.id, seen | {name}))
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                ann = ast.unparse(node.annotation)
                if ann.startswith(("ClassVar", "InitVar")):
                    continue
                out[node.target.id] = node
        return out

    def class_kind(self, name: str) -> str:
        """dataclass | enum | typeddict | other for a class name."""
        cls = self.find_class(name)
        if cls is None:
            return "other"
        bases = {ast.unparse(b) for b in cls.bases}
        if any("Enum" in b for b in bases):
            return "enum"
        if any("TypedDict" in b for b in bases):
            return "typeddict"
        if any(b == "dict" or b.startswith("dict[") for b in bases):
            return "typeddict"
        decos = {ast.unparse(d).split("(")[0] for d in cls.decorator_list}
        if decos & {
            "config",
            "dataclass",
            "dataclasses.dataclass",
            "pydantic.dataclasses.dataclass",
        }:
            return "dataclass"
        if any(b in ("BaseModel", "pydantic.BaseModel") for b in bases):
            return "dataclass"
        return "other"

    def enum_values(self, name: str, attr: str = "value") -> list[Any] | None:
        """The member values (or names) of an enum class, when they are literals."""
        cls = self.find_class(name)
        if cls is None or self.class_kind(name) != "enum":
            return None
        out = []
        for stmt in cls.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and not stmt.targets[0].id.startswith("_")
            ):
                if attr == "name":
                    out.append(stmt.targets[0].id)
                elif isinstance(stmt.value, ast.Constant):
                    out.append(stmt.value.value)
                else:
                    return None  # enum.auto() and friends: not a literal
        return out or None

    # -- annotations ------------------------------------------------------------------
    def hints(self, node: ast.expr, depth: int = 0) -> set[str]:
        """The set of top-level type hints, as get_type_hints() flattens them."""
        if depth > 12:
            return {"other"}
        if isinstance(node, ast.Constant):
            if node.value is None:
                return {"None"}
            if isinstance(node.value, str):
                try:
                    return self.hints(ast.parse(node.value, mode="eval").body, depth + 1)
                except SyntaxError:
                    return {"other"}
            return {"other"}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.hints(node.left, depth + 1) | self.hints(node.right, depth + 1)
        if isinstance(node, ast.Subscript):
            head = ast.unparse(node.value).split(".")[-1]
            items = _items(node.slice)
            if head == "Optional":
                return self.hints(items[0], depth + 1) | {"None"}
            if head == "Union":
                out: set[str] = set()
                for item in items:
                    out |= self.hints(item, depth + 1)
                return out
            if head in ("Annotated", "SkipValidation"):
                # pydantic's SkipValidation[T] is Annotated[T, ...] at run time: get_type_hints
                # sees T (0.9.1-0.11.0 type --enable-chunked-prefill this way)
                return self.hints(items[0], depth + 1)
            if head == "Literal":
                values = self.literal_values(node)
                if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                    return {"int"}
                return {"Literal"}
            if head in ("list", "List", "Sequence"):
                return {"list"}
            if head in ("tuple", "Tuple"):
                return {"tuple"}
            if head in ("set", "Set", "frozenset"):
                return {"set"}
            if head in ("dict", "Dict", "Mapping"):
                return {"dict"}
            return {"other"}
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = ast.unparse(node).split(".")[-1]
            if name in BUILTIN_SIMPLE:
                return {name}
            if name == "Any" or name in self.runtime_any:
                return {"other"}
            alias = self.find_alias(name)
            if alias is not None and not isinstance(alias, ast.Call):
                return self.hints(alias, depth + 1)
            if alias is not None and isinstance(alias, ast.Call):
                fn = ast.unparse(alias.func)
                if fn.endswith("NewType") and len(alias.args) > 1:
                    return self.hints(alias.args[1], depth + 1)
                if fn.endswith("TypeAliasType") and len(alias.args) > 1:
                    return self.hints(alias.args[1], depth + 1)
                if fn.endswith(("TypeVar", "NewType")):
                    return {"other"}
            kind = self.class_kind(name)
            if kind == "dataclass":
                return {"dataclass"}
            if kind == "typeddict":
                return {"dict"}
            if kind == "enum":
                return {"str"}
            return {"other"}
        return {"other"}

    def literal_values(self, node: ast.expr, depth: int = 0) -> list[Any] | None:
        """The values of a ``Literal[...]`` (nested Literal aliases flattened), else None."""
        if depth > 12:
            return None
        if isinstance(node, (ast.Name, ast.Attribute)):
            alias = self.find_alias(ast.unparse(node).split(".")[-1])
            return self.literal_values(alias, depth + 1) if alias is not None else None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                return self.literal_values(ast.parse(node.value, mode="eval").body, depth + 1)
            except SyntaxError:
                return None
        if not (
            isinstance(node, ast.Subscript) and ast.unparse(node.value).split(".")[-1] == "Literal"
        ):
            return None
        out: list[Any] = []
        for item in _items(node.slice):
            if isinstance(item, ast.Constant):
                out.append(item.value)
            else:
                nested = self.literal_values(item, depth + 1)
                if nested is None:
                    return None
                out.extend(nested)
        return out

    @property
    def dict_takes_kvs(self) -> bool:
        """0.8.5-0.9.2: get_kwargs's converter for a dict field reads a value that is not a
        JSON object as ``key=value,...`` pairs (nullable_kvs)."""
        text = self.text("engine/arg_utils.py")
        return "return_type is json.loads and not re.match" in text and "nullable_kvs(val)" in text

    def item_kind(self, annotation: ast.expr) -> str | None:
        """The type each value of a list option is read with (collection_to_kwargs: the
        element type; a union with ``str`` is read as str): "int", "float", or None."""
        for node in ast.walk(annotation):
            if not isinstance(node, ast.Subscript):
                continue
            head = ast.unparse(node.value).split(".")[-1]
            if head not in ("list", "List", "Sequence", "tuple", "Tuple", "set", "Set"):
                continue
            items = _items(node.slice)
            if not items:
                return None
            first = items[0]
            if isinstance(first, ast.Name) and first.id in ("int", "float"):
                return first.id
            return None
        return None

    @property
    def config_forbids_extra(self) -> bool:
        """The release's ``@config`` decorator gives its config dataclasses
        ``ConfigDict(extra="forbid")``: an unknown key in a JSON option is refused when
        ``parse_dataclass`` validates it (TypeAdapter.validate_json)."""
        text = self.text("config/utils.py")
        return "def config(" in text and 'extra="forbid"' in text

    def json_keys(self, annotation: ast.expr) -> list[str] | None:
        """The keys a JSON option of this annotation takes, where the release refuses any
        other: its type is one config dataclass (``None`` beside it at most) whose fields are
        validated with extra keys forbidden. None where any key may pass (a plain dict, a
        union with ``dict``, extra keys not forbidden)."""
        if not self.hints(annotation) <= {"dataclass", "None"}:
            return None
        names = [
            ast.unparse(n).split(".")[-1]
            for n in ast.walk(annotation)
            if isinstance(n, (ast.Name, ast.Attribute))
        ]
        classes = [n for n in dict.fromkeys(names) if self.class_kind(n) == "dataclass"]
        if len(classes) != 1:
            return None
        cls = self.find_class(classes[0])
        if cls is None:
            return None
        decos = [ast.unparse(d) for d in cls.decorator_list]
        forbids = any('extra="forbid"' in d or "extra='forbid'" in d for d in decos) or (
            "config" in {d.split("(")[0] for d in decos} and self.config_forbids_extra
        )
        if not forbids:
            return None
        if any(
            isinstance(fn, ast.FunctionDef)
            and any(
                "model_validator" in ast.unparse(d) and "before" in ast.unparse(d)
                for d in fn.decorator_list
            )
            for fn in ast.walk(cls)
        ):
            return None  # a validator before the fields may read or rename other keys
        keys = []
        for name, node in self.class_fields(classes[0]).items():
            value = node.value
            if (
                isinstance(value, ast.Call)
                and ast.unparse(value.func).split(".")[-1] in ("field", "Field")
                and any(
                    k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                    for k in value.keywords
                )
            ):
                continue  # not an __init__ argument: refused as a key too
            keys.append(name)
        for node in ast.walk(cls):  # InitVar fields are __init__ arguments
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and ast.unparse(node.annotation).startswith("InitVar")
            ):
                keys.append(node.target.id)
        return sorted(set(keys)) or None

    @property
    def enable_disable_pairs(self) -> bool:
        """0.33+: the parser registers EnableDisableAction for BooleanOptionalAction, which
        pairs ``--enable-x`` with ``--disable-x`` (and keeps ``--no-enable-x``)."""
        return any(
            'register("action", BooleanOptionalAction, EnableDisableAction)' in self.text(rel)
            for rel in ("utils/argparse_utils.py", "utils/__init__.py", "utils.py")
        )

    @property
    def literal_with_str_is_free(self) -> bool:
        """Newer get_kwargs: a Literal beside ``str`` gives a metavar, not choices."""
        text = self.text("engine/arg_utils.py") + self.text("config/utils.py")
        return '"metavar" if contains_type(type_hints, str)' in text

    def field_choices(self, annotation: ast.expr) -> list[Any] | None:
        """Choices get_kwargs gives a field: a Literal's values, ints included (the Literal
        rung comes before int; not beside ``str`` in the releases that make that a metavar);
        ``"None"`` too for an Optional field only where the release appends None itself
        (0.33.0): before it appended the string "None" while ``optional_type`` turns the
        value "None" into None, which argparse then refuses ("invalid choice: None")."""
        hints = self.hints(annotation)
        found = [
            values
            for part in _union_parts(annotation)
            if (values := self.literal_values(part)) is not None
        ]
        if not found or not hints & {"Literal", "int"}:
            return None  # no Literal get_kwargs sees (a name bound to Any at run time)
        if "str" in hints and self.literal_with_str_is_free:
            return None
        if hints & {"bool", "dataclass"}:
            return None  # the ladder decides before looking at the Literal
        return found[0] + (["None"] if "None" in hints and self.none_is_a_choice else [])

    @property
    def none_is_a_choice(self) -> bool:
        return '["choices"].append(None)' in self.text("engine/arg_utils.py")

    def choices(self, node: ast.expr, depth: int = 0) -> list[Any] | None:
        """A ``choices=`` expression, when it is fixed statically; else None."""
        if depth > 8:
            return None
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out: list[Any] = []
            for elt in node.elts:
                if isinstance(elt, ast.Constant):
                    out.append(elt.value)
                elif isinstance(elt, ast.Starred):
                    inner = self.choices(elt.value, depth + 1)
                    if inner is None:
                        return None
                    out.extend(inner)
                else:
                    return None
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.choices(node.left, depth + 1), self.choices(node.right, depth + 1)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.Call):
            fn = ast.unparse(node.func).split(".")[-1]
            if fn == "get_args" and node.args:
                return self.literal_values(node.args[0])
            if fn in ("list", "sorted", "tuple", "set") and len(node.args) == 1:
                return self.choices(node.args[0], depth + 1)
            return None
        if isinstance(node, ast.ListComp) and len(node.generators) == 1:
            gen = node.generators[0]
            elt = node.elt
            if (
                isinstance(elt, ast.Attribute)
                and isinstance(elt.value, ast.Name)
                and isinstance(gen.target, ast.Name)
                and elt.value.id == gen.target.id
                and elt.attr in ("value", "name")
                and not gen.ifs
            ):
                return self.enum_values(ast.unparse(gen.iter).split(".")[-1], elt.attr)
            return None
        if isinstance(node, (ast.Name, ast.Attribute)):
            alias = self.find_alias(ast.unparse(node).split(".")[-1])
            if alias is None:
                return None
            values = self.literal_values(alias)
            return values if values is not None else self.choices(alias, depth + 1)
        return None


def _items(slice_node: ast.expr) -> list[ast.expr]:
    return list(slice_node.elts) if isinstance(slice_node, ast.Tuple) else [slice_node]


def _union_parts(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union_parts(node.left) + _union_parts(node.right)
    if isinstance(node, ast.Subscript) and ast.unparse(node.value).split(".")[-1] in (
        "Optional",
        "Union",
        "Annotated",
        "SkipValidation",
    ):
        items = _items(node.slice)
        if ast.unparse(node.value).endswith(("Annotated", "SkipValidation")):
            items = items[:1]
        return [p for item in items for p in _union_parts(item)]
    return [node]


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
