"""The serve lines the differential check runs: the calibration corpus's commands and
variants of every option in every value form, each an argument list after `vllm serve`.

* ``corpus``: every distinct command of tests/fixtures/calibration/corpus.json;
* ``corpus-form``: each corpus command rewritten in another form vLLM's parser reads the
  same way: ``--k v`` as ``--k=v``, underscores in the key, a JSON option's object as dotted
  keys (``--speculative-config.method mtp``; ``-cc.<key>`` for ``--compilation-config``), a
  human-readable int (``32768`` as ``32K``);
* ``option``: every option of the covered releases (knowledge/data/options.json) with a value
  of its kind, as ``--k v``, ``--k=v``, ``--k_with_underscores v``, its short aliases,
  ``--no-k`` for a boolean, ``--k.key v`` for a JSON option, a human-readable int for an
  hrint option, and a value of the wrong kind (``abc`` for a number) — which every release
  should refuse;
* ``shorthand``: ``-O3``, ``-O 3``, ``-O=3``, ``-Odecode``, ``-cc.mode=3``, ``-cc.cudagraph_mode
  FULL``.

A case is ``{"id", "kind", "argv", "config": bool}``: ``config`` asks for the config stage
too (the corpus and its forms; the option lines are judged at parse only).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "calibration" / "corpus.json"
OPTIONS = ROOT / "vllm_doctor" / "knowledge" / "data" / "options.json"
MODEL = "Qwen/Qwen3-8B"
# a value of each kind argparse reads
VALUE = {
    "int": "2",
    "hrint": "4096",
    "float": "0.5",
    "str": "auto",
    "json": "{}",
    "json_or_str": "{}",
    "list": "a",
    "append": "a",
    "kvs": "image=1",
}
WRONG = {"int": "abc", "hrint": "abc", "float": "abc", "json": "{bad"}
_ENTRY_POINTS = ("vllm serve", "python -m vllm.entrypoints.openai.api_server")


def _after_serve(command: str) -> list[str] | None:
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return None
    if words[:2] == ["vllm", "serve"]:
        return words[2:]
    return None


def _forms(argv: list[str]) -> list[tuple[str, list[str]]]:
    """Other spellings of one serve line that vLLM's parser reads the same way."""
    out: list[tuple[str, list[str]]] = []
    flags = [i for i, w in enumerate(argv) if w.startswith("--") and "=" not in w]
    joined, underscored, dotted, human = list(argv), list(argv), [], list(argv)
    skip = set()
    for i in flags:
        if i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            joined[i] = f"{argv[i]}={argv[i + 1]}"
            skip.add(i + 1)
        underscored[i] = "--" + argv[i][2:].replace("-", "_")
    joined = [w for j, w in enumerate(joined) if j not in skip]
    if joined != argv:
        out.append(("equals", joined))
    if underscored != argv:
        out.append(("underscores", underscored))
    for i in flags:
        if i + 1 >= len(argv):
            continue
        value = argv[i + 1]
        if value.strip().startswith("{"):
            try:
                obj = json.loads(value)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj:
                key = "-cc" if argv[i] == "--compilation-config" else argv[i]
                pieces = [w for k, v in obj.items() for w in (f"{key}.{k}", json.dumps(v))]
                dotted = argv[:i] + argv[i + 2 :] + pieces
                # one form per JSON option of the line, each with its own id
                out.append((f"dotted:{argv[i].lstrip('-')}", dotted))
        elif (
            re.fullmatch(r"\d+", value)
            and int(value) >= 1024
            and int(value) % 1024 == 0
            and argv[i] in ("--max-model-len", "--max-num-batched-tokens")
        ):
            human[i + 1] = f"{int(value) // 1024}K"
    if human != argv:
        out.append(("human-int", human))
    return out


def _option_lines(options: dict) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for name, spans in sorted(options["entries"].items()):
        spec = spans[-1]["value"]  # the newest release that has it
        kind = spec["kind"]
        base = [MODEL]
        value = str(spec["choices"][0]) if spec.get("choices") else VALUE.get(kind)
        if name in ("model", "config"):
            continue
        if kind in ("bool", "flag", "bool_or_str"):
            out.append((f"{name}", [*base, f"--{name}"]))
            if kind == "bool":
                out.append((f"{name}:no", [*base, f"--no-{name}"]))
            out.append((f"{name}:underscores", [*base, "--" + name.replace("-", "_")]))
        else:
            out.append((f"{name}", [*base, f"--{name}", value]))
            out.append((f"{name}:equals", [*base, f"--{name}={value}"]))
            out.append((f"{name}:underscores", [*base, "--" + name.replace("-", "_"), value]))
            if kind in WRONG and not spec.get("choices"):
                out.append((f"{name}:wrong-kind", [*base, f"--{name}", WRONG[kind]]))
            if kind == "hrint":
                out.append((f"{name}:human-int", [*base, f"--{name}", "4k"]))
            if kind == "json":
                out.append((f"{name}:dotted", [*base, f"--{name}.key", "1"]))
        for alias in spec.get("aliases", ()):
            if alias.startswith("--"):
                continue
            if kind in ("bool", "flag", "bool_or_str"):
                out.append((f"{name}:{alias}", [*base, alias]))
            else:
                out.append((f"{name}:{alias}", [*base, alias, value]))
    return out


SHORTHANDS = [
    ("O3", [MODEL, "-O3"]),
    ("O 3", [MODEL, "-O", "3"]),
    ("O=3", [MODEL, "-O=3"]),
    ("Odecode", [MODEL, "-Odecode"]),
    ("cc.mode=3", [MODEL, "-cc.mode=3"]),
    ("cc.cudagraph_mode", [MODEL, "-cc.cudagraph_mode", "FULL"]),
    ("cc.mode none", [MODEL, "-cc.mode=none", "-cc.cudagraph_mode=none"]),
    ("compilation-config.mode", [MODEL, "--compilation-config.mode", "3"]),
    (
        "speculative-config dotted",
        [
            MODEL,
            "--speculative-config.method",
            "ngram",
            "--speculative-config.num_speculative_tokens",
            "3",
        ],
    ),
    ("typo", [MODEL, "--tensor-parallel-sise", "2"]),
    ("abbreviation", [MODEL, "--tensor-parallel", "2"]),
]


def build() -> list[dict]:
    cases: list[dict] = []
    seen: set[tuple[str, ...]] = set()
    ids: set[str] = set()

    def add(kind: str, label: str, argv: list[str], config: bool) -> None:
        key = tuple(argv)
        if key in seen:
            return
        seen.add(key)
        case_id = f"{kind}:{label}"
        # results are matched by id: two lines under one id would count as one
        if case_id in ids:
            raise ValueError(f"two serve lines under the id {case_id}")
        ids.add(case_id)
        cases.append({"id": case_id, "kind": kind, "argv": argv, "config": config})

    entries = json.loads(CORPUS.read_text(encoding="utf-8"))["entries"]
    for n, command in enumerate(dict.fromkeys(e["command"] for e in entries)):
        argv = _after_serve(command)
        if not argv:
            continue
        add("corpus", f"{n}", argv, True)
        for form, variant in _forms(argv):
            add("corpus-form", f"{n}:{form}", variant, True)
    for label, argv in _option_lines(json.loads(OPTIONS.read_text(encoding="utf-8"))):
        add("option", label, argv, False)
    for label, argv in SHORTHANDS:
        add("shorthand", label, argv, False)
    return cases


if __name__ == "__main__":
    import sys
    from collections import Counter

    built = build()
    print(Counter(c["kind"] for c in built), file=sys.stderr)
    for case in built:
        print(json.dumps(case))
