"""The `when` condition tree: compiled once at load time, evaluated in three-valued logic.

A test of a fact that could not be collected (its path or area is marked missing, with the
reason) is UNKNOWN; `all`/`any`/`not` follow Kleene logic, so a rule is "cannot decide" exactly
when a missing fact could change its answer. A fact that was looked for and is not there (a
flag not given, a package not installed, an optional model feature such as experts) is
*absent*: only `ne`, `not_in` and `exists: false` hold for it. A fact the schema says is never
legitimately absent (a model's head count: every model has one, under some key) is unknown when
it is not there, whatever the collector recorded.

The comparison operators (`eq ne lt le gt ge`) and `divisible_by` also take `{fact: PATH}`: the
value is compared with another fact, and the test is unknown when either side is not known.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.schema import absent_is_unknown, is_known_path

TRUE, FALSE, UNKNOWN = True, False, None


@lru_cache(maxsize=1024)
def parse_version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


OPERATORS = (
    "eq",
    "ne",
    "in",
    "not_in",
    "lt",
    "le",
    "gt",
    "ge",
    "contains",
    "contains_any",
    "matches",
    "exists",
    "inferred",
    "version",
    "divisible_by",
)


class ConditionError(ValueError):
    """A malformed condition; ``field`` is the dotted location inside the rule file."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


@dataclass
class Outcome:
    """Result of evaluating a condition: the truth value and what it was based on."""

    value: bool | None
    evidence: list[Test]  # the tests that were decided (their fact paths are the evidence)
    missing: list[str]  # fact paths whose absence left a test unknown
    # the decided tests that count towards the condition holding; the others argue against it
    # (a false part of an undecided `any`, or every test of a false condition)
    support: list[Test] = field(default_factory=list)


def _fold(value: Any) -> Any:
    return value.casefold() if isinstance(value, str) else value


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple, set)) else [value]


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


class Condition:
    """A rule's ``when`` (or ``warn_when``): a ``Test`` of one fact, or a ``Group`` of them,
    evaluated to true, false or unknown over the facts (three-valued: a missing fact makes a
    test unknown unless the group is decided without it)."""

    def evaluate(self, facts: Facts) -> Outcome:  # pragma: no cover - interface
        """True, false or unknown, with the tests that decided it and the facts missing."""
        raise NotImplementedError

    def paths(self) -> list[str]:  # pragma: no cover - interface
        """Every fact path the condition reads (``rules validate`` checks them)."""
        raise NotImplementedError


@dataclass
class Group(Condition):
    """``all`` / ``any`` / ``not`` of conditions, decided as soon as one part decides it."""

    kind: str  # all | any | not
    parts: list[Condition]

    def evaluate(self, facts: Facts) -> Outcome:
        # Short-circuit on the deciding value: a false part decides `all`, a true one `any`.
        decisive = FALSE if self.kind == "all" else TRUE
        outcomes = []
        for part in self.parts:
            outcome = part.evaluate(facts)
            outcomes.append(outcome)
            if self.kind != "not" and outcome.value is decisive:
                outcomes = [outcome]
                break
        if len(outcomes) == 1:
            evidence, missing = outcomes[0].evidence, outcomes[0].missing
        else:
            evidence = [e for o in outcomes for e in o.evidence]
            missing = [m for o in outcomes for m in o.missing]
        support = [t for o in outcomes for t in o.support]
        values = [o.value for o in outcomes]
        if self.kind == "not":
            value = values[0]
            held = {id(t) for t in support}  # what held inside argues against the negation
            return Outcome(
                None if value is None else not value,
                evidence,
                missing,
                [t for t in evidence if id(t) not in held],
            )
        if self.kind == "all":
            value = FALSE if FALSE in values else (UNKNOWN if UNKNOWN in values else TRUE)
        else:
            value = TRUE if TRUE in values else (UNKNOWN if UNKNOWN in values else FALSE)
        # A decided group does not depend on its undecided parts: don't ask for those facts.
        if value is not UNKNOWN:
            missing = []
        return Outcome(value, evidence, missing, support)

    def paths(self) -> list[str]:
        return [p for part in self.parts for p in part.paths()]


