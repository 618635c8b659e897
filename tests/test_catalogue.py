"""The error catalogue names vLLM's own messages in crash logs, release by release.

The log lines are real vLLM messages (the texts of the release wheels, and of upstream
reports where noted), in the shapes users paste them.
"""

from __future__ import annotations

import json
import os

import pytest
from doctor_forks import doctor_run

from vllm_doctor.engine.loader import load_rules
from vllm_doctor.engine.logreport import analyse_log
from vllm_doctor.knowledge import load

RULES = load_rules(None)
NO_MEMORY = (
    "ValueError: No available memory for the cache blocks. Try increasing "
    "`gpu_memory_utilization` when initializing the engine."
)
KV_CACHE = (
    "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB "
    "KV cache is needed, which is larger than the available KV cache memory (9.50 GiB). Based on "
    "the available memory, the estimated maximum model length is 77824. Try increasing "
    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
)


def named(log: str, version: str | None = None):
    return analyse_log(log, [], version, "option" if version else "").messages


def test_the_catalogue_covers_every_release():
    table = load("errors")
    assert (
        table.releases[0] == "0.8.0"
        and table.releases[-1] == "0.33.0"
        and len(table.releases) == 50
    )
    assert all(count > 2000 for count in table.meta["counts"].values())


def test_a_message_is_located_in_the_users_release():
    log = f"(VllmWorkerProcess pid=87) ERROR 07-19 10:59:03 worker_base.py:226] {NO_MEMORY}\n"
    old = named(log, "0.10.0")[0]
    assert old.hit.key == NO_MEMORY
    assert [s[0] for s in old.sites()] == ["v1/core/kv_cache_utils.py", "worker/worker.py"]
    assert old.to_dict()["in_that_release"] is True
    newer = named(log, "0.11.0")[0]
    assert [s[:2] for s in newer.sites()] == [
        ["v1/core/kv_cache_utils.py", "check_enough_kv_cache_memory"]
    ]
    assert newer.sites()[0][2] == "available_memory <= 0"
    # the same text is not raised by 0.20.0 (reworded in 0.13.0): said, never guessed
    gone = named(log, "0.20.0")[0]
    assert gone.to_dict()["in_that_release"] is False
    assert "removed or reworded after 0.12.0" in gone.note


@pytest.mark.parametrize(
    "log, version, key_part, first, last",
    [
        # V0's model runner (0.8.0-0.10.2)
        (
            "ERROR 03-26 05:25:01 engine.py:389] ValueError: num_steps > 1 is not supported in ModelRunner\n",
            "0.9.2",
            "num_steps > 1 is not supported in ModelRunner",
            "0.8.0",
            "0.10.2",
        ),
        # the KV-cache check as 0.8.4-0.12.0 word it, pasted without any prefix
        (KV_CACHE + "\n", "0.11.0", "KV cache is needed, which is larger than", "0.8.4", "0.12.0"),
        # a recent model (0.19.0 on), the message without its exception class
        (
            "(EngineCore_DP0 pid=4411) Gemma4 does not support image_embeds.\n",
            "0.33.0",
            "Gemma4 does not support image_embeds.",
            "0.19.0",
            "0.33.0",
        ),
    ],
)
def test_messages_from_several_releases(log, version, key_part, first, last):
    message = named(log, version)[0]
    assert key_part in message.hit.key
    assert (message.first, message.last) == (first, last)
    assert message.at_release is not None  # the user's release raises it


def test_pydantic_wrapper_cut_short():
    # vLLM PR 19660's test output: pydantic wraps the ValueError, and the paste is cut
    log = (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
        "  Value error, User-specified max_model_len (513) is greater than the derived max_model_len "
        "(max_position_embeddings=512 or model_max_length=None in model's config.json). This may lead "
        "to incorrect model outputs or CUDA errors. To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 [type=value_error, input_va\n"
    )
    message = named(log)[0]
    assert message.hit.key.startswith("ValueError: User-specified max_model_len")
    assert message.sites()[0][0].startswith("config")


def test_wrapped_and_coloured_lines():
    cut = KV_CACHE.index("available KV cache") + 9
    wrapped = KV_CACHE[:cut] + "\n" + KV_CACHE[cut:] + "\n"  # a terminal wrap inside a word
    assert "KV cache is needed" in named(wrapped)[0].hit.key
    coloured = f"\x1b[1;31mERROR\x1b[0m 11-23 05:10:11 [core.py:123] \x1b[31m{NO_MEMORY}\x1b[0m\n"
    assert named(coloured)[0].hit.key == NO_MEMORY


