"""Calibration: known-good serve commands from vLLM itself draw no error finding.

tests/fixtures/calibration/corpus.json is built by tools/calibration_corpus.py from each
release's own tree (its docstrings and the ``--option value`` examples of its help texts and
messages), from vLLM's documentation at a release tag and recipes (sources.txt), and from vLLM's
CI pipelines and tests at a commit dated to a release (repository.txt,
tools/calibration_repository.py). Every command is
judged in-process the way ``vllm-doctor check --vllm-version <its release>`` judges it, with
the hardware its source names; an error finding on a command vLLM itself documents for that
release is a defect of the doctor (or, written in exclusions.json, of vLLM's text).
"""

from __future__ import annotations

import functools
import json
import shlex
from collections import Counter
from pathlib import Path

import pytest
from hub_server import FakeHub, Repo

from vllm_doctor.commands.check import judge
from vllm_doctor.compact import cache_dir
from vllm_doctor.engine.loader import default_rules_dir, load_rules
from vllm_doctor.errors import InputError
from vllm_doctor.facts.collect import CollectOptions
from vllm_doctor.facts.hardware import TargetHardware

CORPUS = Path(__file__).parent / "fixtures" / "calibration" / "corpus.json"
ENTRIES = json.loads(CORPUS.read_text(encoding="utf-8"))["entries"]


