"""What the judged vLLM release makes of the serve environment's variables (``release.env*``).

The knowledge table ``envs`` (tools/extractors/envs.py, from each release's ``vllm/envs.py``)
holds every ``VLLM_*`` variable a release declares and how it turns the variable's text into
its value. With the environment known (``env.*``: this machine's, a report's, a manifest's, the
``VAR=value`` words in front of the serve line), each variable's value in the judged release is
a fact: the value set, read as that release reads it, or the release's default.

Facts written:
  ``release.env.<NAME>``   the value the judged release takes; where it is None, False if
                           the release's code only truth-tests it (``none_reads`` "off" in
                           the envs table: ``if envs.X:`` reads None as off), else absent
                           (the release decides at run time or tells None apart); missing
                           where the environment is not known for NAME or the release
                           computes it in code not followed
  ``release.env_unknown``  ``VLLM_*`` variables set that the judged release does not declare
                           (it ignores them): the detail names the releases that do
  ``release.env_invalid``  variables set to a value the judged release refuses (ValueError
                           at start-up), with vLLM's message in the detail
  ``release.model_runner_v2``  on | off | auto: Model Runner V2 as ``VLLM_USE_V2_MODEL_RUNNER``
                           forces it, else the release's own choice (knowledge table
                           ``model_runner``): off, or auto (V2 for some models and lines, which
                           the detail names)
  ``release.deep_gemm_arch`` / ``release.deep_gemm``  the judged release's DeepGEMM check
                           admits this GPU's capability (knowledge table ``deep_gemm``), and
                           also VLLM_USE_DEEP_GEMM is on: vLLM then takes DeepGEMM's kernels
                           where the deep_gemm package imports
  ``release.aiter.<feature>``  on an AMD GPU: whether the judged release uses that AITER
                           feature (knowledge table ``aiter_gates``: the release's check over
                           its variables' values and the GPU's gfx target); absent on NVIDIA
"""

from __future__ import annotations

from collections.abc import Collection, Container
from typing import Any

from vllm_doctor.facts.model import Facts

SOURCE = "release knowledge"
PATHS = (
    "release.env_unknown",
    "release.env_invalid",
    "release.model_runner_v2",
    "release.deep_gemm",
    "release.deep_gemm_arch",
)


def _environment(facts: Facts) -> dict[str, str]:
    return {path[4:]: str(fact.value) for path, fact in facts.area("env")}


def collect_release_env(facts: Facts, names: Collection[str] | None = None) -> None:
    """``names``: the variables whose ``release.env.<NAME>`` is wanted (None: every one); a
    judgement over the covered releases asks only for those its rules read."""
    from vllm_doctor import knowledge

    release = facts.value("release.judged")
    if release is None:
        reason = facts.why_missing("release.judged") or "no covered vLLM release is judged"
        for path in PATHS:
            facts.mark_missing(path, reason)
        facts.mark_missing("release.env", reason)
        if facts.value("gpu.gfx_targets") is not None or facts.why_missing("gpu.gfx_targets"):
            facts.mark_missing("release.aiter", reason)  # an AMD GPU (or one not known)
        return
    table = knowledge.load("envs")
    declared: dict[str, Any] = table.at(str(release))
    environ = _environment(facts)
    detail = f"vLLM {release}: vllm/envs.py"
    _values(facts, declared, environ, str(release), _with_own_reads(facts, names))
    _unknown(facts, table, declared, environ, detail)
    _model_runner(facts, str(release))
    _deep_gemm(facts, str(release))
    _aiter(facts, str(release), declared)


# the variables whose release.env.<NAME> the steps after _values read: Model Runner V2's and
# DeepGEMM's switches; on an AMD GPU, any switch of the AITER gates (every one is kept there)
_MODEL_RUNNER_SWITCH = "VLLM_USE_V2_MODEL_RUNNER"
_DEEP_GEMM_SWITCH = "VLLM_USE_DEEP_GEMM"


def _with_own_reads(facts: Facts, names: Collection[str] | None) -> Collection[str] | None:
    if names is None or facts.value("gpu.gfx_targets") is not None:
        return None
    return {*names, _MODEL_RUNNER_SWITCH, _DEEP_GEMM_SWITCH}