@dataclass
class Test(Condition):
    """One operator applied to one fact (``fact: gpu.count, gt: 1``); built by
    engine/loader.py from the rule file."""

    path: str
    op: str
    operand: Any
    check: Callable[[Any, Facts], bool | None]

    def describe(self) -> str:
        """What the test asks, as evidence shows it ("gt 1", "version >=0.8,<0.9")."""
        operand = self.operand.get("fact") if isinstance(self.operand, dict) else self.operand
        return f"{self.op} {operand}"

    def evaluate(self, facts: Facts) -> Outcome:
        outcome = self._decide(facts)
        if outcome.value is TRUE:
            outcome.support = list(outcome.evidence)
        return outcome

    def _decide(self, facts: Facts) -> Outcome:
        fact = facts.get(self.path)
        if fact is None and self._unknown_when_not_there(facts):
            return Outcome(UNKNOWN, [], [self.path])
        if self.op == "exists":
            present = fact is not None
            return Outcome(present == bool(self.operand), [self], [])
        if self.op == "inferred":
            # where the value came from, not what it is: an inferred value (a table's, a
            # release's pin, a distribution's libstdc++) against one read or given
            inferred = fact is not None and fact.inferred  # an absent fact was not inferred
            return Outcome(inferred == bool(self.operand), [self], [])
        if fact is None and isinstance(self.operand, dict):
            return Outcome(UNKNOWN, [], [self.path])  # a comparison of two facts needs both
        if fact is not None and fact.possible is not None:
            # an inferred fact: decided only where every value it leaves possible agrees
            value = self._over_possible(fact.possible, facts)
            return (
                Outcome(value, [self], [])
                if value is not None
                else Outcome(UNKNOWN, [], [self.path])
            )
        if fact is None:
            # Looked for and not there (a flag not given, a package not installed, a config
            # field the model does not have): only the negative tests hold.
            return Outcome(self.op in ("ne", "not_in"), [self], [])
        value = self.check(fact.value, facts)
        if value is None:  # e.g. the operand's fact is missing, or the value is not comparable
            ref = self.operand.get("fact") if isinstance(self.operand, dict) else None
            return Outcome(UNKNOWN, [], [ref] if ref and ref not in facts else [self.path])
        return Outcome(value, [self], [])

    def _over_possible(self, possible: Any, facts: Facts) -> bool | None:
        if isinstance(possible, str):
            return (
                possible_versions_satisfy(possible, str(self.operand))
                if self.op == "version"
                else None
            )
        answers = {self.check(value, facts) for value in possible}
        return answers.pop() if len(answers) == 1 else None

    def _unknown_when_not_there(self, facts: Facts) -> bool:
        # Not collected (a reason is recorded), or a fact that no real input lacks: a model
        # config without a head count has it under a key the collector could not read.
        return bool(facts.why_missing(self.path)) or absent_is_unknown(self.path)

    def paths(self) -> list[str]:
        extra = [self.operand["fact"]] if isinstance(self.operand, dict) else []
        return [self.path, *extra]


def _fact_operand(operand: Any, op: str, where: str) -> str | None:
    """The path of a `{fact: PATH}` operand, None for a literal; malformed ones raise."""
    if not isinstance(operand, dict):
        return None
    ref = operand.get("fact")
    if not isinstance(ref, str) or set(operand) != {"fact"}:
        raise ConditionError(where, f"`{op}` takes a value or {{fact: PATH}}")
    if not is_known_path(ref):
        raise ConditionError(where, f"unknown fact path {ref!r}")
    return ref


def _interval(spec: str) -> tuple[Version | None, bool, Version | None, bool] | None:
    """(low, low inclusive, high, high inclusive) of a specifier set of >=, >, <, <=, ==
    clauses (``!=`` clauses are left out: the interval holds the set); None for other forms."""
    low: Version | None = None
    high: Version | None = None
    low_in = high_in = True
    try:
        clauses = SpecifierSet(spec, prereleases=True)
    except InvalidSpecifier:
        return None
    for clause in clauses:
        version = parse_version(clause.version)
        if version is None or clause.operator not in (">=", ">", "<", "<=", "==", "!="):
            return None
        if clause.operator == "!=":
            continue
        if clause.operator in (">=", ">", "==") and (
            low is None or version > low or (version == low and clause.operator == ">")
        ):
            low, low_in = version, clause.operator != ">"
        if clause.operator in ("<", "<=", "==") and (
            high is None or version < high or (version == high and clause.operator == "<")
        ):
            high, high_in = version, clause.operator != "<"
    return low, low_in, high, high_in


def possible_versions_satisfy(possible: str, test: str) -> bool | None:
    """Whether every version the specifier ``possible`` allows satisfies ``test`` (True), none
    does (False), or some do (None)."""
    have, want = _interval(possible), _interval(test)
    if have is None or want is None:
        return None
    low, low_in, high, high_in = have
    w_low, w_low_in, w_high, w_high_in = want
    # disjoint: one interval ends before the other starts
    for end, end_in, start, start_in in (
        (high, high_in, w_low, w_low_in),
        (w_high, w_high_in, low, low_in),
    ):
        if (
            end is not None
            and start is not None
            and (end < start or (end == start and not (end_in and start_in)))
        ):
            return False
    if "!=" in test:
        return None
    inside_low = w_low is None or (
        low is not None and (low > w_low or (low == w_low and (w_low_in or not low_in)))
    )
    inside_high = w_high is None or (
        high is not None and (high < w_high or (high == w_high and (w_high_in or not high_in)))
    )
    return True if inside_low and inside_high else None


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}


def _compare_facts(op: str, ref: str) -> Callable[[Any, Facts], bool | None]:
    """A test of one fact against another: unknown unless both are known and comparable."""

    def check(v: Any, facts: Facts) -> bool | None:
        other = facts.value(ref)
        if other is None:
            return None
        if op in ("eq", "ne"):
            if isinstance(v, bool) != isinstance(other, bool):
                return None
            left, right = _number(v), _number(other)
            same = (
                (left == right)
                if left is not None and right is not None
                else _fold(v) == _fold(other)
            )
            return same if op == "eq" else not same
        left, right = _number(v), _number(other)
        if left is None or right is None:
            return None
        return _COMPARE[op](left, right)

    return check