def test_raised_messages_come_before_logged_ones():
    log = (
        "(EngineCore_DP0 pid=1234) ERROR 11-23 05:10:11 [core.py:708] EngineCore failed to start.\n"
        f"(EngineCore_DP0 pid=1234) ERROR 11-23 05:10:11 [core.py:708] {KV_CACHE}\n"
    )
    keys = [m.hit.key for m in named(log, "0.11.0")]
    assert (
        "KV cache is needed" in keys[0] and keys[-1] == "log.exception: EngineCore failed to start."
    )


def test_curated_rule_is_named_first_and_catalogue_still_listed():
    log = f"(EngineCore_DP0 pid=1234) ERROR 11-23 05:10:11 [core.py:708] {KV_CACHE}\n"
    report = analyse_log(log, RULES)
    assert [r.code for r, *_ in report.rule_hits] == ["MEM001"]
    assert "KV cache is needed" in report.messages[0].hit.key


def test_no_message_no_claim():
    assert (
        named(
            "INFO 11-23 05:10:11 [loggers.py:127] Engine 000: Avg prompt throughput: 1.0 tokens/s\n"
        )
        == []
    )


def _doctor(*args, stdin=None):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    return doctor_run(*args, stdin=stdin, env=environ, timeout=120)


def test_explain_log_from_standard_input_as_json():
    log = (
        "INFO 11-23 05:10:01 [api_server.py:1755] vLLM API server version 0.11.0\n"
        + NO_MEMORY
        + "\n"
    )
    run = _doctor("explain", "--log", "-", "--format", "json", stdin=log)
    assert run.returncode == 1, run.stderr
    data = json.loads(run.stdout)
    assert data["log"] == "standard input" and data["vllm_version"] == "0.11.0"
    assert data["vllm_version_source"] == "log"
    message = data["vllm_messages"][0]
    assert message["key"] == NO_MEMORY and message["in_that_release"] is True
    assert message["raised_at"][0] == {
        "file": "vllm/v1/core/kv_cache_utils.py",
        "function": "check_enough_kv_cache_memory",
        "condition": "available_memory <= 0",
    }
    text = _doctor("explain", "--log", "-", stdin=log)
    assert (
        "raised in vllm/v1/core/kv_cache_utils.py, in check_enough_kv_cache_memory" in text.stdout
    )
    assert _doctor("explain", "--log", "-", "--format", "yaml", stdin=log).returncode == 2


def test_check_log_names_the_catalogue_entry(tmp_path):
    log = tmp_path / "crash.log"
    log.write_text(
        f"(Worker_TP0 pid=2291) ERROR 06-15 10:06:20 [multiproc_executor.py:743] {NO_MEMORY}\n"
    )
    run = _doctor("check", "--log", str(log), "--vllm-version", "0.10.0", "--format", "json")
    assert run.returncode in (0, 1), run.stderr
    data = json.loads(run.stdout)
    message = data["log_messages"][0]
    assert message["key"] == NO_MEMORY and message["vllm_version"] == "0.10.0"
    assert {s["file"] for s in message["raised_at"]} == {
        "vllm/v1/core/kv_cache_utils.py",
        "vllm/worker/worker.py",
    }
    # MEM003 names this message's cause: the catalogue is then detail, shown with -v
    text = _doctor("check", "--log", str(log), "--vllm-version", "0.10.0")
    assert "MEM003" in text.stdout and "vLLM messages in the log" not in text.stdout
    assert (
        "vLLM messages in the log"
        in _doctor("check", "--log", str(log), "--vllm-version", "0.10.0", "-v").stdout
    )
    # with no curated rule for the message, the text report names the catalogue entry
    log.write_text(
        "(EngineCore_DP0 pid=4411) AssertionError: Gemma4 does not support image_embeds.\n"
    )
    text = _doctor("check", "--log", str(log), "--vllm-version", "0.20.0")
    assert "vLLM messages in the log" in text.stdout
    assert "raised in vllm/model_executor/models/gemma4_mm.py" in text.stdout


