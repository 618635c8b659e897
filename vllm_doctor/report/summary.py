"""What the check read and what it did not: one status per input and the one next step.

The doctor's first line, in the style of ``flutter doctor``: for each input — the stack
(vLLM, torch, driver), the GPUs, the model's config.json, the serve line, a manifest, a crash
log — whether it was read (✓), read in part (!), not read and why (✗), or not given (–); then
the one input that would decide most of what was left undecided, with how to supply it and
how many undecided rules need it. The JSON document carries the same as ``summary.inputs``
and ``summary.next_step``.

An undecided rule needs an input when one of its missing facts belongs to that input's area,
or is computed (derived, release, memory facts) from a fact that is missing for the same
reason as that input's own facts ("needs model.num_hidden_layers: config.json of …").
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vllm_doctor.facts.model import Facts, Source

if TYPE_CHECKING:
    from vllm_doctor.report.document import CheckDocument

READ, PARTIAL, NOT_READ, NOT_GIVEN = "read", "partial", "not-read", "not-given"
MARKS = {READ: "✓", PARTIAL: "!", NOT_READ: "✗", NOT_GIVEN: "–"}

# the inputs in the order the first line names them, with the fact areas each supplies
INPUTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("stack", "stack", ("vllm", "torch", "packages", "driver", "env")),
    ("gpus", "GPUs", ("gpu", "topology")),
    ("model", "model config", ("model",)),
    ("serve", "serve line", ("serve",)),
    ("manifest", "manifest", ("deploy",)),
    ("log", "log", ("log",)),
)
# how to supply each input: alternatives, each naming the option that gives it (advice that
# names an option already given is left out: supply.py)
HOW = {
    "stack": (
        "run where vLLM is installed",
        "pass --report collect-env.txt (`vllm collect-env` on the target machine)",
        "pass --vllm-version V",
    ),
    "gpus": (
        "run on the GPU host",
        "pass --report collect-env.txt",
        "pass --gpu NAME --gpus N",
    ),
    "model": ("pass --model-config PATH (a config.json or model directory)",),
    "serve": ("give the serve line after `--`: vllm-doctor check -- vllm serve MODEL ...",),
    "manifest": ("pass --manifest FILE",),
    "log": ("pass --log crash.txt",),
}
# what the summary says an undecided rule needs, by input
NEED = {
    "stack": "the target's vLLM version and stack",
    "gpus": "the GPUs",
    "model": "the model's config.json",
    "serve": "the serve line",
    "manifest": "the deployment manifest",
    "log": "the crash log",
}
_COMPUTED = ("derived", "release", "memory")
_CHAIN = re.compile(r"^(?:needs )?[a-z_]+(?:\.[A-Za-z0-9_-]+)+: ")


def root_reason(reason: str) -> str:
    """The reason at the end of a chain: "needs a.b: c.d: NVML not found" → "NVML not found"
    (a derived fact is missing because a fact it is computed from is)."""
    while True:
        match = _CHAIN.match(reason)
        if not match or match.end() >= len(reason):
            return reason
        reason = reason[match.end() :]


# "(/root/.cache/…)", "(Python 3.11 at /…)"; not "(https://huggingface.co)"
_PATH_IN_PARENS = re.compile(r" \((?:/|[^()]* /)[^()]*\)")
# a loader's error after the reason: "…: libnvidia-ml.so.1: cannot open shared object file: …"
_LIBRARY_ERROR = re.compile(r": [\w.+-]+\.so(?:\.\d+)*: .*$")


@dataclass
class InputStatus:
    key: str  # stack | gpus | model | serve | manifest | log
    label: str
    state: str  # read | partial | not-read | not-given
    detail: str  # what was read, or why not
    how: str | None  # how to supply it (partial, not read): the alternatives still open
    needed_by: int = 0  # undecided rules that need it

    def to_dict(self) -> dict[str, Any]:
        return {
            "input": self.key,
            "status": self.state,
            "detail": self.detail,
            "how_to_supply": self.how,
            "undecided_needing_it": self.needed_by,
        }

    def text(self) -> str:
        mark = MARKS[self.state]
        if self.state == NOT_GIVEN:
            return f"{mark} {self.label}"
        return f"{mark} {self.label}: {self.detail}" if self.detail else f"{mark} {self.label}"


def short_reason(reason: str) -> str:
    """A missing fact's reason cut to what fits on the first line: the root of a chain of
    computed facts, without file paths in parentheses, error details after "could not be
    reached", the advice after " — ", or the name-only hints."""
    text = root_reason(reason).split(" — ")[0]
    text = _LIBRARY_ERROR.sub("", _PATH_IN_PARENS.sub("", text))
    text = re.sub(r"(could not be reached): .*?(?=;|$)", r"\1", text)
    clauses = [c for c in text.split("; ") if not c.startswith("only hints from the name")]
    text = "; ".join(clauses)
    return text if len(text) <= 140 else text[:139] + "…"


