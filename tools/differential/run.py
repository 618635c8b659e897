#!/usr/bin/env python3
"""The differential check: vLLM's own parsing and config validation against the doctor's
verdict, release by release (README.md beside this file).

    python tools/differential/run.py --releases 0.33.0,0.27.1,0.22.1,0.12.0,0.10.2 \
        [--before REV] [--out bench/differential] [--reuse]

For each release with an environment ``/work/venvs/diff-vllm-<release>`` (make_venv.py):
vllm_side.py runs there on every case (cases.py); doctor_side.py runs with this checkout
(``after``) and, with ``--before REV``, with that revision checked out into a temporary
worktree (``before``). Writes ``cases.jsonl``, ``vllm-<release>.jsonl``,
``doctor-<label>-<release>.jsonl`` and ``summary.json`` / ``summary.md`` under ``--out``.

With ``--reuse``, a line the previous run already put to vLLM (the same words, the same
stages) keeps vLLM's answer, and so does the ``before`` doctor's when ``--before`` names the
same commit; only new lines run. The ``after`` doctor always judges every line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from cases import build  # noqa: E402

MODEL_DIR = ROOT / "tests" / "fixtures" / "models" / "Qwen3-32B"
DEADLINE_S = 3 * 3600


def _rows(path: Path) -> dict[str, dict]:
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if "id" in row:
            rows[row["id"]] = row
    return rows


def _key(case: dict) -> tuple:
    return (tuple(case["argv"]), bool(case.get("config")))


def _earlier(previous: list[dict], path: Path) -> tuple[dict, dict[tuple, dict]]:
    """An earlier run's header and its rows by line (the words and the stages asked): a side
    writes its rows in the order of the cases file it was given."""
    if not previous or not path.exists():
        return {}, {}
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    header = next((r for r in rows if "id" not in r), {})
    rows = [r for r in rows if "id" in r]
    if len(rows) != len(previous) or any(
        r["id"] != c["id"] for r, c in zip(rows, previous, strict=True)
    ):
        return {}, {}
    return header, {_key(c): r for c, r in zip(previous, rows, strict=True)}


def _side(
    command: list[str],
    cases: list[dict],
    target: Path,
    earlier: dict[tuple, dict],
    header: dict | None = None,
    **run,
) -> tuple[dict, int]:
    """Runs one side (``command`` + ``--cases F --out F``) on the lines ``earlier`` has no
    answer for and writes every line's row to ``target`` in the order of ``cases``, the
    header first (the new run's, else the earlier one's). Returns the header and how many
    lines ran (-1: the side did not answer every line)."""
    pending = [c for c in cases if _key(c) not in earlier]
    fresh: dict[str, dict] = {}
    header = header or {}
    if pending:
        with tempfile.TemporaryDirectory(prefix="differential-") as tmp:
            src, out = Path(tmp) / "cases.jsonl", Path(tmp) / "out.jsonl"
            src.write_text("".join(json.dumps(c) + "\n" for c in pending), encoding="utf-8")
            subprocess.run(
                [*command, "--cases", str(src), "--out", str(out)], timeout=DEADLINE_S, **run
            )
            if out.exists():
                lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
                header = next((r for r in lines if "id" not in r), header)
                fresh = {r["id"]: r for r in lines if "id" in r}
        if len(fresh) != len(pending):
            return header, -1
    rows = [fresh.get(c["id"]) or {**earlier[_key(c)], "id": c["id"]} for c in cases]
    target.write_text(
        "".join(json.dumps(r) + "\n" for r in ([header] if header else []) + rows),
        encoding="utf-8",
    )
    return header, len(pending)


def _vllm(
    release: str, venvs: Path, cases: list[dict], out: Path, previous: list[dict]
) -> tuple[Path | None, str, str | None]:
    """vLLM's answers for every line, reused from ``previous`` where the line is the same."""
    python = venvs / f"diff-vllm-{release}" / "bin" / "python"
    target = out / f"vllm-{release}.jsonl"
    old_header, earlier = _earlier(previous, target)
    if len(earlier) < len(cases) and not python.exists():
        return None, f"no environment: python tools/differential/make_venv.py {release}", None
    start = time.time()
    command = [str(python), str(HERE / "vllm_side.py"), "--model-dir", str(MODEL_DIR)]
    header, ran = _side(
        command,
        cases,
        target,
        earlier,
        old_header,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    )
    if ran < 0:
        return None, f"vLLM {release} could not run its parser here", None
    version = header.get("vllm")
    how = f"{ran} lines run ({time.time() - start:.0f} s), {len(cases) - ran} reused"
    return target, how, version