def test_explain_names_what_the_options_table_says_of_unrecognized_arguments(tmp_path):
    import json as _json

    log = tmp_path / "argparse.log"
    log.write_text(
        "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...\n"
        "vllm: error: unrecognized arguments: --enable-prefix-cachng\n"
    )
    run = doctor_run(
        "explain", "--log", str(log), "--format", "json", "--vllm-version", "0.20.0", timeout=60
    )
    assert run.returncode == 1, run.stderr
    refused = _json.loads(run.stdout)["refused_options"]
    assert refused == [
        "--enable-prefix-cachng: vLLM 0.20.0 does not accept it (no release "
        "0.8.0–0.33.0 accepts it); nearest valid spelling --enable-prefix-caching"
    ]
    text = doctor_run("explain", "--log", str(log), timeout=60).stdout
    assert text.startswith("vLLM's argument parser refused")
    assert "(pass --vllm-version V to judge them by your release)" in text


def test_an_api_error_reply_is_named_as_the_servers_reply(tmp_path):
    import json as _json

    log = tmp_path / "client.log"
    log.write_text(
        "openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': "
        '\'"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
        "to be set', 'type': 'BadRequestError', 'param': None, 'code': 400}\n"
    )
    run = doctor_run("explain", "--log", str(log), "--format", "json", timeout=60)
    message = _json.loads(run.stdout)["vllm_messages"][0]
    assert message["kind"] == "response"
    assert message["template"].startswith('"auto" tool choice requires --enable-auto-tool-choice')
    text = doctor_run("explain", "--log", str(log), timeout=60).stdout
    assert "the API server's error reply:" in text and "    returned by vllm/" in text


WRAPPERS = (
    "(EngineCore_DP0 pid=2215) ERROR 11-02 10:11:12 [core.py:708] EngineCore failed to start.\n"
    "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. "
    "Failed core proc(s): {}\n"
)


def test_a_root_cause_of_a_package_comes_before_vllms_wrappers(tmp_path):
    # the CUDA runtime's error is the cause; vLLM's two messages only point at it
    log = tmp_path / "engine.log"
    log.write_text(
        "(EngineCore_DP0 pid=2215) ERROR 11-02 10:11:12 [core.py:708] "
        "torch.AcceleratorError: CUDA error: operation not supported\n" + WRAPPERS
    )
    text = doctor_run("explain", "--log", str(log), timeout=60).stdout
    packages = text.index("Messages of the packages around vLLM in the log")
    wrappers = text.index("vLLM error messages in the log")
    assert packages < wrappers
    assert "each only points at a root cause shown elsewhere in the log" in text
    assert "the first is the nearest to the root cause" not in text


def test_a_vllm_message_that_names_the_cause_keeps_its_place_first(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text(
        "(EngineCore_DP0 pid=2215) ERROR 11-02 10:11:12 [core.py:708] "
        "RuntimeError: Cannot find any model weights with `/models/x`\n" + WRAPPERS
    )
    text = doctor_run("explain", "--log", str(log), timeout=60).stdout
    assert "the first is the nearest to the root cause" in text
    first = text.split("vLLM error messages in the log", 1)[1].splitlines()[1]
    assert "Cannot find any model weights" in first


def test_a_message_wrapped_inside_its_first_words_is_found_by_its_end(tmp_path):
    # a terminal 80 columns wide breaks the message a few characters after the record prefix
    log = tmp_path / "wrapped.log"
    log.write_text(
        "(EngineCore_DP0 pid=2215) ERROR 11-02 10:11:12 [core.py:708] ValueError: No availab\n"
        "le memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
        "initializing the engine.\n"
    )
    run = doctor_run("explain", "--log", str(log), "--format", "json", timeout=60)
    message = json.loads(run.stdout)["vllm_messages"][0]
    assert message["template"].startswith("No available memory for the cache blocks.")
    # the line shown is the one the message starts on
    assert message["matched_line"].endswith("ValueError: No availab")


def test_the_message_a_wrapper_quotes_is_read_before_the_wrapper(tmp_path):
    # the engine core quotes a worker's error in its own wrapper, on one line: the wrapper
    # (more literal text) no longer hides the cause it quotes
    log = tmp_path / "worker.log"
    log.write_text(
        "(EngineCore_DP0 pid=1) RuntimeError: Worker failed with error 'UVA is not available', "
        "please check the stack trace above for the root cause\n"
    )
    run = doctor_run("explain", "--log", str(log), "--format", "json", timeout=60)
    doc = json.loads(run.stdout)
    templates = [m["template"] for m in doc["vllm_messages"]]
    assert templates[0] == "UVA is not available"
    assert templates[1].startswith("Worker failed with error")
    assert "ENV110" in [f["code"] for f in doc["known_failures"]]
