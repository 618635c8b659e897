#!/usr/bin/env python3
"""Build the calibration corpus: known-good `vllm serve` commands from vLLM itself, each
with the release it ran on, its source and the hardware its source names.

    python tools/calibration_corpus.py /work/wheels/src tests/fixtures/calibration/sources.txt \
        -o tests/fixtures/calibration/corpus.json

Three kinds of source, each tied to one release exactly:

* the release's own tree (``/work/wheels/src/<version>/vllm``, unpacked from its wheel):
  commands in its docstrings and scripts;
* the same tree's help texts and messages: each backquoted ``--option value`` example of a
  serve option (``--kv-cache-dtype fp8``, ``--hf-overrides '{...}'``) and each value an
  option's help gives as its example (``image=16,video=2``), served with a small model;
* ``sources.txt``: text taken from vLLM's documentation and repository at a release tag
  (versioned docs pages ``docs.vllm.ai/en/v<version>/...``; repository files with their
  commit), one block per source::

      ## source: https://docs.vllm.ai/en/v0.10.0/features/reasoning_outputs.html
      ## release: 0.10.0
      ## hardware: gpus=8 gpu=H100          (optional: what the source says it runs on)
      ## exclude: why the command is wrong for that release (optional, kept with it)
      ## kind: examples                 (optional: what the text is, e.g. examples/ at a tag)
      <the text, as on the page>

``repository.txt`` beside sources.txt: vLLM's CI pipelines, entrypoint tests, examples and
benchmarks at a commit, each version dated to a release (tools/calibration_repository.py).

``exclusions.json`` beside sources.txt maps a command to the reason it is genuinely wrong
for its release (kept in the corpus with the reason; the test skips it).

A command is a ``vllm serve`` or ``python -m vllm.entrypoints.openai.api_server`` line with
its backslash continuations, cut at the shell's control operators and comments. Commands
with placeholders (``<model>``, ``$MODEL``, ``...``) are left out: they are not runnable as
written. tests/test_calibration.py judges every entry with ``check --vllm-version``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

_START = re.compile(
    r"(?:^|[\s`(])((?:vllm serve|python3? -m vllm\.entrypoints\.openai\.api_server)"
    r"(?=\s|$).*)"
)
_PROMPT = re.compile(r"^\s*(?:\$|#|>>>)\s+")
_CUT = re.compile(r"\s(?:&&|\|\||;|\||&|>|>>|2>&1|2>|1>)(?:\s|$)|\s#|`|\"\"\"|'''")
_PLACEHOLDER = re.compile(r"<[^>]*>|\$\{?[A-Za-z_]|\.\.\.|…|\[[a-z_ ]+\]|\{[a-z_]+\}")


def _runnable(command: str) -> bool:
    """A command as written can run: it names a real model (a hub id ``org/name``, not
    ``/path/to/model``) and has no placeholder; a line of prose that mentions `vllm serve`
    names none."""
    if _PLACEHOLDER.search(command):
        return False
    words = command.split()
    rest = words[2:] if words[:2] == ["vllm", "serve"] else words[3:]
    model = next((w for w in rest if not w.startswith("-")), None) if rest else None
    if words[:2] != ["vllm", "serve"]:
        model = next((rest[i + 1] for i, w in enumerate(rest[:-1]) if w == "--model"), None)
    elif rest and rest[0].startswith("-"):
        model = None  # options first: the model is not where `vllm serve` takes it
    return (
        bool(model)
        and "/" in model
        and "path/to" not in model
        and re.fullmatch(r"[\w.@:/+-]+", model) is not None
    )


def extract_commands(text: str) -> list[str]:
    """The runnable serve commands in ``text``, in order, each once."""
    lines = text.splitlines()
    found: list[str] = []
    i = 0
    while i < len(lines):
        match = _START.search(_PROMPT.sub("", lines[i]))
        if not match:
            i += 1
            continue
        parts = [match.group(1)]
        while parts[-1].rstrip().endswith("\\") and i + 1 < len(lines):
            parts[-1] = parts[-1].rstrip().rstrip("\\")
            i += 1
            parts.append(_PROMPT.sub("", lines[i]).strip())
        i += 1
        command = " ".join(p.strip() for p in parts if p.strip())
        cut = _CUT.search(command)
        if cut:
            command = command[: cut.start()]
        command = " ".join(command.split())
        if not _runnable(command):
            continue
        if command.count("'") % 2 or command.count('"') % 2:
            continue  # a quote the excerpt cut
        if command not in found:
            found.append(command)
    return found


def _hardware(text: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in text.split():
        key, _, value = item.partition("=")
        out[key] = int(value) if value.isdigit() else value
    return out


def from_sources_file(path: Path) -> list[dict]:
    """Entries from a sources.txt (see the module docstring)."""
    entries: list[dict] = []
    blocks = re.split(r"(?m)^(?=## source: )", path.read_text(encoding="utf-8"))
    for block in blocks:
        head = dict(re.findall(r"(?m)^## (\w+): (.*)$", block))
        if "source" not in head or "release" not in head:
            continue
        body = re.sub(r"(?m)^## \w+: .*\n?", "", block)
        for command in extract_commands(body):
            entry = {"release": head["release"], "command": command, "source": head["source"]}
            if "commit" in head:
                entry["commit"] = head["commit"]
            if "hardware" in head:
                entry["hardware"] = _hardware(head["hardware"])
            if "exclude" in head:
                entry["exclude"] = head["exclude"]
            if "kind" in head:  # examples/ rendered by the docs at a tag, a recipe, ...
                entry["kind"] = head["kind"]
            entries.append(entry)
    return entries


def from_release_trees(root: Path) -> list[dict]:
    """Entries from each release's own tree: ``root/<version>/vllm/**``."""
    entries: list[dict] = []
    for tree in sorted(p for p in root.iterdir() if (p / "vllm").is_dir()):
        for path in sorted((tree / "vllm").rglob("*")):
            if path.suffix not in (".py", ".md", ".sh") or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if "vllm serve" not in text and "entrypoints.openai.api_server" not in text:
                continue
            for command in extract_commands(text):
                entries.append(
                    {
                        "release": tree.name,
                        "command": command,
                        "source": f"{path.relative_to(tree)} in the vllm {tree.name} wheel",
                    }
                )
    return entries


