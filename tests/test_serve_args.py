"""The serve-line parser: vLLM's conventions, --config files, facts, rendering, bad input."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from vllm_doctor.errors import InputError
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.schema import is_known_path
from vllm_doctor.serve_args import (
    OPTIONS,
    human_readable_int,
    load_serve_config,
    option_spec,
    parse_serve_argv,
    parse_serve_string,
    render_command,
)

FIXTURES = Path(__file__).parent / "fixtures" / "serve"


def facts_of(text: str, **kwargs) -> Facts:
    facts = Facts()
    parse_serve_string(text).to_facts(facts, **kwargs)
    return facts


# -- command shapes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "words",
    [
        ["vllm", "serve", "org/m", "-tp", "2"],
        ["/opt/venv/bin/vllm", "serve", "org/m", "-tp", "2"],
        ["serve", "org/m", "-tp", "2"],
        ["org/m", "-tp", "2"],
        ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "org/m", "-tp", "2"],
        ["vllm", "serve", "-tp", "2", "--model", "org/m"],
        ["vllm", "serve", "-tp", "2", "--model=org/m"],
    ],
)
def test_command_shapes(words):
    line = parse_serve_argv(words)
    assert line.model == "org/m"
    assert line.options == {"tensor-parallel-size": 2}
    assert line.unknown_flags == []


def test_tokens_are_the_words_after_vllm_serve():
    line = parse_serve_argv(["vllm", "serve", "org/m", "--port", "8001"])
    assert line.tokens == ["org/m", "--port", "8001"]
    assert line.given["model"] == "org/m"


def test_model_option_is_moved_and_warned():
    line = parse_serve_argv(["vllm", "serve", "-tp", "2", "--model", "org/m", "--port", "8001"])
    assert line.given["model"] == "--model org/m"
    assert any("--model is deprecated" in w for w in line.warnings)
    assert line.options == {"tensor-parallel-size": 2, "port": 8001}


def test_env_words_in_front():
    line = parse_serve_string("CUDA_VISIBLE_DEVICES=0,1 VLLM_USE_V1=1 vllm serve org/m")
    assert line.env == {"CUDA_VISIBLE_DEVICES": "0,1", "VLLM_USE_V1": "1"}
    assert line.model == "org/m"


def test_line_continuations_and_quotes():
    text = (
        "vllm serve org/m \\\n    --tensor-parallel-size 2 \\\n"
        '    --speculative-config \'{"method": "mtp", "num_speculative_tokens": 1}\'\n'
    )
    line = parse_serve_string(text)
    assert line.options["tensor-parallel-size"] == 2
    assert line.options["speculative-config"] == {"method": "mtp", "num_speculative_tokens": 1}


# -- normalisation -------------------------------------------------------------------------


def test_underscores_and_equals():
    line = parse_serve_string(
        "vllm serve m --max_model_len=4096 --tensor_parallel_size 2 --gpu_memory_utilization=0.8"
    )
    assert line.options == {
        "max-model-len": 4096,
        "tensor-parallel-size": 2,
        "gpu-memory-utilization": 0.8,
    }
    assert line.given["max-model-len"] == "--max_model_len=4096"


@pytest.mark.parametrize(
    "text, value",
    [
        ("32k", 32000),
        ("1K", 1024),
        ("2M", 2 * 2**20),
        ("25.6k", 25600),
        ("4096", 4096),
        ("1g", 10**9),
    ],
)
def test_human_readable_ints(text, value):
    assert human_readable_int(text) == value
    line = parse_serve_argv(["m", "--max-model-len", text, "--max-num-batched-tokens", text])
    assert line.options["max-model-len"] == value
    assert line.options["max-num-batched-tokens"] == value


def test_decimal_with_binary_suffix_is_not_read():
    line = parse_serve_argv(["m", "--max-model-len", "1.5K"])
    assert "did you mean 1.5k" in line.unread["max-model-len"]


def test_max_model_len_auto():
    line = parse_serve_argv(["m", "--max-model-len", "auto"])
    assert line.options["max-model-len"] == -1
    facts = Facts()
    line.to_facts(facts)
    assert "serve.max_model_len" not in facts
    assert "auto" in facts.why_missing("serve.max_model_len")
    # only --max-model-len reads "auto"
    assert (
        "integer"
        in parse_serve_argv(["m", "--max-num-batched-tokens", "auto"]).unread[
            "max-num-batched-tokens"
        ]
    )


@pytest.mark.parametrize("words", [["-O3"], ["-O", "3"], ["-O=3"], ["--optimization-level", "3"]])
def test_optimization_level_forms(words):
    line = parse_serve_argv(["m", *words])
    assert line.options == {"optimization-level": "3"}


def test_O_with_a_word():
    assert parse_serve_argv(["m", "-Odecode"]).options == {"optimization-level": "decode"}


# -- dotted keys -----------------------------------------------------------------------------


def test_dotted_keys_merge_into_one_dict():
    line = parse_serve_string(
        "vllm serve m --speculative-config.method mtp "
        "--speculative-config.num_speculative_tokens=1 "
        "--compilation-config.pass_config.fuse_allreduce_rms true "
        "-cc.cudagraph_mode FULL_DECODE_ONLY"
    )
    assert line.options["speculative-config"] == {"method": "mtp", "num_speculative_tokens": 1}
    assert line.options["compilation-config"] == {"cudagraph_mode": "FULL_DECODE_ONLY"}
    assert line.duplicates == ["compilation-config"]  # --compilation-config.x and -cc.y


def test_dotted_nested_and_human_values():
    line = parse_serve_string(
        "vllm serve m --compilation-config.pass_config.fuse_allreduce_rms true "
        "--compilation-config.pass_config.enable_sp false --kv-transfer-config.cpu_bytes 80g"
    )
    assert line.options["compilation-config"] == {
        "pass_config": {"fuse_allreduce_rms": True, "enable_sp": False}
    }
    assert line.options["kv-transfer-config"] == {"cpu_bytes": 80 * 10**9}


def test_dotted_list_append():
    line = parse_serve_string(
        "vllm serve m --compilation-config.cudagraph_capture_sizes+ 1 "
        "--compilation-config.cudagraph_capture_sizes+=2,4"
    )
    # vLLM splits on commas and keeps the pieces as strings
    assert line.options["compilation-config"] == {"cudagraph_capture_sizes": ["1", "2", "4"]}


def test_dotted_keys_replace_an_explicit_json_value():
    line = parse_serve_string(
        "vllm serve m --compilation-config '{\"level\": 3}' "
        "--compilation-config.cudagraph_mode FULL"
    )
    assert line.options["compilation-config"] == {"cudagraph_mode": "FULL"}
    assert "compilation-config" in line.duplicates


def test_duplicate_dotted_key():
    line = parse_serve_string(
        "vllm serve m --speculative-config.method mtp --speculative-config.method ngram"
    )
    assert line.options["speculative-config"] == {"method": "ngram"}
    assert "speculative-config.method" in line.duplicates


# -- JSON options ------------------------------------------------------------------------------


def test_bad_json_names_the_option():
    line = parse_serve_string("vllm serve m --speculative-config '{method: mtp}'")
    assert line.unread["speculative-config"].startswith("invalid JSON: ")
    facts = Facts()
    line.to_facts(facts)
    # what the value would set is not known: not "no speculative decoding"
    assert "serve.speculative_method" not in facts
    assert "invalid JSON" in facts.why_missing("serve.speculative_method")
    with pytest.raises(InputError) as err:  # too long to be a JSON value at all
        parse_serve_argv(["m", "--speculative-config", "{" + "x" * 70_000])
    assert err.value.source == "--speculative-config"
    assert err.value.problem.startswith("invalid JSON: ")


def test_compilation_config_bare_number_is_the_level():
    assert parse_serve_argv(["m", "-cc", "3"]).options["compilation-config"] == {"level": 3}


def test_hf_overrides_may_be_a_string_but_an_object_must_be_json():
    assert (
        parse_serve_argv(["m", "--hf-overrides", "my.module:fn"]).options["hf-overrides"]
        == "my.module:fn"
    )
    assert (
        "invalid JSON" in parse_serve_argv(["m", "--hf-overrides", "{bad}"]).unread["hf-overrides"]
    )


def test_json_human_readable_numbers_inside_json():
    line = parse_serve_argv(["m", "--kv-transfer-config", '{"cpu_bytes_to_use": 80m}'])
    assert line.options["kv-transfer-config"] == {"cpu_bytes_to_use": 80_000_000}


# -- flags -------------------------------------------------------------------------------------


def test_boolean_flags():
    line = parse_serve_argv(
        [
            "m",
            "--enforce-eager",
            "--no-enable-prefix-caching",
            "--trust-remote-code",
            "--disable-log-stats",
        ]
    )
    assert line.options == {
        "enforce-eager": True,
        "enable-prefix-caching": False,
        "trust-remote-code": True,
        "disable-log-stats": True,
    }


def test_boolean_flag_takes_no_value():
    with pytest.raises(InputError) as err:
        parse_serve_argv(["m", "--enforce-eager=true"])
    assert err.value.source == "--enforce-eager"


def test_store_true_flag_has_no_negative_form():
    line = parse_serve_argv(["m", "--no-headless"])
    assert line.unknown_flags == ["--no-headless"]


def test_enable_disable_inverse():
    line = parse_serve_argv(["m", "--disable-prefix-caching"])
    assert line.options == {"enable-prefix-caching": False}
    assert any("inverse" in w for w in line.warnings)


def test_unique_abbreviation_like_argparse():
    line = parse_serve_argv(["m", "--max-model", "4096"])
    assert line.options == {"max-model-len": 4096}
    line = parse_serve_argv(["m", "--max-num", "8"])  # ambiguous: unknown
    assert line.unknown_flags == ["--max-num 8"]


def test_list_options_take_every_value():
    line = parse_serve_argv(["m", "--served-model-name", "a", "b", "-tp", "2"])
    assert line.options["served-model-name"] == ["a", "b"]
    assert line.given["served-model-name"] == "--served-model-name a b"


def test_long_alias():
    line = parse_serve_argv(["m", "--device-memory-utilization", "0.7"])
    assert line.options == {"gpu-memory-utilization": 0.7}


@pytest.mark.parametrize(
    "alias, name",
    [
        ("-tp", "tensor-parallel-size"),
        ("-pp", "pipeline-parallel-size"),
        ("-dp", "data-parallel-size"),
        ("-dpl", "data-parallel-size-local"),
        ("-dpa", "data-parallel-address"),
        ("-dpn", "data-parallel-rank"),
        ("-dpr", "data-parallel-start-rank"),
        ("-dcp", "decode-context-parallel-size"),
        ("-pcp", "prefill-context-parallel-size"),
        ("-n", "nnodes"),
        ("-r", "node-rank"),
        ("-q", "quantization"),
        ("-cc", "compilation-config"),
        ("-ac", "attention-config"),
    ],
)
def test_short_aliases(alias, name):
    spec = option_spec(alias)
    assert spec is not None and spec.name == name
    value = {"json": '{"a": 1}', "str": "x"}.get(spec.kind, "2")
    line = parse_serve_argv(["m", alias, value])
    assert name in line.options
    assert line.given[name] == f"{alias} {value}"


def test_short_alias_with_equals():
    assert parse_serve_argv(["m", "-tp=4"]).options == {"tensor-parallel-size": 4}


def test_option_table_is_consistent():
    assert len(OPTIONS) > 250
    for name, spec in OPTIONS.items():
        assert spec.name == name
        assert spec.kind in (
            "bool",
            "flag",
            "bool_or_str",
            "int",
            "hrint",
            "float",
            "str",
            "list",
            "json",
            "json_or_str",
            "append",
        ), name
    assert OPTIONS["max-model-len"].kind == "hrint"
    assert OPTIONS["enforce-eager"].kind == "bool"
    assert OPTIONS["speculative-config"].kind == "json"
    assert OPTIONS["task"].legacy


# -- unknown and legacy --------------------------------------------------------------------------


def test_unknown_flags_are_kept_verbatim():
    line = parse_serve_argv(["m", "--foo", "bar", "--baz", "--qux=1", "-tp", "2"])
    assert line.unknown_flags == ["--foo bar", "--baz", "--qux=1"]
    assert line.options == {"tensor-parallel-size": 2}


def test_legacy_flags():
    line = parse_serve_string(
        "vllm serve m --speculative-model org/draft --num-speculative-tokens 5 --task generate"
    )
    assert line.legacy_flags == ["--speculative-model", "--num-speculative-tokens", "--task"]
    assert line.options["num-speculative-tokens"] == 5
    assert line.unknown_flags == []


def test_duplicates_last_wins():
    line = parse_serve_argv(
        [
            "m",
            "-tp",
            "2",
            "--max-model-len",
            "4096",
            "--tensor-parallel-size",
            "4",
            "--max-model-len",
            "8192",
        ]
    )
    assert line.options == {"tensor-parallel-size": 4, "max-model-len": 8192}
    assert sorted(line.duplicates) == ["max-model-len", "tensor-parallel-size"]
    assert line.given["max-model-len"] == "--max-model-len 8192"


def test_stray_positional():
    line = parse_serve_argv(["m", "--enforce-eager", "extra"])
    assert line.unknown_flags == ["extra"]


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, source, fragment",
    [
        ("", "serve line", "empty"),
        ("   ", "serve line", "empty"),
        ("vllm serve", "serve line", "no model"),
        ("vllm serve m --max-model-len 'unbalanced", "serve line", "cannot split"),
        ("vllm serve m -x 3", "-x", "unknown short option"),
        ("vllm serve m --max-model-len", "--max-model-len", "expected one argument"),
        ("vllm serve m --max-model-len --enforce-eager", "--max-model-len", "expected one"),
        ("vllm serve m --served-model-name", "--served-model-name", "at least one"),
        ("vllm serve --model", "--model", "expected one argument"),
        ("vllm bench serve m", "serve line", "not a `vllm serve` line"),
        ("vllm serve m --config", "--config", "no config file"),
        ("vllm serve m --config a.yaml --config b.yaml", "--config", "more than one"),
        ("vllm serve m --config settings.json", "--config", ".yaml or .yml"),
        ("vllm serve m --config /nonexistent/dir/x.yaml", "--config", "no such file"),
    ],
)
def test_bad_input(text, source, fragment):
    with pytest.raises(InputError) as err:
        parse_serve_string(text)
    assert err.value.source == source
    assert fragment in err.value.problem
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "text, option, fragment, fact",
    [
        ("vllm serve m -tp two", "tensor-parallel-size", "integer", "serve.tensor_parallel_size"),
        ("vllm serve m --max-model-len 12abc", "max-model-len", "integer", "serve.max_model_len"),
        (
            "vllm serve m --gpu-memory-utilization lots",
            "gpu-memory-utilization",
            "number",
            "serve.gpu_memory_utilization",
        ),
        ("vllm serve m --max-model-len 1.5K", "max-model-len", "1.5k", "serve.max_model_len"),
        (
            "vllm serve m --max-num-batched-tokens auto",
            "max-num-batched-tokens",
            "integer",
            "serve.max_num_batched_tokens",
        ),
    ],
)
def test_a_value_no_covered_release_reads_is_kept_not_bad_input(text, option, fragment, fact):
    # issue 29: what no covered release reads a newer one may; each release judges it
    # (ARGS101 with a known release, ARGS102 without one), never exit 2
    line = parse_serve_string(text)
    assert fragment in line.unread[option]
    assert line.options[option] == text.split()[-1]  # kept as written
    facts = Facts()
    line.to_facts(facts)
    assert fact not in facts
    assert "no covered vLLM release reads this value" in facts.why_missing(fact)


@pytest.mark.parametrize(
    "text, source, fragment",
    [
        ("vllm serve m -tp 0", "-tp", "out of range"),
        ("vllm serve m -tp 1e20", "-tp", "out of range"),
        ("vllm serve m --max-model-len " + "9" * 5000, "--max-model-len", "out of range"),
        ("vllm serve m --gpu-memory-utilization inf", "--gpu-memory-utilization", "finite"),
    ],
)
def test_a_number_out_of_range_stays_bad_input(text, source, fragment):
    with pytest.raises(InputError) as err:
        parse_serve_string(text)
    assert err.value.source == source
    assert fragment in err.value.problem


def test_bad_token_list():
    with pytest.raises(InputError):
        parse_serve_argv([])
    with pytest.raises(InputError):
        parse_serve_argv(["m", 3])  # type: ignore[list-item]


# -- --config ----------------------------------------------------------------------------------


def test_config_file_precedence_and_conversion():
    line = parse_serve_argv(["vllm", "serve", "--config", "serve.yaml", "-tp", "8"], cwd=FIXTURES)
    assert line.model == "deepseek-ai/DeepSeek-V3.2"
    assert line.options["tensor-parallel-size"] == 8  # command line beats the file
    assert line.origins["tensor-parallel-size"] == "cli"
    assert line.options["max-model-len"] == 32000
    assert line.options["enforce-eager"] is True
    assert line.options["enable-prefix-caching"] is False
    assert (
        "trust-remote-code" not in line.options
    )  # `trust_remote_code: false`: no --no-trust_remote_code
    assert line.options["served-model-name"] == ["dsv32", "deepseek"]
    assert line.options["compilation-config"] == {
        "cudagraph_mode": "piecewise",
        "pass_config": {"fuse_allreduce_rms": True},
    }
    assert line.origins["compilation-config"] == "config"
    assert line.given["port"] == "serve.yaml:19: port: 8001"  # the key's line


def test_positional_model_beats_config_model():
    line = parse_serve_argv(["vllm", "serve", "org/other", "--config", "serve.yaml"], cwd=FIXTURES)
    assert line.model == "org/other"
    assert line.given["model"] == "org/other"


def test_load_serve_config():
    line = load_serve_config(FIXTURES / "serve.yaml")
    assert line.model == "deepseek-ai/DeepSeek-V3.2"
    assert line.options["tensor-parallel-size"] == 4


def test_config_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("tensor-parallel-size: [1, 2\n")
    with pytest.raises(InputError, match="not valid YAML"):
        parse_serve_argv(["m", "--config", str(bad)])
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just a string\n")
    with pytest.raises(InputError, match="mapping"):
        parse_serve_argv(["m", "--config", str(scalar)])
    binary = tmp_path / "bin.yml"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(InputError):
        parse_serve_argv(["m", "--config", str(binary)])
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert parse_serve_argv(["m", "--config", str(empty)]).options == {}


def test_config_equals_form_is_not_loaded_by_vllm():
    line = parse_serve_argv(["m", "--config=serve.yaml"], cwd=FIXTURES)
    assert line.options == {"config": "serve.yaml"}
    assert any("--config=FILE" in w for w in line.warnings)


# -- facts ---------------------------------------------------------------------------------------


def test_facts_defaults_and_given_values():
    facts = facts_of("vllm serve org/m -tp 2 --max-model-len 32k --kv-cache-dtype fp8")
    tp = facts.get("serve.tensor_parallel_size")
    assert (tp.value, tp.source, tp.detail) == (2, Source.SERVE, "-tp 2")
    assert facts.value("serve.max_model_len") == 32000
    assert facts.value("serve.kv_cache_dtype") == "fp8"
    pp = facts.get("serve.pipeline_parallel_size")
    assert (pp.value, pp.source) == (1, Source.DEFAULT)
    assert facts.get("serve.enforce_eager").value is False
    assert facts.get("serve.dtype").value == "auto"
    assert facts.value("serve.world_size") == 2
    assert facts.value("serve.model") == "org/m"
    assert facts.value("serve.flags") == ["kv-cache-dtype", "max-model-len", "tensor-parallel-size"]
    # not given: absent (the serve line is known), not missing — rules read that as "not set"
    for path in ("serve.quantization", "serve.speculative_method"):
        assert path not in facts and facts.why_missing(path) is None
    for path in list(facts.values) + list(facts.missing):
        assert is_known_path(path), path


def test_world_size_counts_pipeline_and_prefill_context():
    facts = facts_of("vllm serve m -tp 2 -pp 2 -pcp 2")
    assert facts.value("serve.world_size") == 8
    assert facts.get("serve.world_size").source == Source.DERIVED


@pytest.mark.parametrize(
    "version, expected", [("0.19.1", 0.9), ("0.23.1rc1.dev20+g0d8097964", 0.92), (None, 0.92)]
)
def test_gpu_memory_utilization_default_depends_on_version(version, expected):
    facts = Facts()
    if version:
        facts.set("vllm.version", version, Source.REPORT)
    parse_serve_argv(["m"]).to_facts(facts)
    fact = facts.get("serve.gpu_memory_utilization")
    assert fact.value == expected and fact.source == Source.DEFAULT


def test_speculative_facts_from_dotted_and_spec_flags():
    facts = facts_of(
        "vllm serve m --speculative-config.method=mtp --speculative-config.num_speculative_tokens=3"
    )
    assert facts.value("serve.speculative_method") == "mtp"
    assert facts.value("serve.num_speculative_tokens") == 3
    assert "serve.speculative_model" not in facts
    facts = facts_of("vllm serve m --spec-method eagle3 --spec-model org/draft --spec-tokens 4")
    assert facts.value("serve.speculative_config") == {
        "method": "eagle3",
        "model": "org/draft",
        "num_speculative_tokens": 4,
    }
    assert facts.value("serve.speculative_model") == "org/draft"


def test_speculative_config_dash_keys_are_normalised():
    facts = facts_of(
        'vllm serve m --speculative-config \'{"num-speculative-tokens": 2, "method": "ngram"}\''
    )
    assert facts.value("serve.num_speculative_tokens") == 2


@pytest.mark.parametrize(
    "text, mode, source",
    [
        ("vllm serve m -cc.cudagraph_mode=full_decode_only", "FULL_DECODE_ONLY", Source.SERVE),
        ("vllm serve m --compilation-config '{\"full_cuda_graph\": true}'", "FULL", Source.SERVE),
        ("vllm serve m --enforce-eager", "NONE", Source.DERIVED),
        ("vllm serve m --enforce-eager -cc.cudagraph_mode FULL", "NONE", Source.DERIVED),
        ("vllm serve m", None, None),
    ],
)
def test_cudagraph_mode(text, mode, source):
    facts = facts_of(text)
    if mode is None:
        assert "serve.cudagraph_mode" not in facts
        assert facts.why_missing("serve.cudagraph_mode") is None  # absent: vLLM picks it
    else:
        fact = facts.get("serve.cudagraph_mode")
        assert (fact.value, fact.source) == (mode, source)


@pytest.mark.parametrize(
    "text, env, backend, where",
    [
        (
            "vllm serve m --attention-backend FLASHINFER -ac.backend TRITON_ATTN",
            {},
            "FLASHINFER",
            "--attention-backend",
        ),
        (
            "vllm serve m -ac.backend TRITON_ATTN",
            {"VLLM_ATTENTION_BACKEND": "XFORMERS"},
            "TRITON_ATTN",
            "--attention-config",
        ),
        (
            "vllm serve m",
            {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"},
            "FLASH_ATTN",
            "VLLM_ATTENTION_BACKEND",
        ),
        (
            "VLLM_ATTENTION_BACKEND=FLEX_ATTENTION vllm serve m",
            {"VLLM_ATTENTION_BACKEND": "X"},
            "FLEX_ATTENTION",
            "VLLM_ATTENTION_BACKEND",
        ),
    ],
)
def test_attention_backend_precedence(text, env, backend, where):
    facts = facts_of(text, env=env)
    assert facts.value("serve.attention_backend") == backend
    assert facts.value("serve.attention_backend_source") == where


def test_attention_backend_not_given_is_absent():
    facts = facts_of("vllm serve m")
    assert "serve.attention_backend" not in facts
    assert facts.why_missing("serve.attention_backend") is None


def test_config_file_facts_have_the_config_source():
    facts = Facts()
    parse_serve_argv(["vllm", "serve", "--config", "serve.yaml"], cwd=FIXTURES).to_facts(facts)
    fact = facts.get("serve.tensor_parallel_size")
    assert fact.source == Source.SERVE_CONFIG
    assert fact.detail == "serve.yaml:3: tensor-parallel-size: 4"
    assert facts.get("serve.argv").source == Source.SERVE


def test_unknown_and_legacy_facts():
    facts = facts_of("vllm serve m --speculative-model x --frobnicate 3")
    assert facts.value("serve.legacy_flags") == ["--speculative-model"]
    assert facts.value("serve.unknown_flags") == ["--frobnicate 3"]
    facts = facts_of("vllm serve m")
    assert facts.value("serve.legacy_flags") == []


# -- render_command ---------------------------------------------------------------------------------


def roundtrip(command: str):
    return parse_serve_string(command)


def test_render_unchanged_keeps_everything():
    text = "vllm serve org/m -tp 2 --max_model_len=4096 --enforce-eager --foo bar"
    line = parse_serve_string(text)
    assert render_command(line) == text


def test_render_replaces_in_place_keeping_spelling():
    line = parse_serve_string("vllm serve org/m -tp 2 --max_model_len=4096 --port 8000")
    out = render_command(line, changes={"tensor-parallel-size": 1, "max-model-len": 8192})
    assert out == "vllm serve org/m -tp 1 --max_model_len=8192 --port 8000"


def test_render_appends_new_flags_and_bools():
    line = parse_serve_string("vllm serve org/m --no-enforce-eager")
    out = render_command(
        line,
        changes={"enforce-eager": True, "enable-prefix-caching": False, "kv-cache-dtype": "fp8"},
    )
    assert out == (
        "vllm serve org/m --enforce-eager --no-enable-prefix-caching --kv-cache-dtype fp8"
    )


def test_render_removes_flags_in_every_form():
    line = parse_serve_string(
        "vllm serve org/m -tp 2 --tensor-parallel-size=4 --port 1 "
        "--speculative-config.method mtp --speculative-config.num_speculative_tokens 1"
    )
    out = render_command(line, remove=["tensor_parallel_size", "speculative-config"])
    assert out == "vllm serve org/m --port 1"


def test_render_dotted_set_merges_into_json():
    line = parse_serve_string(
        "vllm serve org/m --speculative-config.method mtp "
        "--speculative-config.num_speculative_tokens 1 --port 1"
    )
    out = render_command(line, changes={"speculative-config.num_speculative_tokens": 3})
    assert out == (
        "vllm serve org/m --speculative-config "
        '\'{"method": "mtp", "num_speculative_tokens": 3}\' --port 1'
    )
    again = parse_serve_string(out)
    assert again.options["speculative-config"] == {"method": "mtp", "num_speculative_tokens": 3}


def test_render_moves_model_option_to_positional_and_keeps_env():
    line = parse_serve_string(
        "CUDA_VISIBLE_DEVICES=0 python -m vllm.entrypoints.openai.api_server --port 1 --model org/m"
    )
    assert render_command(line) == "CUDA_VISIBLE_DEVICES=0 vllm serve org/m --port 1"


def test_render_config_value_is_overridden_on_the_command_line():
    line = parse_serve_argv(["vllm", "serve", "--config", "serve.yaml"], cwd=FIXTURES)
    out = render_command(line, changes={"tensor-parallel-size": 2}, remove=["enforce-eager"])
    assert out == "vllm serve --config serve.yaml --tensor-parallel-size 2 --no-enforce-eager"


@pytest.mark.parametrize(
    "text",
    [
        "vllm serve org/m -tp 2 -O3 --max-model-len 32k --served-model-name a b",
        "vllm serve org/m -cc.cudagraph_mode=PIECEWISE --no-enable-prefix-caching --hf-token",
        "vllm serve 'org/m with space' --chat-template '{% if x %}y{% endif %}' --unknown 1",
    ],
)
def test_render_round_trip(text):
    line = parse_serve_string(text)
    for edits in ({}, {"tensor-parallel-size": 4}, {"quantization": "fp8", "enforce-eager": True}):
        again = parse_serve_string(render_command(line, changes=edits))
        expected = dict(line.options)
        expected.update(edits)
        assert again.options == expected
        assert again.model == line.model
        assert again.unknown_flags == line.unknown_flags


def test_render_output_is_shell_safe():
    line = parse_serve_string("vllm serve org/m")
    out = render_command(line, changes={"chat-template": "a b'c", "hf-overrides": {"x": [1, 2]}})
    words = shlex.split(out)
    assert words[-4:] == ["--chat-template", "a b'c", "--hf-overrides", '{"x": [1, 2]}']


@pytest.mark.parametrize(
    "text, options",
    [
        ("vllm serve m -tp 2 > log.txt 2>&1", {"tensor-parallel-size": 2}),
        ("vllm serve m -tp 2 2>&1 | tee log.txt", {"tensor-parallel-size": 2}),
        ("nohup vllm serve m -tp 2 >>out.log 2>>err.log &", {"tensor-parallel-size": 2}),
        ("vllm serve m -tp 2 &> all.log", {"tensor-parallel-size": 2}),
        (
            'vllm serve m --max-model-len 4096 >"my log.txt" && echo started',
            {"max-model-len": 4096},
        ),
        ("vllm serve m --chat-template t.jinja < /dev/null", {"chat-template": "t.jinja"}),
        # quoted, or inside a word that does not start with a file descriptor: not a redirection
        ('vllm serve m --served-model-name "a>b"', {"served-model-name": ["a>b"]}),
        # &> ends the word before it; escapes and quotes in the target; here-strings and
        # here-documents keep the words after them; process substitution as a target
        (
            "vllm serve m --max-model-len 4096&>log --port 8001",
            {"max-model-len": 4096, "port": 8001},
        ),
        ('vllm serve m --port 8000 >log\\"x -tp 2', {"port": 8000, "tensor-parallel-size": 2}),
        ("vllm serve m > my\\ log.txt --max-model-len 4096", {"max-model-len": 4096}),
        (
            'vllm serve m --port 8000 <<< "hi" --max-model-len 4096',
            {"port": 8000, "max-model-len": 4096},
        ),
        ("vllm serve m <<EOF --port 8000", {"port": 8000}),
        ("vllm serve m --port 8000 > >(tee -a vllm.log) 2>&1", {"port": 8000}),
        ("vllm serve m {fd}>log.txt -tp 2", {"tensor-parallel-size": 2}),
        # substitutions: a process substitution is the path the shell passes; a command
        # substitution one word whose value is not known
        ("vllm serve m --chat-template <(cat t.jinja)", {"chat-template": "/dev/fd/63"}),
        (
            "vllm serve m --served-model-name $(hostname -s) -tp 2",
            {"served-model-name": ["$(hostname -s)"], "tensor-parallel-size": 2},
        ),
    ],
)
def test_shell_redirections_are_the_shells_not_vllms(text, options):
    line = parse_serve_string(text)
    assert line.model == "m"
    assert line.options == options
    assert not line.unknown_flags


def test_a_redirection_that_takes_an_options_value_leaves_it_without_one():
    # the shell reads `2>&1` as a redirection, so vLLM sees --max-model-len with no value
    with pytest.raises(InputError, match="expected one argument"):
        parse_serve_string("vllm serve m --max-model-len 2>&1")


def test_a_documentation_placeholder_is_the_model_not_a_redirection():
    line = parse_serve_string("vllm serve <model> --tensor-parallel-size 2")
    assert line.model == "<model>" and line.options == {"tensor-parallel-size": 2}


def test_a_value_form_some_release_reads_is_not_bad_input():
    # 0.8.x reads key=value pairs (nullable_kvs); the newest releases read JSON only
    line = parse_serve_argv(["m", "--limit-mm-per-prompt", "image=5,video=1"])
    assert line.options["limit-mm-per-prompt"] == {"image": 5, "video": 1}
    assert line.raw_values["limit-mm-per-prompt"] == "image=5,video=1"
    # no release reads it: kept, and each release refuses it (ARGS101 / ARGS102)
    assert (
        "invalid JSON"
        in parse_serve_argv(["m", "--limit-mm-per-prompt", "image"]).unread["limit-mm-per-prompt"]
    )


def test_negation_words_come_from_the_release_tables():
    assert parse_serve_argv(["m", "--disable-log-requests"]).options == {
        "enable-log-requests": False
    }
    assert parse_serve_argv(["m", "--no-enable-chunked-prefill"]).options == {
        "enable-chunked-prefill": False
    }