def _values(
    facts: Facts,
    declared: dict[str, Any],
    environ: dict[str, str],
    release: str,
    names: Container[str] | None = None,
) -> None:
    refused: list[str] = []
    messages: list[str] = []
    outcomes = _outcomes_for(facts, environ)
    for name in _switches(declared):
        path = f"release.env.{name}"
        kind, detail = _outcome(outcomes, name, declared[name]["program"], facts, environ)
        if kind == "refused":  # release.env_invalid names every variable refused
            given, err = detail
            refused.append(name)
            messages.append(f"{name}={given if given is not None else ''!s}: {err}")
        if names is not None and name not in names:
            continue
        if kind == "unknown":
            facts.mark_missing(path, detail)
        elif kind == "opaque":
            facts.mark_missing(
                path, f"vLLM {release} computes {name} in code the knowledge does not follow"
            )
        elif kind == "refused":
            given, err = detail
            facts.mark_missing(path, f"vLLM {release} refuses {name}={given}: {err}")
        elif kind == "value":
            value, read = detail
            if isinstance(value, list):  # a fact of its own: the kept answer stays as it was
                value = list(value)
            where = (
                f"{read} read as vLLM {release} reads it"
                if read
                else f"not set: vLLM {release}'s default (vllm/envs.py)"
            )
            facts.set(path, value, SOURCE, where)
        elif kind == "none" and declared[name].get("none_reads") == "off":
            # None, and every read of it in the release is a truth test: the switch is off
            facts.set(
                path,
                False,
                SOURCE,
                f"{detail or 'not set'}: None in vLLM {release}, which its code reads only as "
                f"a truth test (`if envs.{name}:`): off",
            )
        # otherwise (kind "none"): None has a meaning of its own there (the release decides
        # at run time, or tells None apart): absent
    if _env_known(facts):
        facts.set(
            "release.env_invalid",
            refused,
            SOURCE,
            "; ".join(messages) or f"every variable set is one vLLM {release} accepts",
        )
    else:
        facts.mark_missing("release.env_invalid", _env_reason(facts))


# What a variable's program makes of the environment does not depend on the release judged:
# a judgement without a vLLM version asks it again for each covered release, with the same
# program (a table's span) and the same environment. The answers are kept per environment
# (its values, its missing reasons and its listing: all that ``_outcome`` reads of the facts),
# and per program object (the tables are loaded once; the program is kept with its answer, so
# its id is not reused).
_Outcome = tuple[str, Any]
_OUTCOMES: dict[tuple[Any, ...], dict[tuple[str, int], tuple[Any, _Outcome]]] = {}
_OUTCOMES_MAX = 64  # environments kept
_SWITCHES: dict[int, tuple[dict[str, Any], list[str]]] = {}


def _switches(declared: dict[str, Any]) -> list[str]:
    """vLLM's own switches, sorted (envs.py also reads MAX_JOBS, LOCAL_RANK, NO_COLOR, ... for
    builds and logging: not gates of a serve line); ``declared`` is a table's kept ``at()``."""
    kept = _SWITCHES.get(id(declared))
    if kept is None or kept[0] is not declared:
        if len(_SWITCHES) >= 4 * _OUTCOMES_MAX:
            _SWITCHES.clear()
        kept = (declared, sorted(n for n in declared if n.startswith("VLLM_")))
        _SWITCHES[id(declared)] = kept
    return kept[1]


def _outcomes_for(
    facts: Facts, environ: dict[str, str]
) -> dict[tuple[str, int], tuple[Any, _Outcome]]:
    key = (
        tuple(sorted(environ.items())),
        tuple(
            sorted((k, r) for k, r in facts.missing.items() if k == "env" or k.startswith("env."))
        ),
        facts.listings.get("env"),
    )
    kept = _OUTCOMES.get(key)
    if kept is None:
        if len(_OUTCOMES) >= _OUTCOMES_MAX:
            _OUTCOMES.clear()
        kept = _OUTCOMES[key] = {}
    return kept


def _outcome(
    outcomes: dict[tuple[str, int], tuple[Any, _Outcome]],
    name: str,
    program: Any,
    facts: Facts,
    environ: dict[str, str],
) -> _Outcome:
    """What ``program`` (variable ``name``'s) makes of the environment, whatever the release:
    ("unknown", reason) | ("opaque", None) | ("refused", (value set, error)) |
    ("value", (value, the variables read as text)) | ("none", the variables read as text)."""
    kept = outcomes.get((name, id(program)))
    if kept is not None and kept[0] is program:
        return kept[1]
    answer = _evaluate(name, program, facts, environ)
    outcomes[(name, id(program))] = (program, answer)
    return answer


