"""The stack facts on real input, both ways: a working setup is never refused, a broken one
never passes (issue 29). Each report is kept in tests/fixtures/reports with its source
(SOURCES.md there)."""

from __future__ import annotations

from pathlib import Path

from doctor_forks import doctor_run

from vllm_doctor.engine.evaluate import (
    APPLIES,
    NOT_APPLIES,
    UNDECIDED,
    Finding,
    defer,
    evaluate_rules,
)
from vllm_doctor.engine.loader import load_rules
from vllm_doctor.engine.over_releases import judge_over_releases
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.facts.model import Facts
from vllm_doctor.report.document import CheckDocument

HERE = Path(__file__).parent
REPORTS = HERE / "fixtures" / "reports"


def judge(**options) -> tuple[Facts, dict[str, Finding]]:
    """check's judgement, in process: the facts, then every rule over them and over the
    releases an unknown version could be."""
    options.setdefault("probe_machine", False)
    options.setdefault("offline", True)
    facts = collect_facts(CollectOptions(**options))
    findings = defer(judge_over_releases(evaluate_rules(load_rules(), facts), facts))
    return facts, {f.rule.code: f for f in findings}


def fails_strict(facts: Facts, findings: dict[str, Finding]) -> list[str]:
    doc = CheckDocument(facts, list(findings.values()), "error", len(findings), 0.0, strict=True)
    return sorted(f.rule.code for f in doc.failing())


# -- 1. an unknown vLLM version is not a version inside the covered range ---------------------


def test_torch_collect_env_without_vllm_is_not_an_env101_error():
    # torch's own collect_env: torch 2.5.1 (what vLLM 0.6.4-0.7.x pin), no vLLM section
    facts, findings = judge(report=REPORTS / "torch-collect-env-2.5.1-v100s.txt")
    assert "vllm.version" not in facts and facts.value("torch.version") == "2.5.1+cu118"
    env101 = findings["ENV101"]
    assert env101.verdict == UNDECIDED
    reason = env101.missing[0].reason
    assert env101.missing[0].path == "vllm.version"
    assert "among the covered releases it applies in 0.8.0–0.33.0" in reason
    assert "older than the releases the knowledge covers, or not installed" in reason
    assert "torch 2.5.1+cu118 is older than every covered release's pin (0.8.0 pins 2.6.0)" in (
        reason
    )
    # ENV100 (transformers bounds) is judged the same way
    assert findings["ENV100"].verdict != APPLIES


def test_the_same_torch_beside_a_covered_release_is_still_an_error(tmp_path):
    # the report states the release: vLLM 0.10.0 pins torch 2.7.1, 2.5.1 cannot load its ops
    report = tmp_path / "report.txt"
    text = (REPORTS / "torch-collect-env-2.5.1-v100s.txt").read_text()
    report.write_text(text + "vLLM Version: 0.10.0\n")
    facts, findings = judge(report=report)
    assert facts.value("vllm.version") == "0.10.0"
    assert findings["ENV101"].verdict == APPLIES


# -- 2. a build the release's wheel metadata does not describe ----------------------------------

# NVIDIA's vLLM container for DGX Spark (GB10): nvcr.io/nvidia/vllm:25.09-py3 ships
# vLLM 0.10.1.1+381074ae.nv25.09 built against its own torch 2.9.0a0+50eac811a6.nv25.09
# (both strings as public notes of that image record them; see SOURCES.md), and it serves.
NGC_SPARK = {
    "vllm.version": "0.10.1.1+381074ae.nv25.09",
    "vllm.installed": True,
    "torch.version": "2.9.0a0+50eac811a6.nv25.09",
    "torch.cuda_version": "13.0",
    "driver.version": "580.95.05",
    "gpu.count": 1,
    "gpu.names": ["NVIDIA GB10"],
}


def test_nvidia_container_torch_is_not_judged_by_the_pypi_pin():
    from vllm_doctor.facts.model import Source

    facts, findings = judge(given=Facts.from_flat(NGC_SPARK, Source.REPORT))
    assert facts.value("release.judged") == "0.10.1.1"
    assert facts.value("release.torch_pin") == "2.7.1"  # what PyPI's 0.10.1.1 wheel pins
    assert "release.torch_matches_pin" not in facts
    why = facts.why_missing("release.torch_matches_pin")
    assert "local label +381074ae.nv25.09, which vLLM" in why and "vendor or source build" in why
    assert findings["ENV101"].verdict == UNDECIDED


