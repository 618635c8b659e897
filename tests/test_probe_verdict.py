"""The joined verdict (probes.verdict): a probe's mechanism joined with the judged vLLM's fix
state, the same words in `probe` text, JSON and `check --probe`, and `probe` without torch."""

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from doctor_forks import doctor_run

from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.probes import ProbeResult
from vllm_doctor.probes.verdict import exit_level, join, join_results, rules_for

ROOT = Path(__file__).resolve().parent.parent
DIFFUSION_GEMMA = (
    ROOT / "tests" / "fixtures" / "models" / "diffusiongemma-26B-A4B-IT-NVFP4" / "config.json"
)
RULES = rules_for({"MODEL001", "SPEC001", "HW001", "QUANT002"})


def judged(version=None, installed=False, tree=None):
    facts = Facts()
    if version:
        facts.set("vllm.version", version, Source.USER if tree is None else Source.MACHINE, "test")
    else:
        facts.set("vllm.installed", installed, Source.MACHINE, "test")
        facts.mark_missing("vllm", "vLLM is not installed (test)")
    if tree is not None:
        facts.set("vllm.location", str(tree), Source.MACHINE)
    return facts


def softembed(status="pass", confirmed=("MODEL001",), reason="both fixes match"):
    return ProbeResult("tp-softembed", status, reason, rules_confirmed=list(confirmed))


def test_mechanism_and_release_join_into_one_verdict_per_rule():
    rule = RULES["MODEL001"]
    lacks = join(softembed(), rule, judged("0.24.0"), "cuda")
    assert (lacks.level, lacks.mechanism, lacks.fix_state) == ("error", "present", "affected")
    assert (
        "vLLM 0.24.0 (--vllm-version) lacks the fix (PR #46177): this failure will happen"
        in lacks.text
    )
    assert "verified here: slicing the probabilities" in lacks.workaround
    assert "Upgrade vLLM to 0.25.0 or later" in lacks.workaround
    carries = join(softembed(), rule, judged("0.25.0"), "cuda")
    assert carries.level == "pass" and carries.text.endswith(
        "carries the fix (PR #46177): protected"
    )
    none = join(softembed(), rule, judged(), "cuda")
    assert none.level == "info"
    assert "no vLLM installed: releases 0.24.0 to before 0.25.0 fail on this machine" in none.text
    # the mechanism of MODEL001 is torch's: the CPU run says so, not "on this hardware"
    assert "a property of torch" in join(softembed(), rule, judged("0.24.0"), "cpu").text


def test_older_releases_and_dev_builds_are_said_as_such():
    from vllm_doctor.facts.packages import set_vllm_version_facts

    def what_if(version):
        facts = Facts()
        set_vllm_version_facts(facts, version, Source.USER, "--vllm-version")
        return facts

    older = join(softembed(), RULES["MODEL001"], what_if("0.22.0"), "cuda")
    assert (
        older.level == "pass"
        and "vLLM 0.22.0 (--vllm-version) predates the failure (it came in 0.24.0)" in older.text
    )
    cudagraph = ProbeResult("cudagraph-replay", "pass", "", rules_confirmed=["SPEC001"])
    dev = join(cudagraph, RULES["SPEC001"], what_if("0.22.1.dev4"), "cuda")
    assert dev.level == "warning" and "is a dev build that may lack the fix (PR #43909)" in dev.text
    assert join(cudagraph, RULES["SPEC001"], what_if("0.22.0"), "cuda").text.startswith(
        "mechanism present on this hardware; vLLM 0.22.0 (--vllm-version) lacks the fix (PR #43909)"
    )


def test_an_error_needs_both_the_mechanism_and_the_release():
    """Drop either fact and the verdict is no error: a release without the mechanism shown, or
    the mechanism without a judged release."""
    rule = RULES["MODEL001"]
    not_shown = join(
        softembed(status="warn", confirmed=(), reason="did not fail here"),
        rule,
        judged("0.24.0"),
        "cuda",
    )
    assert not_shown.level == "warning" and not_shown.mechanism == "not-shown"
    assert join(softembed(), rule, None, "cuda").level == "info"
    skipped = join(
        softembed(status="skip", confirmed=(), reason="needs 2 GPUs"),
        rule,
        judged("0.24.0"),
        "cuda",
    )
    assert skipped.level == "skip" and skipped.text.startswith("could not run: needs 2 GPUs")
    crashed = join(
        softembed(status="error", confirmed=(), reason="worker died"),
        rule,
        judged("0.33.0"),
        "cuda",
    )
    assert crashed.level == "error" and crashed.text.startswith("could not run: worker died")
    # a fix whose approach fails here is an error whatever the release
    broken = join(
        softembed(status="fail", reason="fix B off the reference"), rule, judged("0.33.0"), "cuda"
    )
    assert broken.level == "error" and "did not check out here: fix B off" in broken.text


