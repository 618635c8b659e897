"""Serve and engine commands from vLLM's own repository (CI pipelines, entrypoint tests,
examples, benchmarks), each tied to the release whose tree matches the file version best.

``repository.txt`` (beside sources.txt) holds file versions read from vllm-project/vllm at a
commit, one block each, kept to the parts this tool reads (the pipeline steps with their
``num_gpus``/``gpu``/queue, a test's server arguments and imports, a script's serve lines)::

    ## file: .buildkite/test-pipeline.yaml
    ## commit: 000e03674a88d9eea0906a4b002250271dd3484d
    ## kind: pipeline            (pipeline | tests | examples | benchmarks)
    ## format: yaml              (yaml | python | shell)
    ## hardware: gpus=1 gpu=L4   (optional: where a test file's step runs it)
    ## platform: rocm            (optional: a step for another platform, left out with it)
    <the excerpt, as in the file>

Commands are parsed, never executed:

* yaml: each step's ``commands`` (a multi-node step's lists too); ``vllm serve`` lines, and
  engine commands -- an example script that takes EngineArgs' own options
  (``ENGINE_SCRIPTS``) run with ``--model M ...`` is the same engine configuration as
  ``vllm serve M ...``. The step's GPUs: ``num_gpus`` (default 1), ``gpu`` (default L4, as the
  pipeline's header says), ``num_devices``/``device`` in the newer pipelines, or a named agent
  queue (``gpu_1_queue``, ``gpu_4_queue``, ``h100``, ``b200-k8s``); an AMD Instinct device
  (``mi300_2``: two MI300X, also as a step's ``mirror``) is judged on that GPU; a CPU, TPU,
  XPU, HPU or other accelerator agent is another platform: its commands are kept with the
  platform (``left_out``) and not judged.
* python: ``RemoteOpenAIServer(MODEL, ARGS)`` calls and ``{"model": ..., "arguments": [...]}``
  server configurations, with the names they use resolved to the file's own literals (a
  fixture function that returns the list, ``MODELS[key]`` as each model of the dict,
  ``json.dumps({...})`` as its JSON text, ``str(VLLM_PATH / "x.jinja")`` as ``x.jinja``);
  an argument that is other code leaves the command out.
* shell: ``vllm serve`` lines (tools/serve_commands.extract_commands).

Matching a file version to a release: the vLLM repository files cannot be read at a release
tag here, and a commit's vllm/ sources are not stored beside each file version, so a version
is dated by what it refers to, against each release's unpacked tree: the vllm/ paths a
pipeline names (``source_file_dependencies``), the modules and names a test or script imports
from vllm, the tool-call and reasoning parsers its commands name (each a quoted name in the
release's parser modules), and the repository's header convention (``SPDX-FileCopyrightText``
first appears in 0.9.1's files; a file without it predates that). The score of a release is
the share of references its tree resolves; the releases with the best score are the version's
window, and it is judged with the newest release of that window (the one whose tree still has
everything the file used). Versions whose best score is below MIN_SCORE or whose window spans
more than MAX_WINDOW releases do not match a release closely and are dropped, with a count.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from functools import cache
from pathlib import Path

from packaging.version import Version

MIN_SCORE = 0.9
MAX_WINDOW = 8

# example scripts whose parser is EngineArgs.add_cli_args: `--model M rest` is `vllm serve M rest`
ENGINE_SCRIPTS = re.compile(
    r"(?:^|/)offline_inference/basic/(?:generate|chat|classify|embed|"
    r"score|reward)\.py$"
)
OTHER_PLATFORMS = ("cpu", "tpu", "xpu", "hpu", "intel", "arm", "neuron", "gaudi", "ascend", "npu")
QUEUE_GPUS = {"gpu_1_queue": 1, "gpu_4_queue": 4, "gpu_8_queue": 8}
QUEUE_GPU_NAMES = {"h100": "H100", "h200": "H200", "b200": "B200", "a100": "A100", "l4": "L4"}
AMD_GPUS = {"250": "MI250X", "300": "MI300X", "325": "MI325X", "350": "MI355X", "355": "MI355X"}


def parse_blocks(text: str) -> list[dict]:
    """The file-version blocks of a repository.txt."""
    blocks = []
    for chunk in re.split(r"(?m)^(?=## file: )", text):
        head = dict(re.findall(r"(?m)^## (\w+): (.*)$", chunk))
        if "file" not in head:
            continue
        head["body"] = re.sub(r"(?m)^## \w+: .*\n?", "", chunk)
        blocks.append(head)
    return blocks


# --- commands -------------------------------------------------------------------------------


def _engine_command(line: str) -> str | None:
    """``python3 .../generate.py --model M rest`` -> ``vllm serve M rest`` for ENGINE_SCRIPTS."""
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        words = words[1:]  # environment assignments
    if (
        len(words) < 2
        or not re.fullmatch(r"python3?", words[0])
        or not ENGINE_SCRIPTS.search(words[1])
    ):
        return None
    rest = words[2:]
    if "--model" not in rest or rest.index("--model") + 1 >= len(rest):
        return None  # the script's own default model: not named in the command
    at = rest.index("--model")
    model = rest[at + 1]
    args = rest[:at] + rest[at + 2 :]
    return shlex.join(["vllm", "serve", model, *args])


def _device(name: str) -> tuple[str | None, int | None, str | None]:
    """(GPU, count, other platform) a device or queue name gives: ``h100``, ``b200-k8s``,
    ``mi300_2`` (two MI300X), ``gpu_4_queue``, ``amd_cpu`` (a CPU agent: another platform)."""
    lowered = name.lower()
    count = QUEUE_GPUS.get(lowered)
    suffix = re.search(r"_(\d+)$", lowered)
    if suffix and count is None:
        count = int(suffix.group(1))
    amd = re.search(r"mi(\d{3})", lowered)
    if amd:
        return AMD_GPUS.get(amd.group(1), "MI300X"), count, None
    if any(p in lowered for p in OTHER_PLATFORMS):
        return None, None, name
    gpu = next((gpu for key, gpu in QUEUE_GPU_NAMES.items() if key in lowered), None)
    return gpu, count, None


def _step_hardware(step: dict) -> list[tuple[dict, str | None]]:
    """(hardware, other platform or None) for each place a pipeline step runs: its own
    device, and each named mirror (``mirror: {amd: {device: mi300_2}}``)."""
    if step.get("no_gpu"):
        return [({}, "cpu (no_gpu)")]
    agents = step.get("agents")
    queue = str(agents.get("queue", "")) if isinstance(agents, dict) else ""
    device = str(step.get("gpu") or step.get("device") or queue or step.get("agent_pool") or "")
    gpu, count, platform = _device(device) if device else (None, None, None)
    if platform:
        return [({}, platform)]
    gpus = int(step.get("num_gpus") or step.get("num_devices") or count or 1)
    places = [({"gpus": gpus, "gpu": gpu or "L4"}, None)]  # L4: the pipelines' default
    for mirror in (step.get("mirror") or {}).values():
        if isinstance(mirror, dict) and mirror.get("device"):
            gpu, count, platform = _device(str(mirror["device"]))
            places.append(
                ({}, platform)
                if platform
                else ({"gpus": int(count or gpus), "gpu": gpu or "L4"}, None)
            )
    return places


def _yaml_commands(text: str) -> list[tuple[str, dict, str | None, str]]:
    """(command, hardware, other platform, step label) for each serve/engine command."""
    import yaml
    from serve_commands import extract_commands

    doc = yaml.safe_load(text) or []
    steps = doc.get("steps", []) if isinstance(doc, dict) else doc
    found = []
    for step in steps:
        if not isinstance(step, dict):
            continue
        places = _step_hardware(step)
        lines = step.get("commands") or [step.get("command")]
        flat = []
        for line in lines:  # a multi-node step: one list per node
            flat.extend(line if isinstance(line, list) else [line])
        for line in flat:
            if not isinstance(line, str):
                continue
            commands = extract_commands(line) if "vllm serve" in line else []
            engine = _engine_command(line)
            for command in commands + ([engine] if engine else []):
                found += [
                    (command, hardware, platform, str(step.get("label", "")))
                    for hardware, platform in places
                ]
    return found


class _Names:
    """The literals a test module binds to names: strings, numbers, lists, dicts of them."""

    def __init__(self, tree: ast.AST):
        self.values: dict[str, object] = {}
        for node in ast.walk(tree):  # module and function level, in source order
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = self.value(node.value)
                for target in targets:
                    if isinstance(target, ast.Name) and value is not None:
                        self.values[target.id] = value
            elif isinstance(node, ast.FunctionDef):  # a fixture that returns the arguments
                returns = [
                    n.value
                    for n in ast.walk(node)
                    if isinstance(n, ast.Return) and n.value is not None
                ]
                if len(returns) == 1 and isinstance(self.value(returns[0]), list):
                    self.values[node.name] = self.value(returns[0])

    def value(self, node: ast.AST):
        """The literal ``node`` stands for, or None where it is code."""
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)):
            return node.value
        if isinstance(node, ast.Name):
            return self.values.get(node.id)
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.value(e) for e in node.elts]
            return None if any(i is None for i in items) else items
        if isinstance(node, ast.Dict):
            keys = [self.value(k) for k in node.keys if k is not None]
            values = [self.value(v) for v in node.values]
            if len(keys) != len(node.keys) or any(v is None for v in keys + values):
                return None
            return dict(zip(keys, values, strict=True))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.value(node.left), self.value(node.right)
            return left + right if isinstance(left, list) and isinstance(right, list) else None
        if isinstance(node, ast.Call) and node.args:
            func = (
                node.func.attr
                if isinstance(node.func, ast.Attribute)
                else getattr(node.func, "id", "")
            )
            arg = node.args[0]
            if func == "list":
                return self.value(arg)
            if func == "dumps":  # json.dumps({"image": MAXIMUM_IMAGES})
                value = self.value(arg)
                return None if value is None else json.dumps(value)
            # str(VLLM_PATH / "examples/x.jinja"): the repository file it names
            if func == "str" and isinstance(arg, ast.BinOp) and isinstance(arg.right, ast.Constant):
                return str(arg.right.value)
        return None

    def models(self, node: ast.AST) -> list[str]:
        """The model names ``node`` stands for: a string, or ``MODELS[key]`` (each model)."""
        if isinstance(node, ast.Subscript):
            table = self.value(node.value)
            return (
                [v for v in table.values() if isinstance(v, str)] if isinstance(table, dict) else []
            )
        if isinstance(node, ast.Name) and node.id not in self.values:
            # model_name = MODELS[model_key] inside the function
            return self.values.get(f"models:{node.id}", [])
        value = self.value(node)
        return [value] if isinstance(value, str) else []


def _python_commands(text: str) -> list[str]:
    tree = ast.parse(text)
    names = _Names(tree)
    for node in ast.walk(tree):  # model_name = MODELS[model_key]
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.values[f"models:{target.id}"] = names.models(node.value)
    commands = []

    def add(model_node: ast.AST, args) -> None:
        if not isinstance(args, list):
            return
        # one word per list element, as argv; an element with a space ("--tokenizer_mode
        # hf") is written as the words a user types
        argv = [
            w
            for a in map(str, args)
            for w in (
                [a]
                if " " not in a or a.lstrip().startswith(("{", "[")) or not a.startswith("-")
                else shlex.split(a)
            )
        ]
        for model in names.models(model_node):
            commands.append(shlex.join(["vllm", "serve", model, *argv]))

    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", "") == "RemoteOpenAIServer"
            and len(node.args) >= 2
        ):
            add(node.args[0], names.value(node.args[1]))
        if isinstance(node, ast.Dict):
            keys = {
                k.value: v
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant)
            }
            extended = keys.get("extended")  # "tests do not run in CI automatically"
            if isinstance(extended, ast.Constant) and extended.value is True:
                continue
            if "model" in keys and "arguments" in keys:
                args = names.value(keys["arguments"])
                common = names.values.get("ARGS", [])  # tool_use/conftest.py: ARGS + arguments
                add(keys["model"], None if args is None else common + args)
    return list(dict.fromkeys(commands))


def commands_of(block: dict) -> list[tuple[str, dict, str | None, str]]:
    """(command, hardware, other platform, where) for a block's commands."""
    from serve_commands import extract_commands

    body, fmt = block["body"], block.get("format", "shell")
    hardware = _hardware_field(block.get("hardware", ""))
    platform = block.get("platform")
    if fmt == "yaml":
        return _yaml_commands(body)
    commands = _python_commands(body) if fmt == "python" else extract_commands(body)
    return [(c, hardware, platform, "") for c in commands]