def _doctor(src: Path, release: str, cases: list[dict], target: Path, earlier: dict) -> str:
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    command = [sys.executable, str(HERE / "doctor_side.py"), "--release", release]
    _, ran = _side(command, cases, target, earlier, check=True, env=env, cwd=str(src))
    return f"{ran} lines judged, {len(cases) - ran} reused"


def _revision(rev: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", rev], capture_output=True, text=True, check=True
    ).stdout.strip()


def _checkout_revision() -> str:
    """The commit the ``after`` doctor is, and whether its code differs from it."""
    changed = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--", "vllm_doctor", "rules"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return _revision("HEAD") + (" with uncommitted changes" if changed else "")


# vLLM refusals that come from this machine, not from the line: a file the line names
# (--chat-template examples/x.jinja) does not exist here
ENVIRONMENT = ("doesn't exist", "does not exist", "no such file")


def _compare(vllm: dict, doctor: dict, cases: dict) -> dict:
    out = {
        "cases": 0,
        "vllm_accepts": 0,
        "vllm_refuses": 0,
        "vllm_environment": [],
        "false_refusals": [],
        "false_passes": [],
        "by_kind": Counter(),
    }
    for cid, v in vllm.items():
        d = doctor.get(cid)
        if d is None:
            continue
        if v["parse"] == "refuse" and any(
            w in (v.get("parse_error") or "").lower() for w in ENVIRONMENT
        ):
            out["vllm_environment"].append({"id": cid, "vllm": v.get("parse_error")})
            continue
        out["cases"] += 1
        out["vllm_accepts" if v["parse"] == "accept" else "vllm_refuses"] += 1
        if v["parse"] == d["parse"]:
            continue
        item = {
            "id": cid,
            "argv": cases[cid]["argv"],
            "vllm": v.get("parse_error"),
            "doctor": d.get("why"),
        }
        key = "false_refusals" if d["parse"] == "refuse" else "false_passes"
        out[key].append(item)
        out["by_kind"][f"{cases[cid]['kind']}:{key}"] += 1
    out["by_kind"] = dict(out["by_kind"])
    return out


def _config_stage(vllm: dict, doctor: dict) -> dict:
    counts = Counter()
    refused = []
    for cid, v in vllm.items():
        if "config" not in v:
            continue
        counts[v["config"]] += 1
        if v["config"] == "refuse":
            d = doctor.get(cid, {})
            refused.append(
                {"id": cid, "vllm": v.get("config_error"), "doctor_errors": d.get("errors")}
            )
    return {"counts": dict(counts), "refused": refused}


def _agree(compared: dict) -> str:
    """How many lines the doctor reads as vLLM's parser does."""
    if not compared:
        return ""
    return str(compared["cases"] - len(compared["false_refusals"]) - len(compared["false_passes"]))