def test_a_source_build_and_a_release_wheel_are_told_apart():
    from vllm_doctor.facts.model import Source

    # eugr/spark-vllm-docker issue 321: a 2 x DGX Spark Ray deployment of a source build
    # (.dYYYYMMDD: a modified checkout) that served until it ran out of unified memory
    source = dict(NGC_SPARK, **{"vllm.version": "0.23.1rc1.dev1053+gf2317c227.d20260712"})
    facts, findings = judge(given=Facts.from_flat(source, Source.REPORT))
    assert "is a source build (.d20260712" in facts.why_missing("release.torch_matches_pin")
    assert findings["ENV101"].verdict == UNDECIDED
    # vLLM's own wheels state their pin: PyPI's 0.10.1.1, and its +cu128 variant
    for version in ("0.10.1.1", "0.10.1.1+cu128"):
        wheel = dict(NGC_SPARK, **{"vllm.version": version})
        facts, findings = judge(given=Facts.from_flat(wheel, Source.REPORT))
        assert facts.value("release.torch_matches_pin") is False
        assert findings["ENV101"].verdict == APPLIES
    # a build that has the pinned torch is fine whatever built it
    pinned = dict(NGC_SPARK, **{"torch.version": "2.7.1"})
    facts, findings = judge(given=Facts.from_flat(pinned, Source.REPORT))
    assert facts.value("release.torch_matches_pin") is True
    assert findings["ENV101"].verdict == NOT_APPLIES


# -- 4. --gpu on a host that has that GPU --------------------------------------------------------

H200_HOST = HERE / "fixtures" / "hosts" / "h200x4-facts.json"


def _h200_host() -> Facts:
    """What the collectors of this machine recorded there (its GPUs, links, driver, stack);
    the rest of that run (no serve line, no model) is not this machine's."""
    import json

    from vllm_doctor.facts.collect import MACHINE_AREAS

    recorded = Facts.from_dict(json.loads(H200_HOST.read_text()))
    mine = (*MACHINE_AREAS, "env")
    host = Facts()
    host.values = {p: f for p, f in recorded.values.items() if p.split(".")[0] in mine}
    host.missing = {p: r for p, r in recorded.missing.items() if p.split(".")[0] in mine}
    return host


def test_gpu_named_on_the_host_that_has_it_keeps_its_count_and_links():
    from vllm_doctor.facts.hardware import TargetHardware

    facts, findings = judge(
        given=_h200_host(),
        target=TargetHardware(gpu="NVIDIA H200"),
        serve_string="vllm serve Qwen/Qwen3-8B -tp 4",
        vllm_version="0.24.0",
    )
    assert facts.value("gpu.count") == 4
    assert facts.value("topology.all_nvlink") is True
    assert facts.value("gpu.memory_total_mib") == 143771  # measured, not the table's
    assert any("--gpu NVIDIA H200 names the GPUs of this machine" in n for n in facts.notes)
    assert findings["HW005"].verdict == NOT_APPLIES
    # the same line at -tp 8 is refused on this host, as vLLM 0.24.0 would
    _, over = judge(
        given=_h200_host(),
        target=TargetHardware(gpu="NVIDIA H200"),
        serve_string="vllm serve Qwen/Qwen3-8B -tp 8",
        vllm_version="0.24.0",
    )
    assert over["HW005"].verdict == APPLIES


def test_another_gpu_named_replaces_the_host_and_leaves_the_count_unknown():
    from vllm_doctor.facts.hardware import TargetHardware

    facts, findings = judge(
        given=_h200_host(),
        target=TargetHardware(gpu="RTX 3090"),
        serve_string="vllm serve Qwen/Qwen3-8B -tp 4",
        vllm_version="0.24.0",
    )
    assert facts.value("gpu.names") == ["RTX 3090"]
    assert "gpu.count" not in facts and "topology.links" not in facts
    assert "without --gpus" in facts.why_missing("gpu.count")
    assert "4 × NVIDIA H200 are set aside" in facts.why_missing("gpu.count")
    # an unknown count never decides an error
    assert findings["HW005"].verdict == UNDECIDED
    # --gpus gives it
    facts, findings = judge(
        given=_h200_host(),
        target=TargetHardware(gpu="RTX 3090", count=2),
        serve_string="vllm serve Qwen/Qwen3-8B -tp 4",
        vllm_version="0.24.0",
    )
    assert facts.value("gpu.count") == 2
    assert findings["HW005"].verdict == APPLIES


def test_a_count_alone_with_no_gpu_known_decides_what_the_count_decides():
    # another's setup (check --elsewhere, a host without GPUs): `--gpus 2` says how many, not
    # which; tensor x pipeline parallel against the count is decided, the model stays open
    from vllm_doctor.facts.hardware import TargetHardware

    facts, findings = judge(
        target=TargetHardware(count=2),
        serve_string="vllm serve Qwen/Qwen3-8B -tp 4",
        vllm_version="0.24.0",
    )
    assert facts.value("gpu.count") == 2
    assert "gpu.names" not in facts and "gpu.capabilities" not in facts
    assert "gave how many GPUs, not which" in facts.why_missing("gpu.capabilities")
    assert findings["HW005"].verdict == APPLIES
    facts, findings = judge(
        target=TargetHardware(count=4),
        serve_string="vllm serve Qwen/Qwen3-8B -tp 4",
        vllm_version="0.24.0",
    )
    assert findings["HW005"].verdict != APPLIES


