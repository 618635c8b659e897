"""Add reports to the corpus from a multi-document YAML file.

    python bench/reports2026/ingest.py STAGING.yaml [--replace]

Each document is one report as in ``schema.py``, with its inputs inline: ``log`` (the crash log
as pasted), ``serve`` (the serve line), ``report`` (a collect-env report), ``config`` (the
model's config.json as a mapping). They are written as files into ``reports/<id>/`` beside
``report.yaml``, which lists them under ``inputs``. A report that already exists is left alone
unless --replace is given (its split never changes: the split is a hash of its source).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from schema import INPUT_FILES, REPORTS, problems

INLINE = {"log": "log", "serve": "serve", "report": "report", "config": "model_config"}


class _Block(str):
    pass


def _block(dumper: yaml.Dumper, text: str) -> yaml.Node:
    return dumper.represent_scalar(
        "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None
    )


yaml.add_representer(_Block, _block)


def write(doc: dict, replace: bool) -> str:
    directory = REPORTS / doc["id"]
    if directory.exists() and not replace:
        return f"{doc['id']}: exists, left alone"
    directory.mkdir(parents=True, exist_ok=True)
    inputs = []
    for key, kind in INLINE.items():
        value = doc.pop(key, None)
        if value is None:
            continue
        name = INPUT_FILES[kind]
        if kind == "model_config":
            text = json.dumps(value, indent=2) + "\n"
        else:
            text = value.rstrip("\n") + "\n"
        (directory / name).write_text(text, encoding="utf-8")
        inputs.append(name)
    doc["inputs"] = inputs
    for key in ("summary", "fix"):
        if isinstance(doc.get(key), str):
            doc[key] = _Block(doc[key].strip())
    (directory / "report.yaml").write_text(
        yaml.dump(doc, sort_keys=False, allow_unicode=True, width=100), encoding="utf-8"
    )
    found = problems(yaml.safe_load((directory / "report.yaml").read_text()), directory)
    return f"{doc['id']}: written" + ("".join(f"\n  {p}" for p in found) if found else "")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("staging", type=Path)
    parser.add_argument("--replace", action="store_true")
    args = parser.parse_args()
    docs = [d for d in yaml.safe_load_all(args.staging.read_text(encoding="utf-8")) if d]
    ids = [d.get("id") for d in docs]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        sys.exit(f"ingest: ids given twice: {sorted(dupes)}")
    for doc in docs:
        print(write(doc, args.replace))


if __name__ == "__main__":
    main()