def _make_check(op: str, operand: Any, where: str) -> Callable[[Any, Facts], bool | None]:
    if op in ("eq", "ne", "lt", "le", "gt", "ge"):
        ref = _fact_operand(operand, op, where)
        if ref is not None:
            return _compare_facts(op, ref)
    if op in ("eq", "ne"):

        def check(v: Any, _f: Facts) -> bool | None:
            same = _fold(v) == _fold(operand)
            return same if op == "eq" else not same

        return check
    if op in ("in", "not_in"):
        if not isinstance(operand, list):
            raise ConditionError(where, f"`{op}` needs a list")
        folded = [_fold(x) for x in operand]
        return lambda v, _f: (_fold(v) in folded) == (op == "in")
    if op in ("lt", "le", "gt", "ge"):
        bound = _number(operand)
        if bound is None:
            raise ConditionError(where, f"`{op}` needs a number, got {operand!r}")
        compare = _COMPARE[op]

        def check_number(v: Any, _f: Facts) -> bool | None:
            number = _number(v)
            return None if number is None else compare(number, bound)

        return check_number
    if op in ("contains", "contains_any"):
        wanted = operand if op == "contains_any" else [operand]
        if op == "contains_any" and not isinstance(operand, list):
            raise ConditionError(where, "`contains_any` needs a list")
        folded = [_fold(x) for x in wanted]

        def check_contains(v: Any, _f: Facts) -> bool | None:
            if isinstance(v, str):
                return any(isinstance(w, str) and w in v.casefold() for w in folded)
            if isinstance(v, (list, tuple)):
                items = [_fold(x) for x in v]
                return any(w in items for w in folded)
            return None

        return check_contains
    if op == "matches":
        from vllm_doctor.engine.linear import LinearRegexError, compile_linear

        try:
            regex = compile_linear(str(operand))
        except LinearRegexError as err:
            raise ConditionError(where, f"{err} ({str(operand)[:80]!r})") from None
        return lambda v, _f: any(regex.search(str(x)) for x in _as_list(v))
    if op == "version":
        try:
            spec = SpecifierSet(str(operand), prereleases=True)
        except InvalidSpecifier:
            raise ConditionError(where, f"bad version specifier {operand!r}") from None

        def check_version(v: Any, _f: Facts) -> bool | None:
            version = parse_version(str(v))
            return None if version is None else spec.contains(version)

        return check_version
    if op in ("exists", "inferred"):
        if not isinstance(operand, bool):
            raise ConditionError(where, f"`{op}` takes true or false")
        return lambda v, _f: True  # decided in Test.evaluate, which sees the fact itself
    if op == "divisible_by":
        ref = _fact_operand(operand, op, where)
        if ref is not None:

            def check_div_fact(v: Any, facts: Facts) -> bool | None:
                divisor = facts.value(ref)
                if not isinstance(divisor, int) or not isinstance(v, int) or divisor == 0:
                    return None
                return v % divisor == 0

            return check_div_fact
        if not isinstance(operand, int) or operand == 0:
            raise ConditionError(where, "`divisible_by` needs a non-zero integer")
        return lambda v, _f: (v % operand == 0) if isinstance(v, int) else None
    raise ConditionError(where, f"unknown operator {op!r}")  # pragma: no cover


def compile_condition(node: Any, where: str = "when") -> Condition:
    """Compile a YAML condition tree, raising ConditionError with the field path on mistakes."""
    if not isinstance(node, dict):
        raise ConditionError(where, "a condition must be a mapping")
    groups = [k for k in ("all", "any", "not") if k in node]
    if groups:
        if len(node) != 1:
            raise ConditionError(where, f"`{groups[0]}` must stand alone in its mapping")
        kind = groups[0]
        body = node[kind]
        if kind == "not":
            return Group("not", [compile_condition(body, f"{where}.not")])
        if not isinstance(body, list) or not body:
            raise ConditionError(f"{where}.{kind}", "needs a non-empty list")
        return Group(
            kind, [compile_condition(p, f"{where}.{kind}[{i}]") for i, p in enumerate(body)]
        )
    path = node.get("fact")
    if not isinstance(path, str):
        raise ConditionError(where, "needs `fact: PATH` or one of all/any/not")
    if not is_known_path(path):
        raise ConditionError(f"{where}.fact", f"unknown fact path {path!r}")
    ops = [k for k in node if k != "fact"]
    if len(ops) != 1:
        raise ConditionError(where, f"needs exactly one operator, got {ops or 'none'}")
    op = ops[0]
    if op not in OPERATORS:
        raise ConditionError(f"{where}.{op}", f"unknown operator (one of {', '.join(OPERATORS)})")
    operand = node[op]
    return Test(path, op, operand, _make_check(op, operand, f"{where}.{op}"))
