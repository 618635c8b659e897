"""One release's package read by name, statically (for the options extractor): where a class,
an alias or an enum is defined, a config class's fields, the type hints ``get_kwargs`` sees in
an annotation, the choices a Literal or an enum allows, and which conventions of
``_compute_kwargs`` the release follows. Nothing of the release is imported or executed."""

from __future__ import annotations

import ast
import re
from typing import Any

BUILTIN_SIMPLE = {"bool", "int", "float", "str", "dict", "list", "tuple", "set", "None"}


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
