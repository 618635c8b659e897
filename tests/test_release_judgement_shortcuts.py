"""The shortcuts a judgement over the covered releases takes (engine/over_releases.py) answer
what the long way answers: a release's verdict without its finding (evaluate.verdict_of), a
release's facts computed only as far as the judged rules read them (facts_for_release's
``reads``), every release's table rows in one pass (knowledge.Table.at), the requirement
parses a host check leaves out (installed_requires._of_an_extra) and the cached specifier and
marker readings (version_specs)."""

from __future__ import annotations

import json

import pytest

from vllm_doctor import knowledge
from vllm_doctor.engine.evaluate import evaluate_rule, verdict_of
from vllm_doctor.engine.loader import load_rules
from vllm_doctor.engine.over_releases import _read_paths, facts_for_release
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.facts.hardware import TargetHardware

# a sample of the covered releases, oldest and newest included: every release is judged the
# same way, so a sample shows the shortcut without judging 50 releases per input
RELEASES = [*knowledge.covered_releases()[::7], knowledge.covered_releases()[-1]]
ENVIRON = {  # a variable a rule reads, one a step after the values reads, one refused, one unknown
    "VLLM_WSL2_ENABLE_PIN_MEMORY": "1",
    "VLLM_USE_DEEP_GEMM": "1",
    "VLLM_USE_V2_MODEL_RUNNER": "1",
    "VLLM_ATTENTION_BACKEND": "NOT_A_BACKEND",
    "VLLM_NOT_A_VARIABLE": "1",
    "VLLM_ROCM_USE_AITER": "1",
}
INPUTS = {
    "nvidia": ("vllm serve m -tp 2 --kv-cache-dtype fp8", TargetHardware(gpu="H100", count=2)),
    "amd": ("vllm serve m -tp 8 --enable-expert-parallel", TargetHardware(gpu="MI300X", count=8)),
    "unknown gpu": ("vllm serve m --quantization fp8 --max-model-len 32768", None),
}


@pytest.fixture(scope="module")
def rules():
    return load_rules()


@pytest.fixture(scope="module", params=sorted(INPUTS))
def facts(request):
    line, target = INPUTS[request.param]
    words = " ".join(f"{name}={value}" for name, value in ENVIRON.items())
    return collect_facts(
        CollectOptions(
            serve_string=f"{words} {line}",
            target=target,
            offline=True,
            elsewhere=True,
            probe_machine=False,
        )
    )


def _finding(rules, facts):
    """A finding per rule, as judge_over_releases gets them (only .rule is read here)."""
    return [evaluate_rule(rule, facts) for rule in rules]


def test_a_releases_facts_agree_wherever_the_judged_rules_read(rules, facts):
    reads = _read_paths(_finding(rules, facts))
    for release in RELEASES:
        full = facts_for_release(facts, release)
        read = facts_for_release(facts, release, reads)
        for path in sorted(reads):
            assert read.get(path) == full.get(path), (release, path)
            assert read.why_missing(path) == full.why_missing(path), (release, path)
            assert read.is_unknowable(path) == full.is_unknowable(path), (release, path)
        for rule in rules:
            assert evaluate_rule(rule, read) == evaluate_rule(rule, full), (release, rule.code)


def test_the_reads_leave_out_release_variables_no_rule_reads(rules, facts):
    reads = _read_paths(_finding(rules, facts))
    release = knowledge.covered_releases()[-1]
    full = facts_for_release(facts, release)
    read = facts_for_release(facts, release, reads)
    left_out = {p for p in full.values if p.startswith("release.env.")} - set(read.values)
    if facts.value("gpu.gfx_targets") is not None:
        assert not left_out  # on an AMD GPU the AITER gates read any of them: all are kept
        return
    assert left_out, "every release variable is read by some rule: the shortcut is moot"
    assert not left_out & reads


def test_a_verdict_of_alone_is_the_findings_verdict(rules, facts):
    for release in RELEASES:
        judged = facts_for_release(facts, release)
        for rule in rules:
            assert verdict_of(rule, judged) == evaluate_rule(rule, judged).verdict, rule.code


def _table_kinds() -> list[str]:
    kinds = []
    for path in sorted(knowledge.DATA_DIR.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        # the per-release tables (the others hold no releases: another layout under format 1)
        per_release = isinstance(data, dict) and len(data.get("releases") or ()) > 1
        if per_release and data.get("format") == knowledge.FORMAT:
            kinds.append(path.stem)
    return kinds


@pytest.mark.parametrize("kind", _table_kinds())
def test_every_releases_rows_in_one_pass_are_each_releases_own(kind):
    data = json.loads((knowledge.DATA_DIR / f"{kind}.json").read_text(encoding="utf-8"))
    one_by_one, in_one_pass = knowledge.Table(kind, data), knowledge.Table(kind, data)
    first = in_one_pass.releases[0]
    kept = in_one_pass.at(first)
    for release in one_by_one.releases:
        one_by_one._at.clear()  # the release alone, as the first release asked is computed
        alone = one_by_one.at(release)
        together = in_one_pass.at(release)  # the second release asked fills every release
        assert list(together.items()) == list(alone.items()), release
    assert in_one_pass.at(first) is kept  # a release already asked keeps its object


@pytest.mark.parametrize(
    "line",
    [
        'scipy; extra == "scipy"',
        "pytest>=7 ; extra=='test'",
        'numpy>=1.20; python_version >= "3.9"',
        'triton==3.1.0; platform_system == "Linux" and platform_machine == "x86_64"',
        'pkg @ https://host/a;extra.whl ; python_version > "3"',
        'odd; platform_release == "extra-kernel"',
        "not a requirement ;; extra",
        "torch==2.12.0",
        "name[extra]>=1",
    ],
)
def test_a_line_told_of_an_extra_without_parsing_is_one_the_parse_leaves_out(line):
    from packaging.requirements import InvalidRequirement, Requirement

    from vllm_doctor.facts.installed_requires import _of_an_extra

    try:
        req = Requirement(line)
        marker = str(req.marker) if req.marker else ""
        left_out = "extra" in marker or bool(req.url) or not req.specifier
    except InvalidRequirement:
        left_out = True
    if _of_an_extra(line):
        assert left_out


@pytest.mark.parametrize(
    ("spec", "version"),
    [(">=2.5,<2.8", "2.7.1"), (">=2.5,<2.8", "2.8.0"), ("==2.9.0", "2.9.0+cu128"),
     (">=1.0", "1.1rc1"), ("~=", "1.0"), (">=1", "not.a.version")],
)  # fmt: skip
def test_a_cached_specifier_reads_as_packaging_reads_it(spec, version):
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    from vllm_doctor.version_specs import admits

    try:
        expected = SpecifierSet(spec).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        expected = None
    assert admits(spec, version) is expected
    assert admits(spec, version) is expected  # and again, from the cache


@pytest.mark.parametrize(
    ("marker", "machine", "expected"),
    [('platform_machine == "x86_64"', "x86_64", True),
     ('platform_machine == "x86_64"', "aarch64", False),
     ('sys_platform == "win32"', "x86_64", False),
     ("not a marker", "x86_64", None)],
)  # fmt: skip
def test_a_cached_marker_holds_for_the_environment_given(marker, machine, expected):
    from vllm_doctor.version_specs import marker_holds

    env = (("platform_system", "Linux"), ("sys_platform", "linux"), ("platform_machine", machine))
    assert marker_holds(marker, env) is expected
