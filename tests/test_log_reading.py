"""The crash-log reader finds a known message from part of it, on the shipped catalogue and
rules, with real upstream messages: its first sentence, a line wrapped under the prefixes
loggers and runtimes put on every line, a tail another release words differently or that the
reporter left out, another release's wording; and it stays honest about what it read: a short
message is read only where a message starts, a wrapper that points at a root cause elsewhere
never comes first, a message a companion package raised is never put on vLLM's account."""

from __future__ import annotations

import pytest

from vllm_doctor.engine.evaluate import match_signatures
from vllm_doctor.engine.loader import load_rules
from vllm_doctor.engine.logmatch import Catalogue, compile_signature, load_catalogue, scan_log
from vllm_doctor.engine.logreport import catalogue_messages

RULES = {rule.code: rule for rule in load_rules(None)}


def messages(log: str) -> list[str]:
    """The keys of the shipped catalogue's messages the log shows, in the reported order."""
    return [hit.key for hit in scan_log(log, catalogue=load_catalogue()).catalogue_hits()]


# MEM002's message as vLLM 0.14.0+ prints it (vllm/v1/worker/utils.py request_memory), with
# the figures of NVIDIA-AI-Blueprints/video-search-and-summarization pull request 1743
# (bench/reports2026/reports/nvidia-ai-blueprints-vss-1743, train split)
FREE = (
    "ValueError: Free memory on device cuda:0 (67.92/121.69 GiB) on startup is less than "
    "desired GPU memory utilization (0.7, 85.18 GiB). Decrease GPU memory utilization or "
    "reduce GPU memory used by other processes."
)
FREE_KEY_PREFIX = "ValueError: Free memory on device{*}({*}/{*}GiB) on startup is less than desired"

# what loggers and runtimes put before each line: vLLM's process tag and level header (Ray
# and multiprocessing workers), Ray's actor tag with the node's address, torchrun's rank,
# docker compose's service bar, kubectl logs --prefix, an ISO timestamp (journald, k8s), and
# vLLM's colour codes around the process tag
PREFIXES = {
    "engine-core": "(EngineCore_DP0 pid=2215) ",
    "engine-core-header": "(EngineCore_DP0 pid=2215) ERROR 11-02 10:11:12 [core.py:708] ",
    # vLLM's header before the file went into brackets (vllm-project/vllm#7077)
    "old-header": "(VllmWorkerProcess pid=13359) ERROR 08-02 18:15:15 multiproc_worker_utils.py:226] ",
    "ray-actor": "(RayWorkerWrapper pid=5123, ip=10.0.0.2) ",
    "torchrun-rank": "[rank0]: ",
    "compose": "vllm-1  | ",
    "kubectl": "[pod/vllm-0/vllm] ",
    "timestamp": "2026-03-02T10:11:12.345678Z ",
    "colour": "\x1b[1;36m(EngineCore_DP0 pid=2215)\x1b[0;0m ",
}


def wrapped(message: str, width: int, prefix: str) -> str:
    """The message cut every ``width`` characters (a terminal's wrap falls inside words as
    well as between them), each line under the prefix."""
    return "".join(f"{prefix}{message[at : at + width]}\n" for at in range(0, len(message), width))


@pytest.mark.parametrize("width", [80, 61])
@pytest.mark.parametrize("prefix", list(PREFIXES.values()), ids=list(PREFIXES))
def test_a_message_wrapped_under_line_prefixes_is_read_whole(prefix, width):
    log = wrapped(FREE, width, prefix)
    hits = scan_log(log, catalogue=load_catalogue()).catalogue_hits()
    free = [hit for hit in hits if hit.key.startswith(FREE_KEY_PREFIX)]
    assert len(free) == 1 and free[0].complete
    # and the rule that quotes the message is named from the wrapped lines
    assert match_signatures(RULES["MEM002"], log)


def test_a_wrapped_message_with_only_its_start_shown_is_not_read_whole():
    # the report's own cut: the line ends inside the first sentence
    log = wrapped(FREE[:100], 80, PREFIXES["engine-core"])
    assert not any(key.startswith(FREE_KEY_PREFIX) for key in messages(log))


def test_first_sentence_alone_names_the_rule():
    # vllm-project/vllm#49064 as the reporter quoted it (bench/reports2026, train split)
    log = "ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (969).\n"
    lines = match_signatures(RULES["MEM005"], log)
    assert lines == [log.strip()]
    hits = scan_log(log, catalogue=load_catalogue()).catalogue_hits()
    assert [hit.complete for hit in hits] == [False]
    assert hits[0].shown.endswith("Mamba cache blocks ({*}).")