# -- 5. the report's `Is CUDA available` line ---------------------------------------------------


def test_cuda_unavailable_with_a_driver_older_than_torch_cuda_is_an_error():
    # pytorch issue 43058: torch built with CUDA 10.2, nvidia-smi says the driver's CUDA is 10.1
    facts, findings = judge(report=REPORTS / "torch-1.6-cuda10.2-driver-418-unavailable.txt")
    assert facts.value("torch.cuda_available") is False
    assert facts.value("driver.cuda_version") == "10.1"
    assert facts.value("derived.driver_supports_torch_cuda") is False
    assert findings["ENV010"].verdict == APPLIES
    assert findings["ENV010"].severity == "error"
    assert "ENV010" in fails_strict(facts, findings)
    # pytorch issue 30071: the driver's CUDA (10.0) comes from NVIDIA's table for 410.48
    facts, findings = judge(report=REPORTS / "torch-1.3.1-cuda10.1-driver-410-unavailable.txt")
    assert (
        facts.get("driver.cuda_version").inferred and facts.value("driver.cuda_version") == "10.0"
    )
    assert findings["ENV010"].verdict == APPLIES


def test_cuda_available_or_a_driver_that_supports_it_is_not_env010(tmp_path):
    facts, findings = judge(report=REPORTS / "torch-collect-env-2.5.1-v100s.txt")
    assert facts.value("torch.cuda_available") is True
    assert findings["ENV010"].verdict == NOT_APPLIES
    # CUDA unavailable, but the driver supports torch's CUDA: another cause, not this rule
    text = (REPORTS / "torch-1.6-cuda10.2-driver-418-unavailable.txt").read_text()
    report = tmp_path / "r.txt"
    report.write_text(text.replace("CUDA Version: 10.1", "CUDA Version: 10.2"))
    facts, findings = judge(report=report)
    assert facts.value("derived.driver_supports_torch_cuda") is True
    assert findings["ENV010"].verdict == NOT_APPLIES


# -- 8. --strict: "cannot be known from this input" is not "not supplied" ------------------------


def test_strict_passes_a_healthy_report_with_flashinfer_and_fails_the_broken_one():
    from vllm_doctor.commands.check import load_examples

    example = load_examples()["healthy-h100-llama"]
    facts, findings = judge(
        report=example.report, model_config=example.model_config, serve_string=example.serve
    )
    assert facts.value("packages.flashinfer-python") == "0.7.2.post1"  # the version 0.33.0 installs
    # a companion the report's collect-env never lists cannot be known from it
    assert facts.is_unknowable("packages.flashinfer-cubin")
    assert facts.is_unknowable("packages.deep-gemm")
    assert facts.is_unknowable("env.HF_TOKEN")  # a secret collect-env never prints
    assert not facts.is_unknowable("env.VLLM_PORT")  # printed when set: absent here
    assert fails_strict(facts, findings) == []
    broken, broken_findings = judge(
        report=REPORTS / "torch-1.6-cuda10.2-driver-418-unavailable.txt",
        model_config=example.model_config,
        serve_string=example.serve,
    )
    assert "ENV010" in fails_strict(broken, broken_findings)


def test_a_rules_dir_rule_reads_an_unlisted_package_as_cannot_decide(tmp_path):
    # the report's own listing decides, whoever wrote the rule (before: only packages the
    # shipped rules named were "cannot decide", any other read as not installed)
    from vllm_doctor.commands.check import load_examples
    from vllm_doctor.engine.evaluate import evaluate_rule
    from vllm_doctor.engine.loader import load_rule_file

    rules = tmp_path / "env"
    rules.mkdir()
    (rules / "ENV960.yaml").write_text(
        "code: ENV960\nslug: companion\nstatus: stable\nseverity: error\nconfidence: high\n"
        "summary: a companion package\nphase: startup\n"
        "when:\n  fact: packages.my-companion-kernels\n  exists: false\n"
        "references: [https://github.com/vllm-project/vllm/issues/1]\n"
        "details: |\n  ## What happens\n  x\n  ## Why\n  x\n  ## How to confirm\n  x\n"
        "  ## Known false positives\n  x\n"
    )
    rule, problems = load_rule_file(rules / "ENV960.yaml")
    assert rule is not None, problems
    example = load_examples()["healthy-h100-llama"]
    facts, _ = judge(report=example.report)
    finding = evaluate_rule(rule, facts)
    assert finding.verdict == UNDECIDED
    assert finding.missing[0].unknowable and "would not be listed" in finding.missing[0].reason


