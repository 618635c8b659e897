"""The error-catalogue extractor (tools/extractors/errors.py) on small fake wheels."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.extractors import errors as extractor  # noqa: E402
from tools.wheelsrc import find_releases  # noqa: E402
from vllm_doctor.knowledge.ranges import table  # noqa: E402

CONFIG_PY = """
import logging
logger = logging.getLogger(__name__)


class ModelConfig:
    def verify(self, tp, heads):
        if heads % tp != 0:
            raise ValueError(
                f"Total number of attention heads ({heads}) must be divisible by "
                f"tensor parallel size ({tp}).")
        assert tp > 0, "tensor parallel size must be positive, got %d" % tp
        msg = "Model architectures {} are not supported for now.".format(self.arch)
        if not self.ok:
            raise NotImplementedError(msg)
        else:
            raise RuntimeError("Unexpected engine state: " + self.state + " while verifying")
        assert self.hf_config is not None and self.hf_text is not None
        try:
            self.load()
        except OSError:
            logger.error("Failed to load the model config from %s (revision %s)", self.path, 1)
        raise ValueError(self.reason)   # no literal text: skipped
        raise ValueError("Bad")          # too short to recognise: skipped
        raise KeyError                   # no message: skipped
"""

BROKEN_PY = "def broken(:\n"


def make_wheel(root: Path, version: str, files: dict[str, str]) -> Path:
    path = root / f"vllm-{version}-cp38-abi3-manylinux1_x86_64.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(f"vllm/{name}", text)
        wheel.writestr(f"vllm-{version}.dist-info/METADATA", f"Name: vllm\nVersion: {version}\n")
    return path


@pytest.fixture
def releases(tmp_path):
    make_wheel(tmp_path, "0.1.0", {"config.py": CONFIG_PY, "broken.py": BROKEN_PY})
    # 0.2.0 moves the heads check into another function and rewords the arch message
    moved = CONFIG_PY.replace("def verify(self, tp, heads)", "def verify_parallel(self, tp, heads)")
    moved = moved.replace("are not supported for now.", "are not supported yet.")
    make_wheel(tmp_path, "0.2.0", {"config.py": moved})
    return find_releases(tmp_path)


def test_templates_classes_sites_and_conditions(releases):
    found = extractor.extract(releases[0])
    heads = found[
        "ValueError: Total number of attention heads ({*}) must be divisible by tensor parallel size ({*})."
    ]
    assert heads["sites"] == [["config.py", "ModelConfig.verify", "heads % tp != 0"]]
    # an assert's condition is its test; % placeholders become wildcards
    assert (
        found["AssertionError: tensor parallel size must be positive, got{*}"]["sites"][0][2]
        == "tp > 0"
    )
    # a message built in a local variable with .format; the else branch of an if is "not (...)"
    assert "NotImplementedError: Model architectures{*}are not supported for now." in found
    concat = found["RuntimeError: Unexpected engine state:{*}while verifying"]
    assert concat["sites"][0][2] == "self.ok"
    logged = found["log.error: Failed to load the model config from{*}(revision{*})"]
    assert logged["sites"][0][2] == "except OSError"
    # an assert without a message is kept by its source line, as the traceback prints it
    assert "AssertionError: assert self.hf_config is not None and self.hf_text is not None" in found


def test_what_cannot_be_extracted_is_counted(releases):
    extractor.extract(releases[0])
    skipped = extractor.SKIPPED["0.1.0"]
    assert skipped["message not a string template"] == 1  # ValueError(self.reason)
    assert skipped[f"no literal part of {extractor.MIN_LITERAL}+ characters"] == 1  # "Bad"
    assert skipped["raise without a message"] == 1  # raise KeyError
    assert skipped["file does not parse"] == 1  # broken.py: fewer keys, never a crash


def test_keys_stay_stable_across_releases_and_locations_go_into_spans(releases):
    data = table(extractor.KIND, {str(r.version): extractor.extract(r) for r in releases})
    heads = data["entries"][
        "ValueError: Total number of attention heads ({*}) must be divisible by "
        "tensor parallel size ({*})."
    ]
    # same message, new function: one key, two spans
    assert [(s["first"], s["last"]) for s in heads] == [("0.1.0", "0.1.0"), ("0.2.0", "0.2.0")]
    assert heads[1]["value"]["sites"][0][1] == "ModelConfig.verify_parallel"
    # a reworded message is another key, with its own releases
    assert (
        data["entries"]["NotImplementedError: Model architectures{*}are not supported yet."][0][
            "first"
        ]
        == "0.2.0"
    )


def test_normalise_merges_whitespace_around_placeholders():
    assert extractor.normalise("x:  {*}  {*} y\n  z") == "x:{*}y z"
    assert extractor.normalise("got %s".replace("%s", "{*}")) == "got{*}"


def test_a_local_message_variable_inside_an_f_string_is_inlined(tmp_path):
    # vllm/config.py (0.10.0): msg = (f"User-specified max_model_len ({max_model_len}) ...")
    # then raise ValueError(f"{msg} To allow overriding this maximum, ...")
    source = """