def _hardware_field(text: str) -> dict:
    out: dict = {}
    for item in text.split():
        key, _, value = item.partition("=")
        out[key] = int(value) if value.isdigit() else value
    return out


# --- dating ---------------------------------------------------------------------------------


def references(block: dict, commands: list[str]) -> list[tuple[str, str]]:
    """(kind, reference) pairs the version's text makes to vllm's tree."""
    body = block["body"]
    refs: list[tuple[str, str]] = []
    for path in re.findall(r"(?<![\w/.])(vllm/[\w/.]+\w)", body):
        refs.append(("path", path.rstrip("/")))
    if block.get("format") == "python":
        for node in ast.walk(ast.parse(body)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vllm"):
                refs.append(("module", node.module))
                refs += [("name", f"{node.module}:{a.name}") for a in node.names]
            elif isinstance(node, ast.Import):
                refs += [("module", a.name) for a in node.names if a.name.startswith("vllm")]
    if block.get("format") == "python" and "SPDX-License-Identifier" in body:
        refs.append(("header", "present" if "SPDX-FileCopyrightText" in body else "absent"))
    for command in commands:
        words = shlex.split(command)
        for option, kind in (
            ("--tool-call-parser", "tool_parser"),
            ("--reasoning-parser", "reasoning_parser"),
        ):
            refs += [(kind, words[i + 1]) for i, w in enumerate(words[:-1]) if w == option]
    return list(dict.fromkeys(refs))


@cache
def _parser_text(tree: Path, kind: str) -> str:
    marker = "tool_parser" if kind == "tool_parser" else "reasoning"
    return "\n".join(
        p.read_text(encoding="utf-8", errors="replace")
        for p in (tree / "vllm").rglob("*.py")
        if marker in p.as_posix()
    )


@cache
def _module_text(tree: Path, module: str) -> str | None:
    base = tree / Path(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path.read_text(encoding="utf-8", errors="replace")
    return None


def _resolves(tree: Path, kind: str, ref: str) -> bool:
    if kind == "path":
        path = tree / ref
        return path.exists() or path.with_suffix(".py").exists()
    if kind == "module":
        return _module_text(tree, ref) is not None
    if kind == "name":
        module, name = ref.split(":")
        text = _module_text(tree, module)
        sub = _module_text(tree, f"{module}.{name}")  # `from vllm.x import submodule`
        return sub is not None or (
            text is not None and re.search(rf"\b{re.escape(name)}\b", text) is not None
        )
    if kind == "header":
        has = "SPDX-FileCopyrightText" in (tree / "vllm" / "__init__.py").read_text()
        return has == (ref == "present")
    return re.search(rf"[\"']{re.escape(ref)}[\"']", _parser_text(tree, kind)) is not None


def match_release(trees: list[Path], refs: list[tuple[str, str]]) -> dict:
    """The best-matching releases for a version's references."""
    if not refs:
        return {"score": 0.0, "window": [], "references": 0}
    scores = {tree.name: sum(_resolves(tree, k, r) for k, r in refs) / len(refs) for tree in trees}
    best = max(scores.values())
    window = sorted((v for v, s in scores.items() if s == best), key=Version)
    return {"score": round(best, 3), "window": window, "references": len(refs)}


def from_repository_file(path: Path, root: Path) -> tuple[list[dict], list[str], list[str]]:
    """Corpus entries from repository.txt, and a line for each version kept and dropped."""
    trees = sorted(
        (p for p in root.iterdir() if (p / "vllm").is_dir()), key=lambda p: Version(p.name)
    )
    entries, kept, dropped = [], [], []
    for block in parse_blocks(path.read_text(encoding="utf-8")):
        found = commands_of(block)
        refs = references(block, [c for c, *_ in found])
        match = match_release(trees, refs)
        where = f"{block['file']}@{block.get('commit', '?')[:10]}"
        if match["score"] < MIN_SCORE or not match["window"] or len(match["window"]) > MAX_WINDOW:
            dropped.append(
                f"{where}: score {match['score']}, window {len(match['window'])} releases"
            )
            continue
        release = match["window"][-1]
        kept.append(
            f"{where}: {release} (score {match['score']}, window {match['window'][0]}-{release})"
        )
        for command, hardware, platform, label in found:
            entry = {
                "release": release,
                "command": command,
                "source": f"https://github.com/vllm-project/vllm/blob/"
                f"{block.get('commit', 'main')}/{block['file']}"
                + (f" (step: {label})" if label else ""),
                "commit": block.get("commit"),
                "kind": block.get("kind", "tests"),
                "match": {"method": "references", **match},
            }
            if hardware:
                entry["hardware"] = hardware
            if platform:
                entry["left_out"] = (
                    f"runs on {platform}, a platform the doctor's "
                    "--gpu target cannot name (kept, not judged)"
                )
            entries.append(entry)
    return entries, kept, dropped