def test_absent_mechanism_and_unversioned_rules():
    p2p_ok = ProbeResult("p2p-nccl", "pass", "all pairs", rules_refuted=["HW001"])
    absent = join(p2p_ok, RULES["HW001"], judged("0.33.0"), "cuda")
    assert absent.level == "pass"
    assert absent.text == "mechanism absent on this hardware: not affected whatever the release"
    # below compute capability 8.9 the fp8 probe shows the Marlin fallback: no release changes it
    marlin = ProbeResult(
        "fp8-scaled-mm-3d", "skip", "needs compute capability ≥ 8.9", rules_confirmed=["QUANT002"]
    )
    verdict = join(marlin, RULES["QUANT002"], judged("0.33.0"), "cuda")
    assert verdict.level == "info" and "no vLLM release changes it" in verdict.text


def test_the_installed_source_decides_through_the_fingerprint(tmp_path):
    """A 0.24.0 with PR 46177 back-ported carries the fix: the source says so, not the version."""
    models = tmp_path / "vllm" / "model_executor" / "models"
    models.mkdir(parents=True)
    (models / "diffusion_gemma.py").write_text("sc_vocab_start = rank * shard\n")
    verdict = join(softembed(), RULES["MODEL001"], judged("0.24.0", tree=tmp_path / "vllm"), "cuda")
    assert verdict.level == "pass" and verdict.fix_state == "fixed"
    assert "your vLLM 0.24.0 carries the fix (PR #46177): protected" in verdict.text
    assert verdict.release.startswith("vllm/model_executor/models/diffusion_gemma.py:1 has")


def test_exit_level_follows_the_joined_verdicts():
    results = [softembed(), ProbeResult("teardown", "pass")]
    join_results(results, judged("0.33.0"), "cpu", RULES)
    assert exit_level(results) == "pass"
    join_results(results, judged("0.24.0"), "cpu", RULES)
    assert exit_level(results) == "error"
    assert exit_level([ProbeResult("teardown", "error", "hang")]) == "error"