def verify(max_model_len, derived):
    if max_model_len > derived:
        msg = (f"User-specified max_model_len ({max_model_len}) is greater "
               f"than the derived max_model_len ({derived}).")
        raise ValueError(f"{msg} To allow overriding this maximum, set "
                         "the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
"""
    make_wheel(tmp_path, "0.3.0", {"config.py": source})
    found = extractor.extract(find_releases(tmp_path)[0])
    assert (
        "ValueError: User-specified max_model_len ({*}) is greater than the derived max_model_len "
        "({*}). To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
    ) in found


def test_a_variable_assigned_in_several_branches_stays_a_placeholder(tmp_path):
    # vllm/v1/core/kv_cache_utils.py (0.9.1): estimated_msg is "" or a sentence
    source = """
def check(needed, available, estimated):
    estimated_msg = ""
    if estimated > 0:
        estimated_msg = f"Based on the available memory, the estimated maximum model length is {estimated}."
    raise ValueError(f"KV cache is needed ({needed}), larger than the available memory ({available}). "
                     f"{estimated_msg} Try increasing `gpu_memory_utilization`.")
"""
    make_wheel(tmp_path, "0.4.0", {"kv.py": source})
    found = extractor.extract(find_releases(tmp_path)[0])
    assert (
        "ValueError: KV cache is needed ({*}), larger than the available memory ({*}).{*}"
        "Try increasing `gpu_memory_utilization`."
    ) in found


def test_the_api_servers_error_replies_are_catalogued(tmp_path):
    # vllm/entrypoints/openai/serving_chat.py (0.8.0): the reply a client gets for tool_choice
    source = """
class OpenAIServingChat:
    async def create_chat_completion(self, request):
        if request.tool_choice == "auto" and not self.enable_auto_tools:
            return self.create_error_response(
                "\\"auto\\" tool choice requires "
                "--enable-auto-tool-choice and --tool-call-parser to be set")
        if request.n > self.max_n:
            return self.create_error_response(message=f"n={request.n} is above the limit of {self.max_n} choices")
        return self.create_error_response("Too short")  # too short to recognise: skipped
"""
    make_wheel(tmp_path, "0.3.0", {"entrypoints/openai/serving_chat.py": source})
    found = extractor.extract(find_releases(tmp_path)[0])
    key = 'response: "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    assert found[key]["sites"] == [
        [
            "entrypoints/openai/serving_chat.py",
            "OpenAIServingChat.create_chat_completion",
            "request.tool_choice == 'auto' and (not self.enable_auto_tools)",
        ]
    ]
    assert (
        "response: n={*}is above the limit of{*}choices" in found
    )  # spaces go with the placeholder
    assert not [k for k in found if "Too short" in k]


def test_an_exception_class_that_gives_its_own_message_is_catalogued(tmp_path):
    # vllm/v1/engine/exceptions.py: EngineDeadError sets its message in __init__
    source = """
class EngineDeadError(Exception):
    def __init__(self, *args, suppress_context: bool = False, **kwargs):
        ENGINE_DEAD_MESSAGE = "EngineCore encountered an issue. See stack trace (above) for the root cause."
        super().__init__(ENGINE_DEAD_MESSAGE, *args, **kwargs)


class Helper:
    def __init__(self, name):
        super().__init__("not an exception, not a message users see")
"""
    make_wheel(tmp_path, "0.3.0", {"v1/engine/exceptions.py": source})
    found = extractor.extract(find_releases(tmp_path)[0])
    key = "EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause."
    assert found[key]["sites"] == [["v1/engine/exceptions.py", "EngineDeadError.__init__", ""]]
    assert not [k for k in found if "not an exception" in k]


def test_an_exception_built_into_a_variable_then_raised_is_catalogued(tmp_path):
    # vllm/v1/executor/multiproc_executor.py (0.9.0-0.33.0): e = Exception("WorkerProc ...")
    # a few lines above `raise e from None` (bench/explain/logs-2/44411.log shows the message)
    source = """
class WorkerProc:
    @staticmethod
    def wait_for_ready(handles):
        e = Exception("WorkerProc initialization failed due to "
                      "an exception in a background process. "
                      "See stack trace for root cause.")
        for handle in handles:
            if handle.status != "READY":
                raise e from None
        try:
            handle.wait()
        except OSError as err:
            raise err   # the caught exception: no message of its own here
        holder = make_holder("not an exception, not a message users see")
        raise holder
"""
    make_wheel(tmp_path, "0.3.0", {"v1/executor/multiproc_executor.py": source})
    found = extractor.extract(find_releases(tmp_path)[0])
    key = (
        "Exception: WorkerProc initialization failed due to an exception in a background process. "
        "See stack trace for root cause."
    )
    assert found[key]["sites"] == [
        [
            "v1/executor/multiproc_executor.py",
            "WorkerProc.wait_for_ready",
            "handle.status != 'READY'",
        ]
    ]
    assert not [k for k in found if "not an exception" in k]
