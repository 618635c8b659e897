"""vLLM's offline engine pasted as Python, ``LLM(model=..., tensor_parallel_size=2)``, read as the
serve line its keywords amount to (serveline/python_call.py): parsed, never executed."""

from __future__ import annotations

import json

import pytest
from doctor_forks import doctor_run

from vllm_doctor.errors import InputError
from vllm_doctor.serveline.command import parse_serve_string
from vllm_doctor.serveline.python_call import llm_call_words

# vLLM's docs, "Distributed inference and serving"
# (https://docs.vllm.ai/en/stable/serving/parallelism_scaling.html), as published
DOCS_TP = """from vllm import LLM
llm = LLM("facebook/opt-13b", tensor_parallel_size=4)
output = llm.generate("San Francisco is a")"""


def test_the_docs_script_is_its_serve_line():
    line = parse_serve_string(DOCS_TP)
    assert line.model == "facebook/opt-13b"
    assert line.options["tensor-parallel-size"] == 4
    assert line.unknown_flags == []


@pytest.mark.parametrize(
    ("source", "words"),
    [
        (
            'LLM(model="m", enforce_eager=True, enable_prefix_caching=False, max_model_len=None)',
            # True: the flag; False: the --no- form of a boolean option; None: the default
            ["vllm", "serve", "m", "--enforce-eager", "--no-enable-prefix-caching"],
        ),
        (
            'vllm.LLM(model="m", speculative_config={"method": "ngram", "num_speculative_tokens": 4})',
            ["vllm", "serve", "m", "--speculative-config",
             '{"method": "ngram", "num_speculative_tokens": 4}'],
        ),
        # a REPL paste
        (">>> llm = LLM(model='m',\n...           dtype='half')", ["vllm", "serve", "m", "--dtype", "half"]),
    ],
)  # fmt: skip
def test_keywords_become_the_options_of_the_same_name(source, words):
    from vllm_doctor.serveline.python_call import llm_call_source

    assert llm_call_words(llm_call_source(source)) == (words, {})


def test_a_keyword_that_is_not_a_literal_leaves_its_facts_unknown_not_default():
    run = doctor_run(
        "check", "--format", "json", "--offline", "--no-config", "--elsewhere",
        "--fail-on", "never", "--serve",
        'import os\nllm = LLM(model="m", tensor_parallel_size=int(os.environ["TP"]))',
        timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)["facts"]
    assert "serve.tensor_parallel_size" not in doc["facts"]
    assert "not a literal" in doc["missing"]["serve.tensor_parallel_size"]
    assert "serve.world_size" in doc["missing"]
    assert doc["facts"]["serve.model"]["value"] == "m"


def test_python_c_is_read_as_its_code():
    line = parse_serve_string(
        'python -c "from vllm import LLM; LLM(model=\\"Qwen/Qwen3-8B\\", tensor_parallel_size=2)"'
    )
    assert (line.model, line.options["tensor-parallel-size"]) == ("Qwen/Qwen3-8B", 2)


def test_python_c_after_the_double_dash_is_read_as_its_code():
    # `vllm-doctor check -- python -c "..."`: the shell's words, not a vLLM option `-c`
    from vllm_doctor.serveline.parser import parse_serve_argv

    code = 'from vllm import LLM; LLM(model="Qwen/Qwen3-8B", tensor_parallel_size=2, seed=s)'
    line = parse_serve_argv(["/usr/bin/python3.12", "-c", code])
    assert (line.model, line.options["tensor-parallel-size"]) == ("Qwen/Qwen3-8B", 2)
    assert "not a literal" in line.not_read["seed"]
    with pytest.raises(InputError):  # python -c without vLLM's LLM(...) is no serve line
        parse_serve_argv(["python", "-c", "print(1)"])


def test_the_call_is_never_executed(tmp_path):
    marker = tmp_path / "ran"
    # a call in a keyword is not a literal: it is named, never run
    line = parse_serve_string(f'LLM(model="m", seed=open("{marker}", "w").write("x"))')
    assert not marker.exists()
    assert "seed" in line.not_read


@pytest.mark.parametrize(
    ("source", "said"),
    [("LLM(model='m', **cfg)", r"keywords of a \*\* mapping"), ("LLM(model='m'", "not closed")],
)
def test_a_call_that_cannot_be_read_is_one_clear_error(source, said):
    with pytest.raises(InputError, match=said):
        parse_serve_string(source)


@pytest.mark.parametrize(
    "source",
    [
        "LLM(model=" + "[" * 5000 + "]" * 5000 + ")",  # nested past the parser's depth
        "LLM(model='m', x=" + "-" * 20000 + "1)",  # a literal too deep to evaluate
        "LLM(model='m\x00')",
    ],
)
def test_hostile_python_is_one_clear_error_or_a_value_not_read(source):
    try:
        line = parse_serve_string(source)
    except InputError:
        return
    assert line.model in (None, "m")
