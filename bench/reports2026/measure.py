"""Measure vllm-doctor on the 2026 corpus of real reports, per split and per family.

    python bench/reports2026/measure.py [--split test|train|all] [--write NAME] [--jobs N]

For every report under reports/ (schema in schema.py):

* crash logs (a failure with log.txt): ``vllm-doctor explain --log log.txt --format json``;
  a hit when it names the report's cause with a rule (a known failure whose code causes.yaml
  lists for the cause) or with a catalogue entry causes.yaml lists for it (a message of vLLM
  or of a package around it);
* predictable failures (``predictable: true``): ``vllm-doctor check`` without the log, with what
  the report shows (--serve, --model-config, --report, --gpu, --gpus, --vllm-version,
  --torch-version, --driver, --cuda, --package, and --platform wsl2 / arbitrary-uid where the
  report's platform names WSL / an arbitrary UID or OpenShift's restricted SCC), and
  --elsewhere (none of this machine's packages, platform or environment stand in for the
  reporter's); a hit when a finding that applies, at warning or error, carries a code
  causes.yaml lists for the cause;
* working setups: the same check; a miss when any finding that applies is an error.

causes.yaml (beside this file) is the one map from a cause id to the rule codes and catalogue
templates that name it; rule writers extend it. The split is read from split.json (frozen); a
report added after the freeze is assigned by the same hash (sha256 of its source URL mod 100 < 40
is test) and printed as such.

Facts a report shows that no doctor option carries (a companion package's version given in
prose, not in a collect-env report) are listed as ``needs`` beside the report: the measure never
writes a collect-env report the reporter did not paste.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import datetime as dt
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPORTS = HERE / "reports"
SPLIT_FILE = HERE / "split.json"
CAUSES_FILE = HERE / "causes.yaml"
# the causes only test-split reports have: the lead maps them (rule writers never open it)
CAUSES_FILES = (CAUSES_FILE, HERE / "causes-test.yaml")
TEST_SHARE = 40  # percent of reports in the test split
ROOT = HERE.parents[1]
URL = re.compile(r"https?://[^\s'\"<>)\]]+")
# a test report a rule cites was seen by a rule writer: measured apart, never in the test figures
SEEN = "test, cited by a rule"


def cited_by_rules() -> set[str]:
    """Every URL the rule base cites (references, cases, comments), without a trailing slash."""
    cited = set()
    for path in (ROOT / "rules").rglob("*.yaml"):
        cited |= {u.rstrip("/.,") for u in URL.findall(path.read_text(encoding="utf-8"))}
    return cited


def split_of(url: str) -> str:
    """test or train, from the report's source URL alone (the frozen rule)."""
    return (
        "test"
        if int(hashlib.sha256(url.encode("utf-8")).hexdigest(), 16) % 100 < TEST_SHARE
        else "train"
    )


def doctor() -> list[str]:
    """The doctor's command: the console script beside this Python, else the module."""
    script = Path(sys.executable).with_name("vllm-doctor")
    return [str(script)] if script.exists() else [sys.executable, "-m", "vllm_doctor"]


def run_doctor(args: list[str], cwd: str) -> tuple[int, dict | None, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "HF_", "CUDA_"))}
    env.update(HF_HUB_OFFLINE="1", NO_COLOR="1")
    run = subprocess.run(
        doctor() + args, capture_output=True, text=True, timeout=300, cwd=cwd, env=env
    )
    try:
        return run.returncode, json.loads(run.stdout), run.stderr.strip()
    except json.JSONDecodeError:
        return run.returncode, None, (run.stderr or run.stdout).strip()[-300:]