def _markdown(summary: dict) -> str:
    """The figures, and every disagreement left after, grouped by what vLLM said."""
    import re

    lines = [
        "# Differential check: vLLM's own parser against the doctor",
        "",
        f"Command: `{summary['command']}` (tools/differential/README.md).",
        "",
        f"Doctor judged: after = {summary['after']}"
        + (f", before = {summary['before']}" if summary.get("before") else "")
        + ".",
        "",
        "Cases: " + ", ".join(f"{n} {k}" for k, n in sorted(summary["cases"].items())) + ".",
        "",
        "Parse stage (vLLM's `vllm serve` parser and its `validate`, against `check "
        "--vllm-version R`): a false refusal is a line vLLM accepts and the doctor refuses "
        "(exit 2, or ARGS001/ARGS004/ARGS100/ARGS101 as an error); a false pass the reverse.",
        "",
        "| release | vLLM run | compared | vLLM accepts | vLLM refuses | left out (a file the "
        "line names is missing here) | doctor as vLLM before | false refusals before | false "
        "passes before | doctor as vLLM after | false refusals after | false passes after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for release, entry in summary["releases"].items():
        after, before = entry.get("after"), entry.get("before") or {}
        if after is None:
            lines.append(f"| {release} | not run: {entry['vllm']} | | | | | | | | | | |")
            continue
        lines.append(
            f"| {release} | {entry.get('vllm_version')} | {after['cases']} | "
            f"{after['vllm_accepts']} | {after['vllm_refuses']} | "
            f"{len(after['vllm_environment'])} | {_agree(before)} | "
            f"{len(before.get('false_refusals', []))} | {len(before.get('false_passes', []))} | "
            f"{_agree(after)} | {len(after['false_refusals'])} | {len(after['false_passes'])} |"
        )
    lines += ["", "## Config stage (recorded, not compared)", ""]
    lines.append(
        "`create_engine_config()` with the stand-in model and platform (README): how many "
        "corpus lines vLLM's validation accepted, refused, or could not reach here."
    )
    lines.append("")
    for release, entry in summary["releases"].items():
        stage = entry.get("config_stage")
        if stage:
            lines.append(f"- {release}: {stage['counts']}")
    lines += ["", "## Disagreements left (after), by what vLLM said", ""]
    for release, entry in summary["releases"].items():
        after = entry.get("after")
        if not after:
            continue
        groups: dict[tuple[str, str], list[str]] = {}
        for key in ("false_refusals", "false_passes"):
            for item in after[key]:
                said = re.sub(r"'[^']*'|\d+", "_", item["vllm"] or "accepted")[:110]
                groups.setdefault((key, said), []).append(" ".join(item["argv"][1:])[:80])
        lines.append(f"### {release}")
        lines.append("")
        for (key, said), argvs in sorted(groups.items(), key=lambda g: -len(g[1])):
            kind = "false refusal" if key == "false_refusals" else "false pass"
            lines.append(f"- {len(argvs)} {kind}: vLLM: `{said.strip()}` — e.g. `{argvs[0]}`")
        lines.append("")
    return "\n".join(lines) + "\n"


def _previous_before(out: Path) -> str | None:
    """The commit the previous run judged as ``before``."""
    path = out / "summary.json"
    if not path.exists():
        return None
    summary = json.loads(path.read_text(encoding="utf-8"))
    if summary.get("before"):
        return summary["before"]
    # a summary written before the commit was recorded: its command names the revision
    words = summary.get("command", "").split()
    if "--before" in words[:-1]:
        return _revision(words[words.index("--before") + 1])
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", required=True)
    ap.add_argument("--venvs", type=Path, default=Path("/work/venvs"))
    ap.add_argument("--before", help="a git revision of the doctor to judge as 'before'")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "differential")
    ap.add_argument(
        "--reuse", action="store_true", help="keep the answers of the previous run's lines"
    )
    opts = ap.parse_args()
    opts.out.mkdir(parents=True, exist_ok=True)
    cases_path = opts.out / "cases.jsonl"
    previous: list[dict] = []
    if opts.reuse and cases_path.exists():
        previous = [json.loads(line) for line in cases_path.read_text().splitlines()]
    reuse_before = (
        opts.reuse
        and opts.before is not None
        and _previous_before(opts.out) == _revision(opts.before)
    )
    built = build()
    cases_path.write_text("".join(json.dumps(c) + "\n" for c in built), encoding="utf-8")
    cases = {c["id"]: c for c in built}
    summary: dict = {
        "cases": dict(Counter(c["kind"] for c in built)),
        "after": _checkout_revision(),
        "releases": {},
    }
    sources = {"after": ROOT}
    worktree = None
    if opts.before:
        summary["before"] = _revision(opts.before)
        worktree = Path(tempfile.mkdtemp(prefix="doctor-before-"))
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(worktree), opts.before],
            check=True,
            capture_output=True,
        )
        sources["before"] = worktree
    try:
        for release in opts.releases.split(","):
            vllm_path, how, version = _vllm(release, opts.venvs, built, opts.out, previous)
            entry: dict = {"vllm": how}
            summary["releases"][release] = entry
            print(f"vLLM {release}: {how}", file=sys.stderr)
            if vllm_path is None:
                continue
            vllm_rows = _rows(vllm_path)
            entry["vllm_version"] = version
            for label, src in sources.items():
                target = opts.out / f"doctor-{label}-{release}.jsonl"
                reusable = previous if label == "before" and reuse_before else []
                _, earlier = _earlier(reusable, target)
                entry[f"doctor_{label}"] = _doctor(src, release, built, target, earlier)
                print(f"doctor {label} {release}: {entry[f'doctor_{label}']}", file=sys.stderr)
                doctor_rows = _rows(target)
                entry[label] = _compare(vllm_rows, doctor_rows, cases)
                if label == "after":
                    entry["config_stage"] = _config_stage(vllm_rows, doctor_rows)
    finally:
        if worktree is not None:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)],
                capture_output=True,
            )
    summary["command"] = "python tools/differential/run.py " + " ".join(sys.argv[1:])
    (opts.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    (opts.out / "summary.md").write_text(_markdown(summary), encoding="utf-8")
    print(
        json.dumps(
            {
                r: {
                    k: (
                        v.get(k, {}).get("false_refusals") and len(v[k]["false_refusals"]),
                        v.get(k, {}).get("false_passes") and len(v[k]["false_passes"]),
                    )
                    for k in ("before", "after")
                }
                for r, v in summary["releases"].items()
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
