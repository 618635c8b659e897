"""The fact schema as a reader sees it: `vllm-doctor facts --schema` (text, JSON, markdown)
and docs/facts.md, all from facts/schema.py."""

from __future__ import annotations

from typing import Any

from vllm_doctor.facts.schema import FACTS, INFERABLE, SUPPLY_HINTS, writers

REGENERATE = "vllm-doctor facts --schema --format markdown > docs/facts.md"


def schema_rows() -> list[dict[str, Any]]:
    """One record per fact path, in the schema's order."""
    return [
        {
            "path": path,
            "type": spec.type,
            "description": spec.description,
            "written_by": list(writers(path)),
            "can_be_inferred": path in INFERABLE,
            "never_absent": spec.never_absent,
        }
        for path, spec in FACTS.items()
    ]


def _areas() -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in schema_rows():
        grouped.setdefault(row["path"].split(".", 1)[0], []).append(row)
    return grouped


def schema_text() -> str:
    """Plain text, one fact a line (greppable), its description indented under it."""
    lines = []
    for area, rows in _areas().items():
        lines.append(f"{area}  (written by {', '.join(rows[0]['written_by'])})")
        for row in rows:
            marks = (
                [row["type"]]
                + (["can be inferred"] if row["can_be_inferred"] else [])
                + (["never absent"] if row["never_absent"] else [])
            )
            lines.append(f"  {row['path']}  [{', '.join(marks)}]  {row['description']}")
        lines.append("")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "\\<")  # a table cell, never an HTML tag


def schema_markdown() -> str:
    """docs/facts.md."""
    out = [
        "# Facts",
        "",
        "Every fact a rule condition may name (`when:`), with its type, what it means, the",
        "module under `vllm_doctor/` that writes it, and whether a collector may infer it",
        "when it was not observed (an inferred value is marked in every report). A fact",
        "*never absent* is one every real input has: when it is not there it is unknown,",
        "never absent (docs/rule-format.md). A trailing `*` stands for one path segment.",
        "",
        f"Generated from `vllm_doctor/facts/schema.py`; regenerate with `{REGENERATE}`",
        "(tests/test_fact_schema.py fails when this file is stale).",
        "",
    ]
    for area, rows in _areas().items():
        out += [
            f"## {area}",
            "",
            f"Written by: {', '.join(f'`{w}`' for w in rows[0]['written_by'])}.",
        ]
        if area in SUPPLY_HINTS:
            out.append(f"When missing: {SUPPLY_HINTS[area]}.")
        out += ["", "| fact | type | inferred | description |", "|---|---|---|---|"]
        for row in rows:
            description = row["description"] + (" (never absent)" if row["never_absent"] else "")
            if row["written_by"] != rows[0]["written_by"]:
                description += f" — written by {', '.join(row['written_by'])}"
            out.append(
                f"| `{row['path']}` | {row['type']} | "
                f"{'yes' if row['can_be_inferred'] else ''} | {_cell(description)} |"
            )
        out.append("")
    return "\n".join(out)