def check_options() -> set[str]:
    """The options `vllm-doctor check` accepts (a report's facts are passed only through those)."""
    run = subprocess.run(
        [*doctor(), "check", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
    )
    return {word.strip("│,") for word in run.stdout.split() if word.startswith("--")}


@dataclass
class Outcome:
    report: dict
    split: str
    frozen: bool
    explain: str | None = None  # hit / hit (catalogue) / miss / error, for crash logs
    explain_named: list[str] = field(default_factory=list)
    check: str | None = None  # hit / miss / error (failures), clean / error-drawn (working)
    check_named: list[str] = field(default_factory=list)
    needs: list[str] = field(default_factory=list)


def load_reports() -> list[tuple[dict, Path]]:
    out = []
    for directory in sorted(p for p in REPORTS.iterdir() if (p / "report.yaml").is_file()):
        out.append(
            (yaml.safe_load((directory / "report.yaml").read_text(encoding="utf-8")), directory)
        )
    return out


def load_causes() -> dict[str, dict]:
    """causes.yaml (the train split's causes) and causes-test.yaml (the test split's own)."""
    causes: dict[str, dict] = {}
    for path in CAUSES_FILES:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for cause, entry in (doc.get("causes") or {}).items():
            if cause in causes:
                raise SystemExit(f"{path.name}: cause {cause} is also in another causes file")
            causes[cause] = entry or {}
    return causes


def frozen_split() -> dict[str, str]:
    if not SPLIT_FILE.exists():
        return {}
    doc = json.loads(SPLIT_FILE.read_text(encoding="utf-8"))
    return {**dict.fromkeys(doc["train"], "train"), **dict.fromkeys(doc["test"], "test")}


def explain_args(report: dict, directory: Path) -> list[str]:
    args = ["explain", "--log", str(directory / "log.txt"), "--format", "json"]
    version = (report.get("check") or {}).get("vllm_version")
    if version:
        args += ["--vllm-version", str(version)]
    return args


def check_args(report: dict, directory: Path, accepted: set[str]) -> tuple[list[str], list[str]]:
    """The check command line for a report, and the facts it shows that no option carries."""
    args = ["check", "--format", "json", "--offline", "--no-config", "--fail-on", "never"]
    if "--elsewhere" in accepted:  # the reporter's machine: none of this one's facts stand in
        args.append("--elsewhere")
    inputs = set(report.get("inputs") or [])
    if "serve.txt" in inputs:
        args += ["--serve", (directory / "serve.txt").read_text(encoding="utf-8").strip()]
    if "config.json" in inputs:
        args += ["--model-config", str(directory / "config.json")]
    if "report.txt" in inputs:
        args += ["--report", str(directory / "report.txt")]
    facts = report.get("check") or {}
    options = {
        "gpu": "--gpu",
        "gpus": "--gpus",
        "vllm_version": "--vllm-version",
        "torch_version": "--torch-version",
        "driver": "--driver",
        "cuda": "--cuda",
    }
    needs = []
    for key, option in options.items():
        if facts.get(key) is None:
            continue
        args += [option, str(facts[key])]
    packages = facts.get("packages") or {}
    if packages and "--package" in accepted:
        for name, version in packages.items():
            args += ["--package", f"{name}=={version}"]
    elif packages:
        needs.append(
            "packages "
            + ", ".join(f"{n}=={v}" for n, v in packages.items())
            + " (no --package option)"
        )
    words = platform_words(report)
    if words and "--platform" in accepted:
        for word in words:
            args += ["--platform", word]
    elif words:
        needs.append(f"platform {', '.join(words)} (no --platform option)")
    return args, needs


# a platform the reporter names in prose (shown.platform: "WSL2 Ubuntu 24.04", "WSL2 (Windows
# 11 host), Docker"), as the words `check --platform` takes; only what the words say outright
PLATFORM_PROSE = (
    ("wsl2", re.compile(r"\bWSL ?2?\b", re.IGNORECASE)),
    # OpenShift's restricted SCC or a pod said to run under an arbitrary UID
    ("arbitrary-uid", re.compile(r"\barbitrary UID\b|\brestricted(?:-v2)? SCC\b", re.IGNORECASE)),
    # an image or pod said to have the CUDA runtime only: no nvcc for FlashInfer's JIT
    (
        "no-nvcc",
        re.compile(
            r"\bCUDA runtime only\b|\bno (?:CUDA )?toolkit\b|\bwithout (?:the CUDA toolkit|nvcc)\b"
            r"|\bno nvcc\b|\bnvcc: not found\b",
            re.IGNORECASE,
        ),
    ),
    # HAMi (or volcano's vGPU device plugin, which ships HAMi-core) gives the GPUs: its
    # libvgpu.so is preloaded in the container
    ("hami-core", re.compile(r"\bHAMi\b|\blibvgpu\b|\bvgpu-device-plugin\b", re.IGNORECASE)),
    # a container runtime or orchestrator named outright
    (
        "container",
        re.compile(
            r"\b(?:Docker|Podman|Kubernetes|K8s|OpenShift|container|pod|Apptainer|Singularity)\b",
            re.IGNORECASE,
        ),
    ),
)


# a kernel release the prose states outright, as `--platform kernel=R`: the first one named
# after "Linux" or "kernel" ("Linux 7.0.0-1019-nvidia (fails), 6.17.0-1032-nvidia (works)":
# reports name the failing one first)
KERNEL_PROSE = re.compile(r"\b(?:Linux|kernel)\s+(\d+\.\d+\.\d+(?:\.\d+)?-[\w.+-]*\w)")


def platform_words(report: dict) -> list[str]:
    """The ``--platform`` words for what the report shows of its platform: the words above,
    the kernel release, and the distribution's release (``Ubuntu 22.04.5 LTS``) as the
    doctor's own reader of a report's OS line reads it (``os=ubuntu-22.04``)."""
    from vllm_doctor.facts.distro import os_from_text

    shown = str((report.get("shown") or {}).get("platform") or "")
    words = [word for word, pattern in PLATFORM_PROSE if pattern.search(shown)]
    kernel = KERNEL_PROSE.search(shown)
    # a WSL2 platform's kernel is a microsoft one: another named beside it is not the one judged
    if kernel and ("wsl2" not in words or "microsoft" in kernel.group(1).lower()):
        words.append(f"kernel={kernel.group(1)}")
    os_release = os_from_text(shown)
    # beside a container the release named may be the host's, not the image's that vLLM runs in
    if os_release and "container" not in words and "arbitrary-uid" not in words:
        words.append(f"os={os_release.replace(' ', '-')}")
    return words


def log_only_rules() -> set[str]:
    """The codes of the rules that apply only on a crash log (``log_only: true``)."""
    codes = set()
    for path in (ROOT / "rules").rglob("*.yaml"):
        if path.name.endswith(".cases.yaml"):
            continue
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if doc.get("log_only"):
            codes.add(str(doc.get("code")))
    return codes


LOG_ONLY = log_only_rules()


# a computed fact's reason names the input it waits for: "needs model.num_hidden_layers: ..."
NEEDS_FIRST = re.compile(r"^needs ([\w.-]+)")


def needed(missing: dict) -> str:
    """A missing fact as the needs column names it: a computed one with the fact it waits for
    (``memory.mamba_blocks_verdict (from model.num_hidden_layers)``)."""
    first = NEEDS_FIRST.match(str(missing.get("reason") or ""))
    return f"{missing['fact']} (from {first.group(1)})" if first else missing["fact"]


def why_silent(doc: dict, rules: list[str]) -> list[str]:
    """For a failure `check` did not warn of: what each rule of the cause said instead, the
    facts an undecided one still needs (``needs`` column), so a miss reads as a missing input,
    a rule that only reads crash logs, a condition that does not hold, or no rule at all."""
    if not rules:
        return ["no rule names the cause"]
    undecided = {f["code"]: f for f in doc.get("undecided") or []}
    not_applicable = set(doc.get("not_applicable") or [])
    out = []
    for code in rules:
        if code in undecided:
            facts = [needed(m) for m in undecided[code].get("missing") or []]
            out.append(f"{code} undecided: needs {', '.join(facts[:3]) or 'a fact'}")
        elif code in LOG_ONLY:
            out.append(f"{code} reads crash logs only")
        elif code in not_applicable:
            out.append(f"{code} does not apply to the facts given")
        else:
            out.append(f"{code} not run (deferred, ignored or suppressed)")
    return out


def named_by_explain(doc: dict) -> tuple[list[str], list[str]]:
    codes = [f["code"] for f in doc.get("known_failures") or []]
    # vLLM's own messages, then those of the packages around it (stack knowledge)
    messages = [*(doc.get("vllm_messages") or []), *(doc.get("package_messages") or [])]
    templates = [m.get("template", "") for m in messages]
    return codes, templates


def measure_one(
    report: dict, directory: Path, split: str, frozen: bool, causes: dict, accepted: set[str]
) -> Outcome:
    outcome = Outcome(report, split, frozen)
    cause = causes.get(report["cause"], {})
    rules = set(cause.get("rules") or [])
    catalogue = set(cause.get("catalogue") or [])
    failing = report["outcome"] == "failure"
    with tempfile.TemporaryDirectory() as cwd:
        if failing and "log.txt" in (report.get("inputs") or []):
            code, doc, err = run_doctor(explain_args(report, directory), cwd)
            if doc is None:
                outcome.explain, outcome.explain_named = "error", [f"exit {code}: {err}"]
            else:
                codes, templates = named_by_explain(doc)
                outcome.explain_named = codes + [f"catalogue: {t[:70]}" for t in templates[:2]]
                if rules & set(codes):
                    outcome.explain = "hit"
                elif catalogue & set(templates):
                    outcome.explain = "hit (catalogue)"
                else:
                    outcome.explain = "miss"
        if report.get("predictable") or not failing:
            args, outcome.needs = check_args(report, directory, accepted)
            code, doc, err = run_doctor(args, cwd)
            if doc is None:
                outcome.check, outcome.check_named = "error", [f"exit {code}: {err}"]
            else:
                applied = [f for f in doc.get("findings") or [] if f.get("verdict") == "applies"]
                outcome.check_named = [f"{f['code']}:{f['severity']}" for f in applied]
                if failing:
                    warned = {f["code"] for f in applied if f["severity"] in ("warning", "error")}
                    outcome.check = "hit" if warned & rules else "miss"
                    if outcome.check == "miss":
                        outcome.needs += why_silent(doc, sorted(rules))
                else:
                    errors = [f for f in applied if f["severity"] == "error"]
                    outcome.check = "error-drawn" if errors else "clean"
    return outcome


def named(outcome: Outcome) -> bool:
    return bool(outcome.explain and outcome.explain.startswith("hit"))


def ratio(hits: int, total: int) -> str:
    return f"{hits}/{total} ({100 * hits / total:.0f} %)" if total else "0/0"


def summary(outcomes: list[Outcome], title: str) -> list[str]:
    logs = [o for o in outcomes if o.explain is not None]
    predictable = [o for o in outcomes if o.report["outcome"] == "failure" and o.check is not None]
    working = [o for o in outcomes if o.report["outcome"] == "working"]
    lines = [
        f"## {title}: {len(outcomes)} reports "
        f"({sum(o.report['outcome'] == 'failure' for o in outcomes)} failures, {len(working)} working setups)",
        "",
        f"- explain --log names the cause: {ratio(sum(named(o) for o in logs), len(logs))} of crash logs "
        f"({sum(o.explain == 'hit' for o in logs)} with a rule code, "
        f"{sum(o.explain == 'hit (catalogue)' for o in logs)} with a catalogue entry)",
        f"- check (without the log) warns with the cause: {ratio(sum(o.check == 'hit' for o in predictable), len(predictable))} of predictable failures",
        f"- working setups with an error: {sum(o.check == 'error-drawn' for o in working)} of {len(working)}",
    ]
    errors = [o for o in outcomes if "error" in (o.explain, o.check)]
    if errors:
        lines.append(f"- doctor runs that did not finish (exit 2/3, no JSON): {len(errors)}")
    lines += [
        "",
        "| family | reports | crash logs named | predictable warned | working with an error | misses |",
        "|---|---|---|---|---|---|",
    ]
    by_family = collections.defaultdict(list)
    for o in outcomes:
        by_family[o.report["family"]].append(o)
    for family in sorted(by_family, key=lambda f: -len(by_family[f])):
        group = by_family[family]
        g_logs = [o for o in group if o.explain is not None]
        g_pred = [o for o in group if o.report["outcome"] == "failure" and o.check is not None]
        g_work = [o for o in group if o.report["outcome"] == "working"]
        misses = sum(o.explain == "miss" for o in g_logs) + sum(o.check == "miss" for o in g_pred)
        lines.append(
            f"| {family} | {len(group)} | {ratio(sum(named(o) for o in g_logs), len(g_logs))} "
            f"| {ratio(sum(o.check == 'hit' for o in g_pred), len(g_pred))} "
            f"| {sum(o.check == 'error-drawn' for o in g_work)} of {len(g_work)} | {misses} |"
        )
    return [*lines, ""]


def detail(outcomes: list[Outcome]) -> list[str]:
    lines = [
        "| id | split | family | cause | explain --log | check | named (explain / check) | needs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for o in sorted(outcomes, key=lambda o: (o.split, o.report["family"], o.report["id"])):
        split = o.split + ("" if o.frozen else " (after the freeze)")
        named = "; ".join(o.explain_named) + " / " + "; ".join(o.check_named)
        lines.append(
            f"| {o.report['id']} | {split} | {o.report['family']} | {o.report['cause']} "
            f"| {o.explain or '-'} | {o.check or '-'} | {named.replace('|', '/')} | {'; '.join(o.needs)} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("test", "train", "all"), default="all")
    parser.add_argument(
        "--write", metavar="NAME", help="also write the results to NAME beside this script"
    )
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    frozen, causes, accepted = frozen_split(), load_causes(), check_options()
    unknown = sorted(
        {r["cause"] for r, _ in load_reports() if r["outcome"] == "failure"} - set(causes)
    )
    cited = cited_by_rules()
    work = []
    for report, directory in load_reports():
        split = frozen.get(report["id"]) or split_of(report["source"])
        if split == "test" and report["source"].rstrip("/.,") in cited:
            split = SEEN
        if args.split in ("all", split.split(",")[0]):
            work.append((report, directory, split, report["id"] in frozen))
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        outcomes = list(pool.map(lambda w: measure_one(*w, causes, accepted), work))
    head = [
        "# vllm-doctor on the 2026 reports corpus",
        "",
        f"{dt.date.today()}: `python bench/reports2026/measure.py --split {args.split}"
        + (f" --write {args.write}`" if args.write else "`")
        + f", {len(outcomes)} reports, causes.yaml and causes-test.yaml mapping {len(causes)} causes"
        + (f" ({len(unknown)} cause ids of reports not in it yet)" if unknown else "")
        + ".",
        "",
    ]
    body = []
    for name in ("test", "train", SEEN):
        part = [o for o in outcomes if o.split == name]
        if part:
            body += summary(part, f"{name} split")
    text = "\n".join(head + body + ["## Per report", ""] + detail(outcomes)) + "\n"
    print(text)
    if args.write:
        (HERE / args.write).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