def _origin(fact: Any, doc: CheckDocument) -> str:
    if fact.source == Source.REPORT:
        return "report"
    if fact.source == Source.USER:
        return "what-if"
    if fact.source == Source.MACHINE:
        return "installed"
    if fact.source == Source.NVML:
        return "NVML"
    if fact.inferred:
        return "inferred"
    return str(fact.source)


def _stack(doc: CheckDocument) -> InputStatus:
    facts = doc.facts
    parts = []
    version = facts.get("vllm.version")
    if version is not None:
        parts.append(f"vLLM {version.value} ({_origin(version, doc)})")
    for path, name in (("torch.version", "torch"), ("driver.version", "driver")):
        fact = facts.get(path)
        if fact is not None and not fact.inferred:
            parts.append(f"{name} {fact.value}")
    if version is not None:
        return InputStatus("stack", "stack", READ, ", ".join(parts), None)
    why = short_reason(facts.why_missing("vllm.version") or "the vLLM version is not known")
    state = PARTIAL if parts else NOT_READ
    detail = f"{', '.join(parts)}; {why}" if parts else why
    return InputStatus("stack", "stack", state, detail, None)


def _gpus(doc: CheckDocument) -> InputStatus:
    facts = doc.facts
    names = [str(n) for n in facts.value("gpu.names") or []]
    if not names:
        why = facts.why_missing("gpu.count") or facts.why_missing("gpu.names") or "not known"
        return InputStatus("gpus", "GPUs", NOT_READ, short_reason(why), None)
    count_fact = facts.get("gpu.count")
    source = count_fact or facts.get("gpu.names")
    origin = _origin(source, doc) if source is not None else ""
    if origin == "what-if":
        origin = "--gpu"
    unique = list(dict.fromkeys(names))
    count = f"{count_fact.value} × " if count_fact is not None else "? × "
    detail = (count + unique[0] if len(unique) == 1 else ", ".join(unique)) + (
        f" ({origin})" if origin else ""
    )
    open_parts = []
    if count_fact is None:
        open_parts.append("how many is not known (--gpus N)")
    total = facts.get("gpu.memory_total_mib")
    if total is not None and total.inferred and isinstance(total.possible, list):
        from vllm_doctor.knowledge.gpus import lookup, without_memory

        sizes = " or ".join(str(int(s) // 1024) for s in total.possible)
        match = lookup(unique[0])
        common = match.family.memory_options[0] if match else int(total.possible[0]) // 1024
        open_parts.append(f'{sizes} GiB: name one (--gpu "{without_memory(unique[0])} {common}GB")')
    elif total is None and facts.why_missing("gpu.memory_total_mib"):
        open_parts.append(short_reason(facts.why_missing("gpu.memory_total_mib") or ""))
    if open_parts:
        return InputStatus("gpus", "GPUs", PARTIAL, f"{detail}; {'; '.join(open_parts)}", None)
    return InputStatus("gpus", "GPUs", READ, detail, None)


def _model(doc: CheckDocument) -> InputStatus:
    facts = doc.facts
    path = facts.get("model.config_path") or facts.get("model.architectures")
    if path is not None and path.source == Source.CONFIG:
        kind = facts.get("model.model_type") or facts.get("model.architectures")
        where = str(kind.detail or "") if kind is not None else ""
        if doc.inputs.get("model_config"):
            origin = "--model-config"
        elif where.startswith("HF cache"):
            origin = "Hugging Face cache"
        elif "Hub" in where:
            origin = "the Hugging Face Hub"
        else:
            origin = str(facts.value("model.config_path") or "config.json")
        archs = ", ".join(map(str, facts.value("model.architectures") or [])) or "config.json"
        return InputStatus("model", "model config", READ, f"{archs} ({origin})", None)
    why = facts.why_missing("model.architectures") or facts.why_missing("model")
    if facts.get("serve.model") is None and not doc.inputs.get("model_config"):
        return InputStatus("model", "model config", NOT_GIVEN, "", None)
    return InputStatus("model", "model config", NOT_READ, short_reason(why or "not read"), None)


def _serve(doc: CheckDocument) -> InputStatus:
    facts = doc.facts
    argv = facts.value("serve.argv")
    if argv is None:  # a serve line that cannot be read is bad input (exit 2), never here
        return InputStatus("serve", "serve line", NOT_GIVEN, "", None)
    model = facts.value("serve.model") or (argv[0] if argv else "")
    options = sum(1 for word in argv if str(word).startswith("-"))
    detail = f"vllm serve {model}" + (
        f" + {options} option{'s' * (options != 1)}" if options else ""
    )
    if doc.inputs.get("serve_config"):
        detail += f" (--serve-config {doc.inputs['serve_config']})"
    return InputStatus("serve", "serve line", READ, detail, None)


def _manifest(doc: CheckDocument) -> InputStatus:
    if doc.target is None:
        return InputStatus("manifest", "manifest", NOT_GIVEN, "", None)
    detail = f"{doc.target.file}:{doc.target.line} {doc.target.kind} {doc.target.name}"
    return InputStatus("manifest", "manifest", READ, detail, None)


def _log(doc: CheckDocument) -> InputStatus:
    lines = doc.facts.value("log.lines")
    if lines is None:
        if doc.inputs.get("log"):
            why = doc.facts.why_missing("log.lines") or "not read"
            return InputStatus("log", "log", NOT_READ, short_reason(why), None)
        return InputStatus("log", "log", NOT_GIVEN, "", None)
    matched = sum(1 for f in doc.applies if f.log_matches) + len(doc.log_messages)
    detail = f"{lines} lines" + (f", {matched} known message(s) in it" if matched else "")
    return InputStatus("log", "log", READ, detail, None)


def _input_of_reason(facts: Facts) -> dict[str, str]:
    """Each missing reason of an input's own facts → that input (for computed facts that are
    missing because one of those is)."""
    found: dict[str, str] = {}
    for key, _label, areas in INPUTS:
        for path, reason in facts.missing.items():
            if path.split(".", 1)[0] in areas:
                found.setdefault(root_reason(reason), key)
    return found


def needs(doc: CheckDocument) -> Counter[str]:
    """How many undecided rules need each input (a rule counts once per input)."""
    area_input = {area: key for key, _label, areas in INPUTS for area in areas}
    by_reason = _input_of_reason(doc.facts)
    counts: Counter[str] = Counter()
    for finding in doc.undecided:
        wanted = set()
        for missing in finding.missing:
            area = missing.path.split(".", 1)[0]
            if area in area_input:
                wanted.add(area_input[area])
            elif area in _COMPUTED:
                key = by_reason.get(root_reason(missing.reason))
                if key is not None:
                    wanted.add(key)
        counts.update(wanted)
    return counts


def input_statuses(doc: CheckDocument) -> list[InputStatus]:
    from vllm_doctor.report.supply import given_options, open_alternatives

    statuses = [_stack(doc), _gpus(doc), _model(doc), _serve(doc), _manifest(doc), _log(doc)]
    counts = needs(doc)
    given = given_options(doc)
    for status in statuses:
        status.needed_by = counts.get(status.key, 0)
        if status.state in (PARTIAL, NOT_READ) or status.needed_by:
            status.how = open_alternatives(_how(doc, status), given) or None
    return statuses


def _how(doc: CheckDocument, status: InputStatus) -> tuple[str, ...]:
    """How to supply an input: its alternatives, and for a Hub model whose config.json could
    not be read here, the command that fetches it where the Hub can be reached."""
    model = doc.facts.value("serve.model") or doc.facts.value("model.id")
    if status.key == "model" and status.state == NOT_READ and model and "Hub" in status.detail:
        return (
            *HOW["model"],
            f"fetch it where the Hub can be reached (`hf download {model} config.json`, "
            "HF_TOKEN for a gated model) and pass that",
        )
    return HOW[status.key]


def next_step(
    doc: CheckDocument, statuses: list[InputStatus] | None = None
) -> dict[str, Any] | None:
    """The input not read that most undecided rules need, with how to supply it; None when
    every undecided rule (if any) waits for something no input here gives."""
    statuses = statuses if statuses is not None else input_statuses(doc)
    open_ = [s for s in statuses if s.needed_by and s.how and s.state != READ]
    if not open_:
        return None
    best = max(open_, key=lambda s: (s.needed_by, -[x.key for x in statuses].index(s.key)))
    return {
        "input": best.key,
        "how": best.how,
        "why": best.detail or None,
        "undecided": best.needed_by,
        "of": len(doc.undecided),
        "need": NEED[best.key],
    }


def first_line(doc: CheckDocument) -> str:
    """``Read: ✓ serve line: … · ✗ model config: … · – log. Next: … (12 of the 25 undecided
    rules need the model's config.json)``: one line, whatever the width."""
    statuses = input_statuses(doc)
    given = [s.text() for s in statuses if s.state != NOT_GIVEN]
    absent = [s.label for s in statuses if s.state == NOT_GIVEN]
    line = "Read: " + " · ".join(given) if given else "Read: nothing"
    if absent:
        line += f" · – no {', no '.join(absent)}"
    step = next_step(doc, statuses)
    if step is not None:
        count, total = step["undecided"], step["of"]
        if total == 1:
            share = "the undecided rule needs"
        elif count == total:
            share = f"all {total} undecided rules need"
        else:
            share = f"{count} of the {total} undecided rules need{'s' * (count == 1)}"
        line += f". Next: {step['how']} — {share} {step['need']}"
    elif doc.undecided:
        n = len(doc.undecided)
        line += f". {n} rule{'s' * (n != 1)} stay undecided for facts these inputs cannot give"
    return line
