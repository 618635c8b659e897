"""`check --platform`: the platform a report names in prose (WSL2, a container, a kernel),
stated on the command line in place of this machine's, and how the reports corpus measure
passes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from scripts import load_script
from typer.testing import CliRunner

from vllm_doctor.cli import app, main
from vllm_doctor.facts.model import Source

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "bench" / "reports2026"
# a train report of the corpus (its source: https://github.com/mohitsoni48/TurboLLM/pull/256):
# vLLM 0.29.0 on an RTX 5070 Ti under WSL2 Ubuntu 24.04 dies with "UVA is not available"
TURBOLLM = CORPUS / "reports" / "mohitsoni48-turbollm-256"


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def turbollm_check(*platform: str) -> dict:
    """`check` as the measure runs it on the TurboLLM report, with the given --platform words."""
    shown = yaml.safe_load((TURBOLLM / "report.yaml").read_text(encoding="utf-8"))["check"]
    words = [w for p in platform for w in ("--platform", p)]
    done = invoke(
        "check",
        "--format",
        "json",
        "--offline",
        "--no-config",
        "--fail-on",
        "never",
        "--gpu",
        shown["gpu"],
        "--gpus",
        str(shown["gpus"]),
        "--vllm-version",
        shown["vllm_version"],
        "--torch-version",
        shown["torch_version"],
        "--select",
        "ENV110",
        *words,
    )
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def env110(doc: dict) -> tuple[str, dict]:
    for key in ("findings", "undecided", "not_applicable"):
        for finding in doc.get(key) or []:
            code = finding if isinstance(finding, str) else finding.get("code")
            if code == "ENV110":
                return key, finding if isinstance(finding, dict) else {}
    raise AssertionError("ENV110 was not judged")


def test_wsl2_stated_lets_env110_warn_on_the_turbollm_report():
    where, finding = env110(turbollm_check("wsl2"))
    assert where == "findings"
    assert finding["verdict"] == "applies"
    # 0.29.0 picks Model Runner V2 by itself for this model unless the line opts out: a warning
    assert finding["severity"] == "warning"
    wsl = next(e for e in finding["evidence"] if e["fact"] == "platform.wsl")
    assert wsl["value"] is True
    assert wsl["source"] == f"{Source.USER} (--platform wsl2)"


@pytest.mark.parametrize("words", [("linux",), ("kernel=6.8.0-1040-nvidia",)])
def test_a_native_kernel_stated_rules_env110_out(words):
    where, _ = env110(turbollm_check(*words))
    assert where == "not_applicable"


def test_a_kernel_release_says_wsl2_by_its_microsoft_tag():
    where, finding = env110(turbollm_check("kernel=6.6.87.2-microsoft-standard-WSL2"))
    assert where == "findings" and finding["verdict"] == "applies"


def test_what_the_words_leave_unsaid_is_not_this_machines():
    done = invoke("facts", "--format", "json", "--platform", "wsl2", "--platform", "container")
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert doc["facts"]["platform.wsl"]["value"] is True
    assert doc["facts"]["platform.container"]["value"] is True
    # this machine's kernel, boot line, libstdc++ and UID would speak for a host not judged
    for path in ("platform.kernel", "platform.kernel_cmdline", "platform.glibcxx"):
        assert path not in doc["facts"]
        assert "--platform wsl2" in doc["missing"][path]
    assert not any(path.startswith("container.") for path in doc["facts"])


def test_arbitrary_uid_is_a_container_whose_image_does_not_know_the_uid():
    done = invoke("facts", "--format", "json", "--platform", "arbitrary-uid")
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert doc["facts"]["container.arbitrary_uid"]["value"] is True
    assert doc["facts"]["platform.container"]["value"] is True
    # the machine's own identity is set aside, never read for the container judged
    for path in ("container.uid", "container.user_known", "container.unwritable_caches"):
        assert path not in doc["facts"] and "--platform arbitrary-uid" in doc["missing"][path]
    checked = invoke(
        "check",
        "--format",
        "json",
        "--offline",
        "--no-config",
        "--vllm-version",
        "0.23.0",
        "--platform",
        "arbitrary-uid",
        "--select",
        "ENV02",
    )
    found = {f["code"]: f for f in json.loads(checked.stdout)["findings"]}
    assert {found[c]["severity"] for c in ("ENV020", "ENV021")} == {"warning"}


def test_glibcxx_level_is_stated_as_given():
    done = invoke("facts", "--format", "json", "--platform", "glibcxx=3.4.30")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["facts"]["platform.glibcxx"]["value"] == "3.4.30"


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (("wsl3",), "'wsl3' is not one of wsl2, linux, container"),
        (("glibcxx=13.2",), "'glibcxx=13.2' is not one of"),
        (("kernel=",), "'kernel=' is not one of"),
        (("wsl2", "kernel=6.8.0-1040-nvidia"), "'kernel=6.8.0-1040-nvidia' contradicts 'wsl2'"),
        (("container", "host"), "'host' contradicts 'container'"),
        (("arbitrary-uid", "host"), "'host' contradicts 'arbitrary-uid'"),
    ],
)
def test_bad_or_contradicting_words_are_one_line_and_exit_2(words, said, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["check", "--offline", "--no-config", *[x for w in words for x in ("--platform", w)]])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert said in err
    assert len(err.strip().splitlines()) == 1


def _measure():
    return load_script(CORPUS / "measure.py", "reports2026_measure")


def test_the_measure_passes_the_platform_words_the_train_reports_show():
    measure = _measure()
    train = set(json.loads((CORPUS / "split.json").read_text())["train"])
    for report_id, expected in (
        ("mohitsoni48-turbollm-256", ["wsl2", "os=ubuntu-24.04"]),  # "WSL2 Ubuntu 24.04"
        ("vllm-54652", ["wsl2", "container"]),  # "WSL2 (Windows 11 host), Docker"
        ("vllm-43507-aubingil-rtx5090-laptop", []),  # "Windows 11 (native)"
        ("rocm-aiter-2752", ["os=ubuntu-22.04"]),  # "Ubuntu 22.04.5 LTS"
        # "Linux 7.0.0-1019-nvidia (fails), 6.17.0-1032-nvidia (works)": the failing kernel
        ("miaai-lab-deepseek-v4.1-flash-dgx-sparks-14", ["kernel=7.0.0-1019-nvidia"]),
        # "OpenShift, restricted-v2 SCC (UID 1003520000), launcher image importing vLLM"
        ("llm-d-incubation-llm-d-fast-model-actuation-631", ["arbitrary-uid", "container"]),
        # "ai-dynamo vLLM runtime image under an arbitrary UID with gid 0 (OpenShift-style)"
        ("ai-dynamo-dynamo-13040", ["arbitrary-uid", "container"]),
        # "Odysseus Docker Compose stack, unprivileged odysseus user (PUID), ...": a container,
        # under a user the image knows
        ("odysseus-dev-odysseus-6157", ["container"]),
        # "Kubernetes with HAMi v2.9.0 (libvgpu.so via LD_PRELOAD)"
        ("project-hami-hami-2641", ["hami-core", "container"]),
        # "Kubernetes, volcano 1.14.1 with volcano-vgpu-device-plugin 1.11.0"
        ("project-hami-volcano-vgpu-device-plugin-108", ["hami-core", "container"]),
    ):
        assert report_id in train
        report = yaml.safe_load(
            (CORPUS / "reports" / report_id / "report.yaml").read_text(encoding="utf-8")
        )
        assert measure.platform_words(report) == expected, report_id
        args, needs = measure.check_args(
            report, CORPUS / "reports" / report_id, {"--platform", "--package"}
        )
        assert [args[i + 1] for i, a in enumerate(args) if a == "--platform"] == expected
        assert not any("platform" in need for need in needs)


REPORT = ROOT / "tests" / "fixtures" / "reports" / "h100x8_nvlink_nightly.txt"


def report_facts(*words: str) -> dict:
    args = ["facts", "--format", "json", "--report", str(REPORT)]
    done = invoke(*args, *[x for w in words for x in ("--platform", w)])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_a_reports_kernel_stays_where_no_word_contradicts_it():
    plain = report_facts()["facts"]
    kernel = plain["platform.kernel"]["value"]
    assert plain["platform.wsl"]["value"] is False
    doc = report_facts("container")
    assert doc["facts"]["platform.kernel"]["value"] == kernel
    assert doc["facts"]["platform.container"]["source"] == Source.USER


def test_wsl2_stated_over_a_native_reports_kernel_sets_the_kernel_aside():
    doc = report_facts("wsl2")
    assert doc["facts"]["platform.wsl"]["value"] is True
    assert "platform.kernel" not in doc["facts"]
    assert "differs" in doc["missing"]["platform.kernel"]


@pytest.mark.parametrize(
    ("prose", "expected"),
    [
        # beside a container the release named may be the host's: not passed
        ("Ubuntu 22.04 host, Docker", ["container"]),
        # a WSL2 platform's kernel is a microsoft one; another beside it is the Windows host's
        ("WSL2, Linux 6.8.0-40-generic on the dual-boot side", ["wsl2"]),
        (
            "WSL2 kernel 6.6.87.2-microsoft-standard-WSL2",
            ["wsl2", "kernel=6.6.87.2-microsoft-standard-WSL2"],
        ),
    ],
)
def test_the_measure_passes_only_what_the_prose_says_of_the_platform_judged(prose, expected):
    assert _measure().platform_words({"shown": {"platform": prose}}) == expected


def test_the_measure_says_why_check_was_silent_on_a_failure():
    measure = _measure()
    doc = {
        "undecided": [
            {
                "code": "MEM005",
                "missing": [
                    {
                        "fact": "memory.mamba_blocks_verdict",
                        "reason": "needs model.num_hidden_layers: config.json of Qwen/Qwen3.8-27B: "
                        "not in the Hugging Face cache",
                    }
                ],
            },
        ],
        "not_applicable": ["HW220", "PAR003"],
    }
    assert measure.why_silent(doc, []) == ["no rule names the cause"]
    assert "HW220" in measure.LOG_ONLY  # a crash-log rule (log_only: true)
    assert measure.why_silent(doc, ["HW220", "MEM005", "PAR003"]) == [
        "HW220 reads crash logs only",
        "MEM005 undecided: needs memory.mamba_blocks_verdict (from model.num_hidden_layers)",
        "PAR003 does not apply to the facts given",
    ]


@pytest.mark.parametrize(("word", "found"), [("no-nvcc", False), ("nvcc", True)])
def test_a_stated_cuda_compiler_is_the_jits_compiler(word, found):
    doc = json.loads(invoke("facts", "--format", "json", "--platform", word).stdout)
    fact = doc["facts"]["platform.nvcc_found"]
    assert fact["value"] is found
    assert fact["source"] == Source.USER


def test_the_measure_reads_a_runtime_only_image_as_no_nvcc():
    report = yaml.safe_load(
        (CORPUS / "reports" / "skypilot-org-skypilot-8733-nvcc" / "report.yaml").read_text(
            encoding="utf-8"
        )
    )
    # "Kubernetes pod with the CUDA runtime only (no toolkit)" (a train report)
    assert _measure().platform_words(report) == ["no-nvcc", "container"]


def test_hami_core_stated_and_stated_absent():
    doc = report_facts("hami-core")
    fact = doc["facts"]["platform.cuda_interposer"]
    assert (fact["value"], fact["source"]) == ("hami-core", Source.USER)
    doc = report_facts("no-hami-core")
    assert "platform.cuda_interposer" not in doc["facts"]
    assert "platform.cuda_interposer" not in doc["missing"]