FIXTURES_ROOT = Path(__file__).parent / "fixtures"
CONFIGS = json.loads(
    (FIXTURES_ROOT / "calibration" / "configs" / "sources.json").read_text(encoding="utf-8")
)["models"]


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A local stand-in of the Hugging Face Hub serving each corpus model's real config.json
    (tests/fixtures/calibration/configs/sources.json), and an empty cache for it: the corpus
    is judged as a user with the Hub runs check."""
    repos = {
        model: Repo({name: (FIXTURES_ROOT / f["file"]).read_bytes() for name, f in files.items()})
        for model, files in CONFIGS.items()
    }
    with FakeHub(repos) as server:
        yield {
            "HF_ENDPOINT": server.url,
            "HF_HUB_CACHE": str(tmp_path_factory.mktemp("hf-cache")),
            "HF_HUB_DISABLE_TELEMETRY": "1",
        }


def _judge(entry: dict, rules, hub_env: dict[str, str] | None = None):
    hardware = entry.get("hardware") or {}
    target = (
        TargetHardware(gpu=hardware.get("gpu"), count=hardware.get("gpus")) if hardware else None
    )
    options = CollectOptions(
        serve_tokens=shlex.split(entry["command"]),
        vllm_version=entry["release"],
        probe_machine=False,
        target=target,
        environ=hub_env,
        hub=hub_env is not None,
    )
    return judge(options, rules)


def _errors(entry: dict, rules, hub_env: dict[str, str] | None = None) -> list[str]:
    try:
        doc = _judge(entry, rules, hub_env)
    except InputError as err:
        return [f"bad input (exit 2): {err}"]
    return [
        f"{f.rule.code}: " + "; ".join(f"{e.path} = {e.value}" for e in f.evidence)
        for f in doc.applies
        if f.rule.severity == "error"
    ]


def test_the_corpus_is_broad():
    releases = Counter(e["release"] for e in ENTRIES)
    assert len(ENTRIES) >= 1000 and len(releases) >= 50
    assert all(e["source"] for e in ENTRIES)
    # every exclusion carries its reason
    assert all(len(e["exclude"]) > 40 for e in ENTRIES if "exclude" in e)


# the corpus's commands judged in shards (each known-good command in exactly one), so that the
# test command's workers share the corpus instead of one of them judging all of it
SHARDS = 8


@functools.cache
def _shipped_rules():
    return load_rules([default_rules_dir()])


@pytest.mark.parametrize("shard", range(SHARDS))
def test_known_good_commands_draw_no_error(hub, shard):
    rules = _shipped_rules()
    failures = []
    for entry in ENTRIES[shard::SHARDS]:
        if entry.get("exclude") or entry.get("left_out"):
            continue
        errors = _errors(entry, rules, hub)
        if errors:
            failures.append(
                f"{entry['release']}: {entry['command']} ({entry['source']}): " + " | ".join(errors)
            )
    assert not failures, f"{len(failures)} known-good commands draw errors:\n" + "\n".join(
        failures[:20]
    )


@pytest.mark.parametrize(
    "entry", [e for e in ENTRIES if e.get("exclude")][:1], ids=lambda e: f"{e['release']}"
)
def test_an_excluded_command_is_excluded_for_its_error(entry):
    # the reason is about a real refusal: the doctor reports it
    assert _errors(entry, load_rules([default_rules_dir()]))


def test_a_corrected_command_that_would_still_fail_is_not_printed(tmp_path):
    # a typo fixed on a two-GPU report keeps -tp 4: the corrected command would still be an
    # HW005 error there, so it is marked, and not offered as ready to run
    text = (Path(__file__).parent / "fixtures/reports/rtx5060ti_x2_pcie.txt").read_text()
    report = tmp_path / "collect-env.txt"
    report.write_text(text.replace("0.23.1rc1.dev20+g0d8097964 (git sha: 0d8097964)", "0.23.0"))
    rules = load_rules([default_rules_dir()])
    options = CollectOptions(
        serve_tokens=["vllm", "serve", "m", "--tensor-parallel-sise", "4"],
        report=report,
        probe_machine=False,
    )
    doc = judge(options, rules)
    [args100] = [f for f in doc.applies if f.rule.code == "ARGS100"]
    [evidence] = [e for e in args100.evidence if e.path == "release.corrected_command"]
    assert evidence.value.startswith("vllm serve m --tensor-parallel-size 4")
    assert "would still draw HW005" in evidence.value
    # on two GPUs with -tp 2 the corrected command passes and is printed as it is
    options = CollectOptions(
        serve_tokens=["vllm", "serve", "m", "--tensor-parallel-sise", "2"],
        report=report,
        probe_machine=False,
    )
    doc = judge(options, rules)
    [args100] = [f for f in doc.applies if f.rule.code == "ARGS100"]
    [evidence] = [e for e in args100.evidence if e.path == "release.corrected_command"]
    assert evidence.value == "vllm serve m --tensor-parallel-size 2"


FIXTURES = Path(__file__).parent / "fixtures" / "calibration"
TREES = Path("/work/wheels/src")


def _repository():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import calibration_repository

    return calibration_repository


def test_repository_entries_carry_their_provenance():
    repo = [e for e in ENTRIES if "match" in e]
    assert repo, "no CI pipeline or test command in the corpus"
    for entry in repo:
        assert len(entry["commit"]) == 40 and entry["kind"] in (
            "pipeline",
            "tests",
            "examples",
            "benchmarks",
        )
        assert entry["source"].startswith("https://github.com/vllm-project/vllm/blob/")
        match = entry["match"]
        assert match["score"] >= 0.9 and entry["release"] == match["window"][-1]
        assert entry["hardware"]["gpus"] >= 1
    # the corpus records the method and every version kept or dropped, with its score
    dating = json.loads(CORPUS.read_text(encoding="utf-8"))["repository_dating"]
    kept = " ".join(dating["kept_versions"])
    assert all(e["commit"][:10] in kept for e in repo)
    assert not any(e["commit"][:10] in " ".join(dating["dropped_versions"]) for e in repo)


def test_the_pipeline_extractor_reads_steps_and_engine_commands():
    repository = _repository()
    [block] = [
        b
        for b in repository.parse_blocks((FIXTURES / "repository.txt").read_text())
        if b["commit"].startswith("000e0367")
    ]
    found = repository.commands_of(block)
    # the Examples Test step's EngineArgs scripts, on the pipeline's default GPU; a script
    # run without --model (its own default) and data_parallel.py (its own options) are not
    assert [(c, h) for c, h, _, _ in found] == [
        ("vllm serve facebook/opt-125m", {"gpus": 1, "gpu": "L4"}),
        ("vllm serve meta-llama/Llama-2-13b-chat-hf --cpu-offload-gb 10", {"gpus": 1, "gpu": "L4"}),
    ]


def test_the_step_hardware_comes_from_the_step():
    repository = _repository()
    hardware = repository._step_hardware
    assert hardware({"num_gpus": 4}) == [({"gpus": 4, "gpu": "L4"}, None)]
    assert hardware({"gpu": "b200"}) == [({"gpus": 1, "gpu": "B200"}, None)]
    assert hardware({"agents": {"queue": "gpu_4_queue"}}) == [({"gpus": 4, "gpu": "L4"}, None)]
    # the newer pipelines' keys (.buildkite/test_areas/distributed.yaml): device and
    # num_devices, and an AMD mirror of the step on two MI300X, judged on that GPU
    assert hardware({"device": "h100", "num_devices": 8}) == [({"gpus": 8, "gpu": "H100"}, None)]
    assert hardware({"device": "b200-k8s", "num_devices": 2}) == [
        ({"gpus": 2, "gpu": "B200"}, None)
    ]
    assert hardware({"num_devices": 2, "mirror": {"amd": {"device": "mi300_2"}}}) == [
        ({"gpus": 2, "gpu": "L4"}, None),
        ({"gpus": 2, "gpu": "MI300X"}, None),
    ]
    # a CPU agent or a step without a GPU is another platform: kept, not judged
    assert hardware({"device": "amd_cpu"}) == [({}, "amd_cpu")]
    assert hardware({"no_gpu": True})[0][1]


def test_the_test_extractor_reads_server_arguments():
    repository = _repository()
    blocks = repository.parse_blocks((FIXTURES / "repository.txt").read_text())
    [tools] = [b for b in blocks if b["file"] == "tests/tool_use/utils.py"]
    commands = [c for c, *_ in repository.commands_of(tools)]
    # ARGS + each configuration's arguments; "extended" configurations do not run in CI
    assert commands[0] == (
        "vllm serve NousResearch/Hermes-3-Llama-3.1-8B "
        "--enable-auto-tool-choice --max-model-len 1024 --max-num-seqs 256 "
        "--enforce-eager --no-enable-prefix-caching --tool-call-parser hermes "
        "--chat-template examples/tool_chat_template_hermes.jinja"
    )
    assert len(commands) == 8 and not any("Llama-4" in c for c in commands)
    [lmeval] = [b for b in blocks if b["file"].endswith("test_lmeval.py")]
    assert [c for c, *_ in repository.commands_of(lmeval)] == [
        "vllm serve Qwen/Qwen2-1.5B-Instruct --max-model-len 4096 --disable-log-requests"
    ]


@pytest.mark.skipif(not TREES.is_dir(), reason="needs the unpacked release trees")
def test_a_version_is_dated_by_what_it_refers_to():
    from packaging.version import Version

    repository = _repository()
    trees = sorted(
        (p for p in TREES.iterdir() if (p / "vllm").is_dir()), key=lambda p: Version(p.name)
    )
    # vllm/worker/worker.py is gone after 0.10.2; flashinfer_cutlass_prepare_finalize.py
    # first appears in 0.10.0 (a stale path, vllm/sampling_metadata.py, lowers every score)
    refs = [
        ("path", "vllm/worker/worker.py"),
        ("path", "vllm/model_executor/layers/fused_moe/flashinfer_cutlass_prepare_finalize.py"),
        ("path", "vllm/sampling_metadata.py"),
    ]
    match = repository.match_release(trees, refs)
    assert match["window"] == ["0.10.0", "0.10.1", "0.10.1.1", "0.10.2"]
    assert match["score"] == round(2 / 3, 3)
    # a file with the license line but no SPDX-FileCopyrightText predates 0.9.1
    match = repository.match_release(trees, [("header", "absent")])
    assert match["window"][-1] == "0.9.0.1"


def test_documentation_examples_and_recipe_trials_are_in_the_corpus():
    # the trials: commands from vLLM's documentation, its examples/ at a tag and
    # recipes, each with its page; test_known_good_commands_draw_no_error judges them
    pages = [e for e in ENTRIES if e["source"].startswith("https://") and "match" not in e]
    assert len(pages) >= 20 and len({e["source"] for e in pages}) >= 15
    examples = {e["release"] for e in ENTRIES if e.get("kind") == "examples"}
    assert len(examples) >= 5


def _served_model(entry: dict) -> str | None:
    words = shlex.split(entry["command"])
    rest = words[words.index("serve") + 1 :] if "serve" in words else words
    return next((w for w in rest if not w.startswith("-")), None)


def test_the_corpus_is_judged_with_real_configs(hub):
    """Every config the stand-in Hub serves is read for the commands of its model (the facts
    name the Hub as their source), and the count of commands judged with a real config.json
    is what the corpus keeps (the issue asks for it: issue 29)."""
    rules = load_rules([default_rules_dir()])
    with_config = [e for e in ENTRIES if _served_model(e) in CONFIGS]
    assert {_served_model(e) for e in with_config} == set(CONFIGS), "a config no command uses"
    for entry in with_config:
        doc = _judge(entry, rules, hub)
        # fetched from the stand-in into the doctor's cache (the first time), then read from
        # that cache; the Hugging Face cache is never written (facts/hub.py)
        path = str(doc.facts.value("model.config_path") or "")
        assert path.startswith(str(cache_dir() / "hub")), entry
        assert doc.facts.value("model.architectures"), entry
    recipes = [e for e in with_config if e.get("kind") == "recipe"]
    print(
        f"{len(with_config)} of {len(ENTRIES)} commands judged with a real config.json "
        f"({len(CONFIGS)} models; {len(recipes)} recipe commands)"
    )
    assert len(with_config) >= 20 and len(recipes) >= 8