def _evaluate(name: str, program: Any, facts: Facts, environ: dict[str, str]) -> _Outcome:
    from vllm_doctor.knowledge.envs import Opaque, Refused, evaluate, names

    read = names(program)
    unknown = [n for n in sorted(read) if n not in environ and facts.why_missing(f"env.{n}")]
    if unknown:
        return "unknown", f"env.{unknown[0]} is not known: {facts.why_missing(f'env.{unknown[0]}')}"
    given = {n: environ[n] for n in read if n in environ}
    try:
        value = evaluate(program, given)
    except Opaque:
        return "opaque", None
    except Refused as err:
        return "refused", (given.get(name), str(err))  # not the error: its frames hold the facts
    if value is None:  # the variables read as text, where any is set
        return "none", ", ".join(f"{n}={given[n]}" for n in sorted(given))
    return "value", (value, ", ".join(f"{n}={given[n]}" for n in sorted(given)))


def _unknown(
    facts: Facts, table: Any, declared: dict[str, Any], environ: dict[str, str], detail: str
) -> None:
    if not _env_known(facts):
        facts.mark_missing("release.env_unknown", _env_reason(facts))
        return
    unknown = sorted(n for n in environ if n.startswith("VLLM_") and n not in declared)
    notes = []
    order = {r: i for i, r in enumerate(table.releases)}
    for name in unknown:
        ranges: list[list[str]] = []
        for span in table.spans(name):  # spans that follow each other: one range
            if ranges and order[span.first] == order[ranges[-1][1]] + 1:
                ranges[-1][1] = span.last
            else:
                ranges.append([span.first, span.last])
        notes.append(
            f"{name}: declared by " + ", ".join(a if a == b else f"{a}–{b}" for a, b in ranges)
            if ranges
            else f"{name}: no covered release declares it"
        )
    facts.set(
        "release.env_unknown",
        unknown,
        SOURCE,
        f"{detail}; " + "; ".join(notes) if notes else f"{detail} declares every VLLM_* set",
    )


def _env_known(facts: Facts) -> bool:
    """Which ``VLLM_*`` variables are set is known (the area is not missing for them)."""
    return facts.why_missing("env.VLLM_") is None


def _env_reason(facts: Facts) -> str:
    return f"which VLLM_* variables are set is not known: {facts.why_missing('env.VLLM_')}"


def _aiter(facts: Facts, release: str, declared: dict[str, Any]) -> None:
    """Each AITER check of the judged release, on this GPU with this environment."""
    from vllm_doctor import knowledge

    targets = facts.value("gpu.gfx_targets")
    if targets is None:
        reason = facts.why_missing("gpu.gfx_targets")
        if reason:
            facts.mark_missing("release.aiter", f"the GPU's gfx target is not known: {reason}")
        return  # an NVIDIA GPU: no AITER (absent)
    table = knowledge.load("aiter_gates")
    gates: dict[str, Any] = table.at(release)
    if "@supported" not in gates:
        # before vllm/_aiter_ops.py: only the module-level checks the table lists are known
        facts.mark_missing(
            "release.aiter",
            f"vLLM {release} checks AITER in code the knowledge does not follow "
            "(before vllm/_aiter_ops.py"
            + (f"; it knows only {', '.join(sorted(gates))})" if gates else ")"),
        )
        _aiter_paths_not_declared(facts, release, table, gates, declared)
    for feature, entry in sorted(gates.items()):
        name = "supported" if feature == "@supported" else feature
        path = f"release.aiter.{name}"
        value, unknown = _gate(facts, entry["gate"], [str(t) for t in targets])
        if value is None:
            facts.mark_missing(path, unknown or f"vLLM {release}'s check is not followed")
            continue
        facts.set(path, value, SOURCE, f"vLLM {release} {entry['method']}() on {'/'.join(targets)}")


def _aiter_paths_not_declared(
    facts: Facts, release: str, table: Any, gates: dict[str, Any], declared: dict[str, Any]
) -> None:
    """In a release before _aiter_ops.py, an AITER feature whose own switch
    (VLLM_ROCM_USE_AITER_<X>, in every release that checks it) the release does not declare:
    that path is not in the release, so the feature is off."""
    for feature in table:
        if feature.startswith("@") or feature in gates:
            continue
        switches: set[str] = set()
        for span in table.spans(feature):
            switches |= {
                n for n in _gate_variables(span.value["gate"]) if n != "VLLM_ROCM_USE_AITER"
            }
        if switches and not switches & set(declared):
            facts.set(
                f"release.aiter.{feature}",
                False,
                SOURCE,
                f"vLLM {release} declares no {', '.join(sorted(switches))}: no such AITER path",
            )


def _gate_variables(program: Any) -> set[str]:
    if not isinstance(program, list) or not program:
        return set()
    if program[0] == "env":
        return {str(program[1])}
    return set().union(*(_gate_variables(p) for p in program[1:] if isinstance(p, list)))