def cli(*args, env=None, python=sys.executable, cwd=None):
    """The command line as `python -m vllm_doctor` runs it: forked from a server that has
    imported the doctor where ``python`` is this interpreter (doctor_forks: a process of its
    own, its ranks spawned fresh as ever), a fresh ``python`` otherwise."""
    full = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    full.update(PYTHONPATH=str(ROOT), **(env or {}))
    if python == sys.executable:
        return doctor_run(*args, env=full, cwd=cwd, timeout=300)
    return subprocess.run(
        [python, "-m", "vllm_doctor", *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def test_cpu_suite_judged_against_a_fixed_and_an_affected_release():
    fixed_text = cli("probe", "--device", "cpu", "--vllm-version", "0.33.0")
    fixed_json = cli("probe", "--device", "cpu", "--vllm-version", "0.33.0", "--format", "json")
    for proc in (fixed_text, fixed_json):
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "reproduced on this stack" not in proc.stdout + proc.stderr
    doc = json.loads(fixed_json.stdout)
    levels = {v["rule"]: v["level"] for r in doc["results"] for v in r["verdicts"]}
    assert levels["MODEL001"] == "pass" and "error" not in levels.values()
    assert doc["cpu_variant"]["not_run"] == [
        "p2p-nccl",
        "cudagraph-replay",
        "fp8-scaled-mm-3d",
        "kernels",
    ]
    assert (
        "[✗]" not in fixed_text.stdout and "Summary: 4 pass, 8 could not run" in fixed_text.stdout
    )
    assert "CPU variant (--device cpu)" in fixed_text.stdout

    old = cli(
        "probe", "tp-softembed", "--device", "cpu", "--vllm-version", "0.24.0", "--format", "json"
    )
    assert old.returncode == 1, old.stderr
    (result,) = [r for r in json.loads(old.stdout)["results"] if r["name"] == "tp-softembed"]
    (verdict,) = result["verdicts"]
    assert verdict["rule"] == "MODEL001" and verdict["level"] == "error"
    assert "vLLM 0.24.0 (--vllm-version) lacks the fix (PR #46177)" in verdict["text"]
    assert "Serve DiffusionGemma on one GPU (tensor-parallel 1)" in verdict["workaround"]


def test_a_collect_env_report_supplies_the_judged_vllm():
    reports = ROOT / "tests" / "fixtures" / "reports"
    nightly = cli(
        "probe",
        "tp-softembed",
        "--device",
        "cpu",
        "--format",
        "json",
        "--report",
        str(reports / "h100x8_nvlink_nightly.txt"),
    )
    doc = json.loads(nightly.stdout)
    (verdict,) = [v for r in doc["results"] for v in r["verdicts"]]
    assert nightly.returncode == 0 and verdict["level"] == "pass"
    assert (
        "the reported vLLM 0.29.1rc1.dev350+gd5f0a6e82 carries the fix (PR #46177)"
        in verdict["text"]
    )
    # a dev build between the releases around the failure: its commit decides, so a warning
    before = cli(
        "probe",
        "tp-softembed",
        "--device",
        "cpu",
        "--format",
        "json",
        "--report",
        str(reports / "rtx5060ti_x2_pcie.txt"),
    )
    (verdict,) = [v for r in json.loads(before.stdout)["results"] for v in r["verdicts"]]
    assert before.returncode == 0 and verdict["level"] == "warning"
    assert "0.23.1rc1.dev20+g0d8097964 is a dev build that may lack the fix" in verdict["text"]


def test_check_probe_says_what_probe_says():
    serve = ["--", "vllm", "serve", "m", "-tp", "2"]
    check = cli(
        "check",
        "--probe",
        "--vllm-version",
        "0.24.0",
        "--model-config",
        str(DIFFUSION_GEMMA),
        "--format",
        "json",
        "--select",
        "MODEL001",
        *serve,
    )
    assert check.returncode == 1, check.stderr
    doc = json.loads(check.stdout)
    (finding,) = doc["findings"]
    (from_check,) = [
        v for p in finding["probe_results"] for v in p["verdicts"] if v["rule"] == "MODEL001"
    ]
    probe = cli("probe", "tp-softembed", "--vllm-version", "0.24.0", "--format", "json", *serve)
    (from_probe,) = [v for r in json.loads(probe.stdout)["results"] for v in r["verdicts"]]
    assert (
        from_check["text"] == from_probe["text"]
        and from_check["level"] == from_probe["level"] == "error"
    )
    text = cli(
        "check",
        "--probe",
        "--vllm-version",
        "0.24.0",
        "--model-config",
        str(DIFFUSION_GEMMA),
        "--select",
        "MODEL001",
        *serve,
    )
    assert f"probe tp-softembed: {from_probe['text']}" in text.stdout
    assert "the probes ran their CPU (gloo) variant" in text.stdout


@pytest.fixture(scope="module")
def python_without_torch(tmp_path_factory):
    """A virtual environment with every package of this one except torch."""
    dest = tmp_path_factory.mktemp("no-torch") / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(dest)
    site = next(dest.glob("lib/python*/site-packages"))
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith(("torch", "functorch")):
            (site / entry.name).symlink_to(entry)
    return str(dest / "bin" / "python")


def test_probe_without_torch_is_one_line_and_exit_2(python_without_torch, tmp_path):
    for args in (["probe"], ["probe", "tp-softembed", "--device", "cpu", "--format", "json"]):
        proc = cli(*args, python=python_without_torch, cwd=tmp_path)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert "torch is not installed" in proc.stderr
        assert 'pip install "vllm-preflight[probe]"' in proc.stderr
    listing = cli("probe", "--list", python=python_without_torch, cwd=tmp_path)
    assert listing.returncode == 0 and "tp-softembed" in listing.stdout


def test_a_cpu_torch_where_the_probes_would_run_on_a_gpu_is_bad_input():
    """Read from the installed files (never by importing torch): one line naming the extra."""
    from vllm_doctor.commands.probe import require_torch
    from vllm_doctor.errors import InputError
    from vllm_doctor.facts.packages import collect_packages

    facts = Facts()
    collect_packages(facts)
    if facts.get("torch.cuda_version") is not None:
        pytest.skip("this torch is a CUDA build")
    require_torch(Facts(), "cpu")  # the CPU variant runs on it
    with pytest.raises(InputError) as err:
        require_torch(Facts(), "cuda")
    line = str(err.value)
    assert "\n" not in line and "torch is a CPU build (no CUDA)" in line
    assert 'pip install "vllm-preflight[probe]"' in line and "--device cpu" in line