@pytest.mark.parametrize(
    "log",
    [
        # noonghunna/club-3090#35 (train split): no parenthesis before the needed memory, and
        # the tail a later release prints instead of "Try increasing ..."
        "ValueError: To serve at least one request with the model's max seq len (180000), 3.05 "
        "GiB KV cache is needed, which is larger than the available KV cache memory (2.17 GiB). "
        "Based on the available memory, the estimated maximum model length is 111456.\n",
        # vLLM 0.22.0+'s message quoted without its "Try increasing" tail
        "ValueError: To serve at least one request with the model's max seq len (32768), (4.0 "
        "GiB KV cache is needed, which is larger than the available KV cache memory (1.2 GiB).\n",
    ],
    ids=["no-parenthesis-other-tail", "no-tail"],
)
def test_a_tail_that_differs_still_names_the_message_and_the_rule(log):
    hits = scan_log(log, catalogue=load_catalogue()).catalogue_hits()
    assert any("To serve at least one request" in hit.key for hit in hits)
    assert match_signatures(RULES["MEM001"], log)


# the message as vLLM 0.8.4-0.12.0 words it ("models's"; vllm/v1/core/kv_cache_utils.py
# check_enough_kv_cache_memory); 0.13.0-0.21.0 add "See https://docs.vllm.ai/..." at its end
OLD_KV = (
    "ValueError: To serve at least one request with the models's max seq len (180000), (3.05 GiB "
    "KV cache is needed, which is larger than the available KV cache memory (2.17 GiB). Try "
    "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
    "engine.\n"
)


def test_a_neighbouring_release_wording_is_named_and_said():
    scan = scan_log(OLD_KV, catalogue=load_catalogue())
    (message,) = [m for m in catalogue_messages(scan, "0.20.0") if "To serve at least" in m.hit.key]
    assert message.hit.complete
    # the line's wording is an older release's: 0.20.0 does not raise that text, and raises
    # the message in its own words, which the line shows up to their added tail
    assert message.to_dict()["in_that_release"] is False
    assert "does not raise this wording" in message.note
    assert "raises the message in other words" in message.note
    wording = message.to_dict()["release_wording"]
    assert wording["releases"] == "0.13.0–0.21.0" and wording["complete"] is False
    assert wording["template"].endswith("conserving_memory/ for more details.")
    assert wording["raised_at"][0]["file"] == "vllm/v1/core/kv_cache_utils.py"


def test_the_release_wording_in_explain_json_follows_its_schema(tmp_path):
    import json
    from pathlib import Path

    import jsonschema
    from doctor_forks import doctor_run

    log = tmp_path / "kv.log"
    log.write_text(OLD_KV)
    run = doctor_run(  # forked from the doctor's server
        "explain", "--log", str(log), "--vllm-version", "0.20.0", "--format", "json", timeout=120
    )
    document = json.loads(run.stdout)
    schema = Path(__file__).parents[1] / "docs" / "schemas" / "explain-log.schema.json"
    jsonschema.validate(document, json.loads(schema.read_text()))
    (wording,) = [m["release_wording"] for m in document["vllm_messages"] if m["release_wording"]]
    assert wording["releases"] == "0.13.0–0.21.0"