def _gate(facts: Facts, program: Any, targets: list[str]) -> tuple[bool | None, str]:
    """Three-valued: (True/False, "") or (None, why it cannot be decided)."""
    op, args = program[0], program[1:]
    if op == "const":
        return bool(args[0]), ""
    if op == "arch":
        return all(t in args[0] for t in targets), ""
    if op == "env":
        path = f"release.env.{args[0]}"
        if path in facts:
            return bool(facts.value(path)), ""
        reason = facts.why_missing(path)
        return (None, f"{path}: {reason}") if reason else (False, "")
    if op == "not":
        value, why = _gate(facts, args[0], targets)
        return (None if value is None else not value), why
    if op in ("and", "or"):
        results = [_gate(facts, arg, targets) for arg in args]
        decisive = op == "or"  # True decides an or, False an and
        if any(value is decisive for value, _ in results):
            return decisive, ""
        unknown = [why for value, why in results if value is None]
        return (None, unknown[0]) if unknown else (not decisive, "")
    return None, f"a test the knowledge does not follow: {args[0] if args else op}"


def _model_runner(facts: Facts, release: str) -> None:
    """on / off as VLLM_USE_V2_MODEL_RUNNER says, else the release's own choice: off, or auto
    (the release picks V2 for some models by itself: the table names which ones; which way it
    goes for this model and line is not decided here)."""
    from vllm_doctor import knowledge

    path = "release.model_runner_v2"
    variable = f"release.env.{_MODEL_RUNNER_SWITCH}"
    fact = facts.get(variable)
    if fact is not None:
        forced = "on" if fact.value else "off"
        facts.set(path, forced, SOURCE, f"VLLM_USE_V2_MODEL_RUNNER: {fact.detail}")
        return
    reason = facts.why_missing(variable)
    if reason:
        facts.mark_missing(path, f"{variable}: {reason}")
        return
    choice: dict[str, Any] = knowledge.load("model_runner").at(release).get("@release") or {}
    default = choice.get("default") or "off"
    listed = ", ".join(choice.get("architectures") or [])
    where = f"vLLM {release} VllmConfig.use_v2_model_runner (VLLM_USE_V2_MODEL_RUNNER not set)"
    detail = {
        "off": f"{where}: V1 unless the variable asks for V2",
        "listed": f"{where}: V2 by default for {listed} (with the release's conditions on "
        "MoE, quantization and hybrid models)",
        "auto": f"{where}: V2 unless the line uses a feature it does not support yet"
        + (f"; ROCm keeps {listed} on V1" if listed else ""),
    }.get(default, where)
    facts.set(path, "off" if default == "off" else "auto", SOURCE, detail)


def _deep_gemm(facts: Facts, release: str) -> None:
    """Whether the judged release's DeepGEMM check admits this GPU (exact capabilities and
    capability families, knowledge table deep_gemm), and with VLLM_USE_DEEP_GEMM."""
    from vllm_doctor import knowledge

    arch_path, used_path = "release.deep_gemm_arch", "release.deep_gemm"
    check: dict[str, Any] = knowledge.load("deep_gemm").at(release).get("@release") or {}
    if not check:
        reason = (
            f"vLLM {release} tests DeepGEMM's capabilities in code the knowledge does not follow"
        )
        facts.mark_missing(arch_path, reason)
        facts.mark_missing(used_path, reason)
        return
    capabilities = facts.value("gpu.capabilities")
    if capabilities is None:
        reason = f"gpu.capabilities: {facts.why_missing('gpu.capabilities') or 'not known'}"
        facts.mark_missing(arch_path, reason)
        facts.mark_missing(used_path, reason)
        return
    exact, family = list(check.get("exact") or []), list(check.get("family") or [])
    admitted = all(int(c) in exact or int(c) // 10 * 10 in family for c in capabilities)
    where = f"vLLM {release} {check.get('where')}: capability " + " or ".join(
        [*(str(c) for c in exact), *(f"{f // 10}.x" for f in family)]
    )
    facts.set(arch_path, admitted, SOURCE, where)
    switch = f"release.env.{_DEEP_GEMM_SWITCH}"
    variable = facts.get(switch)
    if variable is None:
        facts.mark_missing(used_path, f"{switch}: {facts.why_missing(switch) or 'not known'}")
        return
    facts.set(
        used_path,
        admitted and bool(variable.value),
        SOURCE,
        f"{where}; VLLM_USE_DEEP_GEMM: {variable.detail}",
    )