# -- 6. a manifest and a report of two stacks are never mixed ----------------------------------

MANIFESTS = HERE / "fixtures" / "manifests" / "corpus"


def _check_json(*args: str) -> dict:
    import json
    import os

    environ = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "HF_"))}
    result = doctor_run("check", "--offline", "--format", "json", *args, env=environ, timeout=120)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)["targets"][0]


def test_an_image_of_another_vllm_sets_the_reports_stack_aside():
    # the LeaderWorkerSet runs vllm/vllm-openai:v0.8.5; the report is of a 0.29.1 nightly
    doc = _check_json(
        "--manifest",
        str(MANIFESTS / "lws-gpu-vllm.yaml"),
        "--report",
        str(REPORTS / "h100x8_nvlink_nightly.txt"),
    )
    facts, missing = doc["facts"]["facts"], doc["facts"]["missing"]
    assert facts["vllm.version"]["value"] == "0.8.5"
    # one stack: the torch is the image's (0.8.5 pins 2.6.0), not the report's 2.13.0
    assert facts["torch.version"]["value"] == "2.6.0" and facts["torch.version"]["inferred"]
    assert "packages.flashinfer-python" not in facts
    conflict = next(n for n in doc["facts"]["notes"] if "two stacks" in n)
    assert "is of vLLM 0.29.1rc1.dev350+gd5f0a6e82 with torch 2.13.0+cu130" in conflict
    assert "vllm/vllm-openai:v0.8.5 runs vLLM 0.8.5" in conflict
    assert missing["packages"] == conflict
    # no finding rests on the report's torch against the image's pin
    assert all(f["code"] != "ENV101" for f in doc["findings"])


def test_a_gpu_pool_of_another_model_sets_the_reports_machine_aside():
    doc = _check_json(
        "--manifest",
        str(MANIFESTS / "aibrix-heterogeneous-l20.yaml"),
        "--report",
        str(REPORTS / "h100x8_nvlink_nightly.txt"),
    )
    facts, missing = doc["facts"]["facts"], doc["facts"]["missing"]
    assert facts["gpu.names"]["value"] == ["NVIDIA L20"]
    assert "driver.version" not in facts and "topology.worst_link" not in facts
    assert "8 × NVIDIA H100 80GB HBM3" in missing["driver"]
    assert "asks for 1 × NVIDIA L20: another machine" in missing["driver"]


# -- 7. one list of collected environment variables --------------------------------------------


def test_the_live_collector_and_the_report_parser_read_one_list():
    from vllm_doctor.facts import environment
    from vllm_doctor.facts.report import parse_report

    environ = {
        "TRANSFORMERS_OFFLINE": "1",
        "HUGGING_FACE_HUB_TOKEN": "hf_abcdefghijklmnopqrstuvwx",
        "FLASHINFER_DISABLE_VERSION_CHECK": "1",
        "VLLM_PORT": "8000",
        "EDITOR": "vi",
    }
    live = Facts()
    environment.collect_environment(live, environ)
    assert live.value("env.TRANSFORMERS_OFFLINE") == "1"  # ENV204 reads it
    assert live.value("env.HUGGING_FACE_HUB_TOKEN") == environment.REDACTED  # ENV203
    assert live.value("env.FLASHINFER_DISABLE_VERSION_CHECK") == "1"
    assert "env.EDITOR" not in live
    # a variable outside the list cannot be known from the live environment
    assert live.is_unknowable("env.EDITOR") and not live.is_unknowable("env.VLLM_HOST_IP")
    # the report parser reads the same names where they are not in the report's own section
    text = (REPORTS / "torch-collect-env-2.5.1-v100s.txt").read_text()
    loose = "\n".join(f"{k}={v}" for k, v in environ.items())
    report = parse_report(text + "\n" + loose + "\n", "r.txt")
    for name in environ:
        assert (f"env.{name}" in report) == environment.is_collected(name), name


def test_a_paste_that_lost_a_gpu_line_leaves_the_count_unknown(tmp_path):
    # nvidia-smi -L and the topology matrix see the same GPUs: 7 listed beside 8 in the
    # matrix is a cut paste, not a 7-GPU machine (found by the missing-facts audit)
    lines = (REPORTS / "h100x8_nvlink_nightly.txt").read_text().splitlines()
    cut = [line for line in lines if "GPU 5: NVIDIA H100" not in line]
    assert len(cut) == len(lines) - 1
    report = tmp_path / "cut.txt"
    report.write_text("\n".join(cut) + "\n")
    facts, findings = judge(report=report, serve_string="vllm serve m -tp 8")
    assert "gpu.count" not in facts
    assert "lists 7 GPUs but its GPU Topology matrix has 8" in facts.why_missing("gpu.count")
    assert findings["HW005"].verdict == UNDECIDED