def test_a_signature_quoting_another_release_wording_is_named_through_it():
    # two releases' wordings of the KV message (knowledge table errors)
    old = (
        "ValueError: To serve at least one request with the models's max seq len ({*}), ({*}GiB "
        "KV cache is needed, which is larger than the available KV cache memory ({*}GiB).{*}Try "
        "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
        "the engine."
    )
    new = (
        old
        + " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    )
    # a signature written from the newer wording only (its tail), whose longest literal run
    # is in the part both wordings share
    newer_only = compile_signature(
        r"To serve at least one request with the models's max seq len \(\d+\), \(-?[\d.]+ GiB KV "
        r"cache is needed, which is larger than the available KV cache memory \(-?[\d.]+ GiB\)\."
        r"[\s\S]*?See https://docs\.vllm\.ai/"
    )
    assert not newer_only.quotes(old.partition(": ")[2])
    scan = scan_log(OLD_KV, [newer_only], Catalogue.build([old, new]))
    assert scan.signature_lines([newer_only]) == []
    lines = scan.message_lines([newer_only])
    assert len(lines) == 1 and "[read as: To serve at least one request" in lines[0]
    # a log of neither wording names nothing
    other = scan_log(
        "ValueError: something else entirely\n", [newer_only], Catalogue.build([old, new])
    )
    assert other.message_lines([newer_only]) == []


@pytest.mark.parametrize(
    ("line", "absent"),
    [
        # vllm-project/vllm#40851 (train split): DeepGEMM's assertion on an A800; the shipped
        # "Unsupported architecture" is humming-kernels' (humming/build.py), a message that
        # starts there, not one that ends a DeepGEMM assertion
        (
            "RuntimeError: Assertion error (.../deepgemm-src/csrc/apis/hyperconnection.hpp:56): "
            "Unsupported architecture\n",
            "RuntimeError: Unsupported architecture",
        ),
        # flashinfer-ai/flashinfer#3486 (train split): vLLM's MoE backend check, whose words
        # "kernel ... does not support" are also a short FlashInfer message (jit/cake_gdn.py)
        (
            "ValueError: NvFp4 MoE backend 'FLASHINFER_CUTLASS' does not support the deployment "
            "configuration since kernel does not support MoEActivation.SWIGLUSTEP activation.\n",
            "ValueError: kernel{*}does not support{*}",
        ),
    ],
    ids=["deepgemm-assertion", "vllm-moe-backend"],
)
def test_a_short_message_is_not_read_from_the_middle_of_another(line, absent):
    assert absent not in messages(line)


@pytest.mark.parametrize(
    ("log", "key"),
    [
        # humming-kernels' own message, as its build raises it, under an engine core's prefix
        (
            "(EngineCore_DP0 pid=7) RuntimeError: Unsupported architecture\n",
            "RuntimeError: Unsupported architecture",
        ),
        # vLLM's engine core logging its failure, under the header vLLM used before 0.6
        (
            "(VllmWorkerProcess pid=13359) ERROR 08-02 18:15:15 core.py:226] EngineCore failed "
            "to start.\n",
            "log.exception: EngineCore failed to start.",
        ),
        # argparse's "argument --name: " before the message of a type converter
        # (vllm/engine/arg_utils.py parse_type, 0.8.5+; the removed --limit-mm-per-prompt shorthand)
        (
            "vllm serve: error: argument --limit-mm-per-prompt: Value image=2 cannot be "
            "converted to <function loads at 0x7f>.\n",
            "ArgumentTypeError: Value{*}cannot be converted to{*}.",
        ),
    ],
    ids=["after-exception-class", "old-vllm-header", "argparse-argument"],
)
def test_a_short_message_is_read_where_a_message_starts(log, key):
    assert key in messages(log)


def test_a_fragment_many_messages_share_is_reported_once():
    # "No available memory for the cache blocks." begins five messages (the GPU, CPU and
    # OpenVINO workers', over releases): the line is one finding, the others its readings
    hits = scan_log(
        "ValueError: No available memory for the cache blocks.\n", catalogue=load_catalogue()
    ).catalogue_hits()
    assert len(hits) == 1
    assert len(hits[0].wordings) >= 4
    assert match_signatures(
        RULES["MEM003"], "ValueError: No available memory for the cache blocks.\n"
    )


def test_a_wrapper_pointing_at_the_root_cause_never_comes_first():
    # vLLM 0.13.0+ logs the root cause (v1/worker/gpu_model_runner.py load_model) and the
    # engine client raises the wrapper after it (v1/engine/utils.py wait_for_engine_startup)
    log = (
        "(EngineCore_DP0 pid=99) ERROR 11-02 10:11:12 [gpu_model_runner.py:3012] Failed to load "
        "model - not enough GPU memory. Try lowering --gpu-memory-utilization to free memory "
        "for weights, increasing --tensor-parallel-size, or using --quantization. See "
        "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more tips.\n"
        "(EngineCore_DP0 pid=99) ERROR 11-02 10:11:12 [core.py:708] EngineCore failed to start.\n"
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
        "proc(s): {}\n"
    )
    found = messages(log)
    assert found and found[0].startswith("log.error: Failed to load model - not enough GPU memory")
    assert any("See root cause above" in key for key in found[1:])


# FlashInfer's JIT finding no nvcc (flashinfer/jit/cpp_ext.py get_cuda_path, flashinfer-python
# 0.5.2+), as skypilot-org/skypilot#8733-style images print it in an engine core's traceback
NVCC_TRACEBACK = """\
(EngineCore_DP0 pid=2215) ERROR 11-02 10:11:12 [core.py:708] Traceback (most recent call last):
(EngineCore_DP0 pid=2215) ERROR 11-02 10:11:12 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/flashinfer/jit/cpp_ext.py", line 90, in get_cuda_path
(EngineCore_DP0 pid=2215) ERROR 11-02 10:11:12 [core.py:708]     raise RuntimeError(
(EngineCore_DP0 pid=2215) ERROR 11-02 10:11:12 [core.py:708] RuntimeError: Could not find nvcc and default cuda_home='/usr/local/cuda' doesn't exist
"""


def test_a_companion_package_frame_keeps_its_message_off_vllms_account():
    flashinfer = "RuntimeError: Could not find nvcc and default cuda_home={*}doesn't exist"
    # a vLLM message of the same class that the line's words also fit
    vllm_lookalike = "RuntimeError: Could not find nvcc{*}"
    catalogue = Catalogue.build([flashinfer, vllm_lookalike])
    catalogue.packages = {
        flashinfer: {
            "flashinfer-python": [
                {
                    "first": "0.5.2",
                    "last": "0.7.2.post1",
                    "sites": [["flashinfer/jit/cpp_ext.py", "get_cuda_path"]],
                }
            ]
        }
    }
    keys = [hit.key for hit in scan_log(NVCC_TRACEBACK, catalogue=catalogue).catalogue_hits()]
    assert keys == [flashinfer]
    # the same line raised from a vLLM frame is vLLM's
    from_vllm = NVCC_TRACEBACK.replace("flashinfer/jit/cpp_ext.py", "vllm/utils/nvcc.py")
    keys = [hit.key for hit in scan_log(from_vllm, catalogue=catalogue).catalogue_hits()]
    assert keys == [vllm_lookalike]
    # and on the shipped catalogue the line is FlashInfer's message, and nothing of vLLM's
    shipped = load_catalogue()
    found = messages(NVCC_TRACEBACK)
    assert flashinfer in found
    assert all(key in shipped.packages for key in found)


# a client's log quotes the server's error as a JSON body, its quotes escaped: langchain4j
# issue 2550's comment of 2025-07-25 (https://github.com/langchain4j/langchain4j/issues/2550),
# vLLM's message from entrypoints/openai/serving_chat.py
JSON_BODY = (
    'Exception in thread "main" dev.langchain4j.exception.InvalidRequestException: '
    '{"object":"error","message":"\\"auto\\" tool choice requires --enable-auto-tool-choice '
    'and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}'
)


def test_a_message_quoted_in_a_json_error_body_is_read_through_its_escaped_quotes():
    found = messages(JSON_BODY)
    assert any("tool choice requires --enable-auto-tool-choice" in key for key in found), found
    # the same body with the quotes left as they are names nothing new
    assert messages(JSON_BODY.replace('\\"auto\\"', "auto")) == []


# messages no catalogue holds (a driver's, a package's JIT), as their threads quote them:
# NVML's (ENV292, NVIDIA/nvidia-docker issue 1648: https://github.com/NVIDIA/nvidia-docker/issues/1648)
# and FlashInfer's JIT on SM 12.x with an old toolkit (ENV297, flashinfer-ai/flashinfer#2577)
NVML_MISMATCH = (
    "nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: "
    "unknown"
)
FLASHINFER_SM12 = (
    "RuntimeError: No supported CUDA architectures found for major versions [12]. "
    "Please check your CUDA installation."
)


@pytest.mark.parametrize("width", [80, 61])
@pytest.mark.parametrize("prefix", list(PREFIXES.values()), ids=list(PREFIXES))
@pytest.mark.parametrize(
    ("code", "message"), [("ENV292", NVML_MISMATCH), ("ENV297", FLASHINFER_SM12)], ids=str
)
def test_a_signature_no_catalogue_message_quotes_is_read_across_wrapped_lines(
    code, message, prefix, width
):
    log = "INFO 11-02 10:11:10 [core.py:90] starting\n" + wrapped(message, width, prefix)
    assert match_signatures(RULES[code], log)


def test_lines_too_short_to_be_wrapped_are_not_joined_into_one_message():
    # two short records that only together spell ENV297's message are two messages
    log = "RuntimeError: No supported CUDA\narchitectures found for major versions [12]\n"
    assert not match_signatures(RULES["ENV297"], log)