# an option with its value as a release's own help text or message writes it:
# `--limit-mm-per-prompt image=16,video=2`, `--kv-cache-dtype fp8`
_OPTION_EXAMPLE = re.compile(r"`(--[a-z0-9][a-z0-9-]*[ =](?:'[^'`]*'|[^\s`'][^\s`]*))`")
# code inside an example (an f-string's field), not a value a user types
_CODE = re.compile(r"\{[A-Za-z_][\w.()]*\}|%[sdr]")
# the model the help-text examples are served with: a small model every release registers
HELP_MODEL = "facebook/opt-125m"


_VALUE_EXAMPLE = re.compile(r"e\.g\.?:?,?\s*`([^`\s]+)`")


def _help_value_examples(path: Path) -> list[str]:
    """``--option value`` for each value an ``add_argument`` help text gives as its example
    ("e.g.: `image=16,video=2`" in 0.8.x's --limit-mm-per-prompt)."""
    import ast
    import shlex

    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
            continue
        longs = [
            a.value
            for a in node.args
            if isinstance(a, ast.Constant) and str(a.value).startswith("--")
        ]
        text = " ".join(
            n.value
            for k in node.keywords
            if k.arg == "help"
            for n in ast.walk(k.value)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        )
        for value in _VALUE_EXAMPLE.findall(text) if longs else ():
            if not value.startswith("-"):
                found.append(f"{longs[0]} {shlex.quote(value)}")
    return found


