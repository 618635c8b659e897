"""tools/audit_wheels.py against tiny fake wheels (zip files built in a tmp dir, no network)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from vllm_doctor.engine.fixstate import check_fingerprint
from vllm_doctor.engine.loader import load_rule_file

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tools" / "audit_wheels.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("audit_wheels", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["audit_wheels"] = module  # dataclasses look the module up while building
    spec.loader.exec_module(module)
    return module


aw = _load_script()

RULE = """\
code: HW999
slug: test-rule
status: stable
severity: error
confidence: high
summary: a test rule
phase: startup
affected:
  ranges:
    - events:
        - introduced: "0.2.0"
        - fixed: "0.3.0"
  fingerprints:
    - path: model_executor/**/thing.py
      pattern: 'def fixed_helper\\('
      means: fixed
when:
  fact: serve.tensor_parallel_size
  gt: 1
references: [https://github.com/vllm-project/vllm/pull/1]
details: |
  ## What happens
  x
  ## Why
  x
  ## How to confirm
  x
  ## Known false positives
  x
"""

BUGGY = "def helper(x):\n    return x[0]\n"
FIXED = "import math\n\ndef fixed_helper(x):\n    return math.prod(x)\n"


def make_wheel(cache: Path, version: str, files: dict[str, str], build: str = "") -> Path:
    name = f"vllm-{version}{'-' + build if build else ''}-cp38-abi3-manylinux_2_28_x86_64.whl"
    path = cache / name
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"vllm-{version}.dist-info/METADATA", f"Name: vllm\nVersion: {version}\n")
        zf.writestr("vllm/__init__.py", "")
        zf.writestr("vllm/_C.abi3.so", b"\x7fELF\x00binary def fixed_helper(")
        for rel, text in files.items():
            zf.writestr(f"vllm/{rel}", text)
    return path


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    d = tmp_path / "rules" / "test"
    d.mkdir(parents=True)
    (d / "HW999.yaml").write_text(RULE, encoding="utf-8")
    return tmp_path / "rules"


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    c = tmp_path / "wheels"
    c.mkdir()
    make_wheel(c, "0.1.0", {})  # file absent: before the bug
    make_wheel(c, "0.2.0", {"model_executor/layers/thing.py": BUGGY})
    make_wheel(c, "0.2.1", {"model_executor/layers/quant/thing.py": BUGGY}, build="1")
    make_wheel(c, "0.3.0", {"model_executor/layers/thing.py": FIXED})
    return c


def run(capsys, *argv: str) -> tuple[int, str]:
    code = aw.main(list(argv))
    return code, capsys.readouterr().out


def test_agreeing_rule_exits_zero_and_reports_each_release(capsys, cache, rules_dir):
    code, out = run(capsys, str(cache), "--rules-dir", str(rules_dir), "--jobs", "1")
    assert code == 0
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines() if line[:1].isdigit()}
    assert rows == {"0.1.0": "absent", "0.2.0": "affected", "0.2.1": "affected", "0.3.0": "fixed"}
    assert "MISMATCH" not in out


def test_fingerprint_contradicting_ranges_is_a_mismatch(capsys, cache, rules_dir):
    # 0.3.1 lost the fix again (a regression): the ranges say fixed, the wheel says affected.
    make_wheel(cache, "0.3.1", {"model_executor/layers/thing.py": BUGGY})
    code, out = run(capsys, str(cache), "--rules-dir", str(rules_dir), "--jobs", "1")
    assert code == 1
    assert "MISMATCH HW999 0.3.1: fingerprint says affected, ranges say fixed" in out
    assert "affected ✗" in out


def test_absent_file_in_affected_range_warns_and_fails_only_when_strict(
    capsys, tmp_path, rules_dir
):
    cache = tmp_path / "w2"
    cache.mkdir()
    make_wheel(cache, "0.2.5", {"model_executor/other.py": BUGGY})
    code, out = run(capsys, str(cache), "--rules-dir", str(rules_dir), "--jobs", "1")
    assert code == 0
    assert "warning HW999 0.2.5" in out
    code, _ = run(capsys, str(cache), "--rules-dir", str(rules_dir), "--jobs", "1", "--strict")
    assert code == 1


def test_pattern_outside_the_fingerprint_path_is_counted(capsys, cache, rules_dir):
    make_wheel(
        cache,
        "0.4.0",
        {
            "model_executor/layers/thing.py": FIXED,
            "utils/copy_of_helper.py": FIXED,
            "docs/notes.md": "see def fixed_helper( in thing.py",
        },
    )
    code, out = run(capsys, str(cache), "--rules-dir", str(rules_dir), "--jobs", "1")
    assert code == 0
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("HW999#0:"))
    assert "0.4.0 (2)" in line  # the .so is not read; the fingerprint file is not counted
    assert "0.3.0" not in line
    assert "vllm/utils/copy_of_helper.py" in out


def test_markdown_report_carries_the_command_and_the_table(capsys, cache, rules_dir, tmp_path):
    md = tmp_path / "audit.md"
    code, _ = run(
        capsys, str(cache), "--rules-dir", str(rules_dir), "--jobs", "1", "--markdown", str(md)
    )
    assert code == 0
    text = md.read_text(encoding="utf-8")
    assert f"python tools/audit_wheels.py {cache}" in text
    assert "| release | HW999 |" in text
    assert "| 0.2.0 | affected |" in text and "| 0.3.0 | fixed |" in text
    assert "mismatches **0**" in text


def test_rules_with_ranges_only_are_listed_as_unchecked(capsys, cache, rules_dir):
    text = (
        RULE.replace("code: HW999", "code: HW998").split("  fingerprints:")[0]
        + RULE.split("      means: fixed\n", 1)[1]
    )
    assert "fingerprints" not in text and "when:" in text
    (rules_dir / "test" / "HW998.yaml").write_text(text, encoding="utf-8")
    code, out = run(capsys, str(cache), "--rules-dir", str(rules_dir), "--jobs", "1")
    assert code == 0
    assert "ranges without a fingerprint (not checked): HW998" in out
    assert "HW998 " not in out.splitlines()[0]  # not a table column


def test_parallel_and_serial_runs_agree(cache, rules_dir):
    rules, _ = aw.load_rules(rules_dir)
    wheels = aw.find_wheels(cache)
    serial = aw.run_audit(wheels, rules, jobs=1)
    parallel = aw.run_audit(wheels, rules, jobs=2)
    assert serial.cells == parallel.cells


def test_first_fingerprint_with_a_file_decides_and_means_affected(tmp_path):
    rules = tmp_path / "rules" / "x"
    rules.mkdir(parents=True)
    text = RULE.replace(
        """  fingerprints:
    - path: model_executor/**/thing.py
      pattern: 'def fixed_helper\\('
      means: fixed""",
        """  fingerprints:
    - path: model_executor/new_place.py
      pattern: 'new_fix'
      means: fixed
    - path: model_executor/**/thing.py
      pattern: 'return x\\[0\\]'
      means: affected""",
    )
    assert "new_place" in text
    (rules / "HW999.yaml").write_text(text, encoding="utf-8")
    cache = tmp_path / "c"
    cache.mkdir()
    make_wheel(cache, "0.2.0", {"model_executor/a/thing.py": BUGGY})
    make_wheel(cache, "0.3.0", {"model_executor/a/thing.py": FIXED})
    make_wheel(
        cache,
        "0.3.1",
        {"model_executor/a/thing.py": BUGGY, "model_executor/new_place.py": "new_fix = True"},
    )
    loaded, problems = aw.load_rules(tmp_path / "rules")
    assert not problems
    audit = aw.run_audit(aw.find_wheels(cache), loaded)
    assert audit.cells[("0.2.0", "HW999")].state == "affected"
    assert audit.cells[("0.3.0", "HW999")].state == "fixed"
    # new_place.py exists, so the first fingerprint decides even though thing.py is buggy
    assert audit.cells[("0.3.1", "HW999")].state == "fixed"
    assert not audit.mismatches


def test_decisions_match_the_engine_on_the_same_files(tmp_path, rules_dir):
    """The script mirrors engine.fixstate: same files, same fingerprint state."""
    rule, problems = load_rule_file(rules_dir / "test" / "HW999.yaml")
    assert rule is not None, problems
    audit_rules, _ = aw.load_rules(rules_dir)
    trees = {
        "buggy": {"model_executor/layers/thing.py": BUGGY},
        "fixed": {"model_executor/deep/er/thing.py": FIXED},
        "top": {"model_executor/thing.py": FIXED},
        "absent": {"model_executor/layers/other.py": FIXED},
    }
    for name, files in trees.items():
        tree = tmp_path / name / "vllm"
        for rel, text in files.items():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            (tree / rel).write_text(text, encoding="utf-8")
        engine = check_fingerprint(rule.fingerprints[0], tree)
        wheel = make_wheel(tmp_path, f"0.9.{len(name)}", files)
        ours = aw.audit_wheel(wheel, "0.9", audit_rules).states["HW999"].state
        assert ours == (engine[0] if engine else "absent"), name


@pytest.mark.parametrize(
    "pattern",
    [
        "model_executor/*.py",
        "model_executor/**/thing.py",
        "**/thing.py",
        "model_*/l?yers/*.py",
        "model_executor/layers/[tx]hing.py",
        "v1/spec_decode/gemma4.py",
    ],
)
def test_glob_translation_matches_pathlib(tmp_path, pattern):
    files = [
        "model_executor/thing.py",
        "model_executor/layers/thing.py",
        "model_executor/layers/quant/thing.py",
        "model_executor/layers/xhing.py",
        "v1/spec_decode/gemma4.py",
        "v1/thing.py",
        "model_executor/a.txt",
    ]
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    expected = {p.relative_to(tmp_path).as_posix() for p in tmp_path.glob(pattern) if p.is_file()}
    regex = aw.glob_regex(pattern)
    assert {f for f in files if regex.match(f)} == expected


def test_range_verdict_follows_the_engine_semantics():
    ranges = (("0", "0.11.0"), ("0.19.1rc1.dev0", "0.19.1"), ("0.27.0", None))
    verdict = lambda v: aw.range_verdict(Version(v), ranges)  # noqa: E731
    assert verdict("0.10.2") == "affected"
    assert verdict("0.11.0") == "fixed"
    assert verdict("0.19.1rc1.dev5") == "affected"
    assert verdict("0.19.1") == "fixed"
    assert verdict("0.33.0") == "affected"


def test_wheel_versions_come_from_the_file_name(cache):
    wheels = aw.find_wheels(cache)
    assert [str(v) for v in wheels] == ["0.1.0", "0.2.0", "0.2.1", "0.3.0"]
    assert wheels[Version("0.2.1")].name.startswith("vllm-0.2.1-1-")


def test_bad_inputs_exit_two(capsys, tmp_path, cache, rules_dir):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert aw.main([str(empty), "--rules-dir", str(rules_dir)]) == 2
    assert aw.main([str(tmp_path / "nope"), "--rules-dir", str(rules_dir)]) == 2
    assert aw.main([str(cache), "--rules-dir", str(tmp_path / "no-rules")]) == 2
    assert aw.main([str(cache), "--rules-dir", str(rules_dir), "--versions", "0.5.0"]) == 2
    assert "no wheel for 0.5.0" in capsys.readouterr().err


def test_versions_and_select_filter(capsys, cache, rules_dir):
    code, out = run(
        capsys,
        str(cache),
        "--rules-dir",
        str(rules_dir),
        "--versions",
        "0.2.0,0.3.0",
        "--jobs",
        "1",
    )
    assert code == 0
    assert [ln.split()[0] for ln in out.splitlines() if ln[:1].isdigit()] == ["0.2.0", "0.3.0"]
    code, out = run(
        capsys, str(cache), "--rules-dir", str(rules_dir), "--select", "SPEC", "--jobs", "1"
    )
    assert code == 0 and "HW999" not in out


def test_download_fetches_only_missing_wheels_with_pip(monkeypatch, capsys, cache, rules_dir):
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        if "download" in cmd:
            version = next(a for a in cmd if a.startswith("vllm==")).split("==")[1]
            make_wheel(
                Path(cmd[cmd.index("-d") + 1]), version, {"model_executor/layers/thing.py": FIXED}
            )
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(aw.subprocess, "run", fake_run)
    code, _ = run(
        capsys,
        str(cache),
        "--rules-dir",
        str(rules_dir),
        "--jobs",
        "1",
        "--download",
        "--versions",
        "0.2.0,0.3.5",
    )
    assert code == 0
    assert len(calls) == 1
    cmd = calls[0]
    assert cmd[1:4] == ["-m", "pip", "download"] and "vllm==0.3.5" in cmd and "--no-deps" in cmd
    assert (cache / "vllm-0.3.5-cp38-abi3-manylinux_2_28_x86_64.whl").exists()


def test_download_lists_releases_from_the_index(monkeypatch, capsys, tmp_path, rules_dir):
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        if "index" in cmd:
            return subprocess.CompletedProcess(
                cmd, 0, "vllm (0.3.0)\nAvailable versions: 0.3.0, 0.3.0rc1, 0.2.0, 0.1.0\n", ""
            )
        version = next(a for a in cmd if a.startswith("vllm==")).split("==")[1]
        make_wheel(Path(cmd[cmd.index("-d") + 1]), version, {})
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(aw.subprocess, "run", fake_run)
    cache = tmp_path / "fresh"
    code, _ = run(
        capsys,
        str(cache),
        "--rules-dir",
        str(rules_dir),
        "--jobs",
        "1",
        "--download",
        "--min-version",
        "0.2.0",
    )
    fetched = [next(a for a in c if a.startswith("vllm==")) for c in calls if "download" in c]
    assert fetched == ["vllm==0.2.0", "vllm==0.3.0"]  # no pre-release, nothing below 0.2.0
    assert code == 0


def test_no_download_without_the_flag(monkeypatch, capsys, cache, rules_dir):
    monkeypatch.setattr(aw.subprocess, "run", lambda *a, **k: pytest.fail("network use"))
    assert aw.main([str(cache), "--rules-dir", str(rules_dir), "--jobs", "1"]) == 0


def test_rule_file_problems_are_reported_not_fatal(capsys, cache, rules_dir):
    (rules_dir / "test" / "BAD001.yaml").write_text("code: BAD001\nx: [unclosed\n")
    code = aw.main([str(cache), "--rules-dir", str(rules_dir), "--jobs", "1"])
    assert code == 0
    err = capsys.readouterr().err
    assert "BAD001.yaml: cannot read" in err