def from_release_help(root: Path, option_names: set[str]) -> list[dict]:
    """Entries from each release's own help texts and messages: every backquoted
    ``--option value`` example of a serve option (a bare ``--option`` in prose is a name,
    not an example), served with HELP_MODEL."""
    entries: list[dict] = []
    for tree in sorted(p for p in root.iterdir() if (p / "vllm").is_dir()):
        seen: set[str] = set()
        for path in sorted((tree / "vllm").rglob("*.py")):
            rel = path.relative_to(tree).as_posix()
            if "/benchmarks/" in rel or "/bench" in rel or "/tests/" in rel:
                continue  # other commands' options
            text = path.read_text(encoding="utf-8", errors="replace")
            examples = _OPTION_EXAMPLE.findall(text) if "`--" in text else []
            if rel.endswith(("engine/arg_utils.py", "cli_args.py")):
                examples += _help_value_examples(path)
            for example in examples:
                name = example[2:].split("=", 1)[0].split(" ", 1)[0]
                if (
                    name not in option_names
                    or example in seen
                    or _PLACEHOLDER.search(example)
                    or _CODE.search(example)
                ):
                    continue
                seen.add(example)
                unescaped = example.replace('\\"', '"')  # a Python string's escaped quotes
                entries.append(
                    {
                        "release": tree.name,
                        "command": f"vllm serve {HELP_MODEL} {unescaped}",
                        "source": f"{rel} in the vllm {tree.name} wheel (help text example)",
                    }
                )
    return entries


def merge_sources(sources: Path, output: Path) -> int:
    """The corpus with its sources.txt entries replaced by the file's current ones."""
    corpus = json.loads(output.read_text(encoding="utf-8"))
    fresh = from_sources_file(sources)
    named = {e["source"] for e in fresh}
    kept = [
        e for e in corpus["entries"] if e["source"] not in named and not _from_sources(e, sources)
    ]
    exclusions = sources.with_name("exclusions.json")
    reasons = json.loads(exclusions.read_text(encoding="utf-8")) if exclusions.is_file() else {}
    for entry in fresh:
        if entry["command"] in reasons:
            entry["exclude"] = reasons[entry["command"]]
    corpus["entries"] = kept + fresh
    output.write_text(json.dumps(corpus, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(fresh)} commands from {sources}, {len(kept)} kept -> {output}", file=sys.stderr)
    return 0


def _from_sources(entry: dict, sources: Path) -> bool:
    """An entry a sources.txt block wrote (a page or file, not a tree or repository version)."""
    return "match" not in entry and not entry["source"].startswith("vllm/")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", type=Path, help="unpacked release trees (<root>/<version>/vllm)")
    parser.add_argument("sources", type=Path, help="sources.txt (docs and repository text)")
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument(
        "--merge-sources",
        action="store_true",
        help="only re-read sources.txt into the existing output, keeping the entries from the "
        "trees and the repository (no trees needed)",
    )
    args = parser.parse_args(argv)
    if args.merge_sources:
        return merge_sources(args.sources, args.output)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from vllm_doctor.knowledge import load  # the option names of any release: serve options

    names = set(load("options").keys())
    entries = (
        from_release_trees(args.trees)
        + from_release_help(args.trees, names)
        + from_sources_file(args.sources)
    )
    repository = args.sources.with_name("repository.txt")
    dating: dict = {}
    if repository.is_file():  # vLLM's CI pipelines, tests, examples, each dated to a release
        from calibration_repository import from_repository_file

        found, kept, dropped = from_repository_file(repository, args.trees)
        entries += found
        for line in dropped:
            print(f"dropped (no close release match): {line}", file=sys.stderr)
        from calibration_repository import MAX_WINDOW, MIN_SCORE

        dating = {
            "repository_dating": {
                "method": "references: the vllm/ paths, vllm imports, parser names and header "
                "convention of each file version, resolved in each release's tree "
                f"(kept: best score >= {MIN_SCORE}, window <= {MAX_WINDOW} releases; "
                "judged with the window's newest release)",
                "kept_versions": kept,
                "dropped_versions": dropped,
            }
        }
        print(
            f"{len(found)} repository commands; {len(dropped)} file versions dropped",
            file=sys.stderr,
        )
    exclusions = args.sources.with_name("exclusions.json")
    if exclusions.is_file():  # command -> why it is wrong for its release (kept in the corpus)
        reasons = json.loads(exclusions.read_text(encoding="utf-8"))
        for entry in entries:
            if entry["command"] in reasons:
                entry["exclude"] = reasons[entry["command"]]
    args.output.write_text(
        json.dumps({"entries": entries, **dating}, indent=1, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    per_release: dict[str, int] = {}
    for entry in entries:
        per_release[entry["release"]] = per_release.get(entry["release"], 0) + 1
    print(f"{len(entries)} commands, {len(per_release)} releases -> {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
