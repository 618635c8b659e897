"""facts/release.py over the shipped knowledge (generated from the real release wheels),
with real model configs from tests/fixtures/models, and the rules that read the facts."""

from __future__ import annotations

from pathlib import Path

from vllm_doctor.engine.evaluate import APPLIES, NOT_APPLIES, UNDECIDED, evaluate_rule
from vllm_doctor.engine.loader import load_rule_file
from vllm_doctor.facts.collect import CollectOptions, collect_facts

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "tests" / "fixtures" / "models"


def facts_for(serve: str, vllm: str | None = None, model: str | None = None, **kw):
    return collect_facts(
        CollectOptions(
            serve_string=serve,
            vllm_version=vllm,
            probe_machine=False,
            model_config=MODELS / model if model else None,
            **kw,
        )
    )


def verdict(code: str, facts) -> str:
    path = next(REPO.glob(f"rules/*/{code}.yaml"))
    rule, problems = load_rule_file(path)
    assert rule is not None, problems
    return evaluate_rule(rule, facts).verdict


def test_typo_with_a_known_version_is_an_args100_error():
    facts = facts_for("vllm serve m --tensor-parallel-sise 2 --max-model-len 8k", "0.10.0")
    assert facts.value("release.judged") == "0.10.0"
    assert facts.value("release.unaccepted_options") == ["--tensor-parallel-sise"]
    hint = facts.value("release.option_hints")[0]
    assert "no release 0.8.0–0.33.0 accepts it" in hint
    assert hint.endswith("nearest valid spelling --tensor-parallel-size")
    assert facts.value("release.corrected_command") == (
        "vllm serve m --tensor-parallel-size 2 --max-model-len 8k"
    )
    assert verdict("ARGS100", facts) == APPLIES
    assert verdict("ARGS102", facts) == NOT_APPLIES  # ARGS100 speaks for a covered release


def test_typo_without_a_version_is_an_args102_warning():
    facts = facts_for("vllm serve m --tensor-parallel-sise 2")  # no vLLM on this machine
    assert facts.value("release.coverage") == "unknown"
    assert facts.value("release.unknown_options") == ["--tensor-parallel-sise"]
    assert verdict("ARGS102", facts) == APPLIES
    assert verdict("ARGS100", facts) == UNDECIDED


def test_version_outside_coverage_cannot_decide():
    facts = facts_for("vllm serve m --attention-backend FLASH_ATTN", "0.7.3")
    assert facts.value("release.coverage") == "outside"
    assert "older than the oldest release" in facts.why_missing("release.judged")
    assert verdict("ARGS100", facts) == UNDECIDED


def test_option_added_in_a_later_release():
    facts = facts_for("vllm serve m --attention-backend FLASH_ATTN -tp 2", "0.12.0")
    assert facts.value("release.unaccepted_options") == ["--attention-backend"]
    assert "(accepted by 0.13.0–0.33.0)" in facts.value("release.option_hints")[0]
    assert facts.value("release.corrected_command") == "vllm serve m -tp 2"
    assert verdict("ARGS100", facts) == APPLIES
    on_new = facts_for("vllm serve m --attention-backend FLASH_ATTN", "0.13.0")
    assert on_new.value("release.unaccepted_options") == []
    assert verdict("ARGS100", on_new) == NOT_APPLIES


def test_dev_build_is_judged_by_its_release():
    # --attention-backend first shipped in 0.13.0: a 0.12.1 nightly may have it
    facts = facts_for("vllm serve m --attention-backend FLASH_ATTN", "0.12.1.dev20+g0d80979")
    assert facts.value("release.judged") == "0.12.0"
    assert "release.unaccepted_options" not in facts
    assert "0.13.0" in facts.why_missing("release.unaccepted_options")
    # what 0.12.0 and 0.13.0 agree on still holds for it
    assert facts.value("release.cuda_major") == 12


def test_curated_removed_flags_win_over_args100():
    # --swap-space: removed in 0.18.0, explained by ARGS004
    facts = facts_for("vllm serve m --swap-space 16", "0.18.0")
    assert facts.value("release.unaccepted_options") == []
    assert verdict("ARGS004", facts) == APPLIES
    assert verdict("ARGS100", facts) == NOT_APPLIES
    # --cuda-graph-sizes on 0.8.0 is too new, which ARGS004 (removal) does not explain
    old = facts_for("vllm serve m --cuda-graph-sizes 8 16", "0.8.0")
    assert old.value("release.unaccepted_options") == ["--cuda-graph-sizes"]
    assert verdict("ARGS004", old) == NOT_APPLIES


def test_values_outside_choices():
    facts = facts_for("vllm serve m --dtype fp33 --kv-cache-dtype fp8", "0.10.0")
    invalid = facts.value("release.invalid_choices")
    assert len(invalid) == 1 and invalid[0].startswith("--dtype fp33: not among the choices")
    assert verdict("ARGS101", facts) == APPLIES
    ok = facts_for("vllm serve m --dtype bfloat16", "0.33.0")
    assert ok.value("release.invalid_choices") == []
    assert verdict("ARGS101", ok) == NOT_APPLIES


def test_architecture_registration_per_release():
    facts = facts_for("vllm serve google/gemma-4-31B-it", "0.18.0", model="gemma-4-31B-it")
    assert facts.value("release.architecture_registered") is False
    assert facts.value("release.architecture_first_release") == "0.19.0"
    assert facts.value("release.transformers_fallback") is True
    assert verdict("MODEL100", facts) == APPLIES
    assert verdict("MODEL101", facts) == NOT_APPLIES
    strict = facts_for(
        "vllm serve google/gemma-4-31B-it --model-impl vllm", "0.18.0", model="gemma-4-31B-it"
    )
    assert strict.value("release.transformers_fallback") is False
    assert verdict("MODEL101", strict) == APPLIES
    new = facts_for("vllm serve google/gemma-4-31B-it", "0.19.0", model="gemma-4-31B-it")
    assert new.value("release.architecture_registered") is True
    assert verdict("MODEL100", new) == NOT_APPLIES


def test_pins_of_the_judged_release():
    facts = facts_for("vllm serve m", "0.10.0", torch_version="2.13.0+cu130")
    assert facts.value("release.torch_pin") == "2.7.1"
    assert facts.value("release.torch_matches_pin") is False
    assert facts.value("release.torch_pin_from") == "release table"
    assert facts.value("release.cuda_major") == 12
    assert verdict("ENV101", facts) == APPLIES
    pinned = facts_for("vllm serve m", "0.33.0", torch_version="2.14.0+cu130")
    assert pinned.value("release.torch_matches_pin") is True
    assert pinned.value("release.cuda_major") == 13
    assert verdict("ENV101", pinned) == NOT_APPLIES


def test_transformers_range(monkeypatch):
    from vllm_doctor.facts import release
    from vllm_doctor.facts.model import Facts, Source

    facts = Facts()
    facts.set("vllm.version", "0.15.0", Source.USER)
    facts.set("packages.transformers", "5.6.0", Source.REPORT)
    release.collect_release(facts)
    assert facts.value("release.transformers_requirement") == "<5,>=4.56.0"
    assert facts.value("release.transformers_in_range") is False
    assert verdict("ENV100", facts) == APPLIES
    facts.set("packages.transformers", "4.57.1", Source.REPORT)
    release.collect_release(facts)
    assert facts.value("release.transformers_in_range") is True


def test_serve_args_table_comes_from_the_generated_data():
    from vllm_doctor import knowledge
    from vllm_doctor.serve_args import OPTIONS

    table = knowledge.load("options")
    assert set(table.keys()) <= set(OPTIONS)
    # guided-decoding flags were added in a loop in 0.11.x: still accepted there
    assert table.last_release("guided-decoding-backend") == "0.11.2"
    assert OPTIONS["guided-decoding-backend"].until == "0.11.2"
    assert OPTIONS["tensor-parallel-size"].since == "0.8.0"
    assert OPTIONS["tensor-parallel-size"].until is None


def test_architecture_served_by_conversion_is_registered():
    from vllm_doctor.facts import release
    from vllm_doctor.facts.model import Facts, Source

    def judged(version: str) -> Facts:
        facts = Facts()
        facts.set("vllm.version", version, Source.USER)
        facts.set("model.architectures", ["LlamaForSequenceClassification"], Source.CONFIG)
        release.collect_release(facts)
        return facts

    # 0.10.0+: XForSequenceClassification is served by XForCausalLM through an adapter
    assert judged("0.10.0").value("release.architecture_registered") is True
    assert judged("0.33.0").value("release.architecture_registered") is True
    # 0.9.2 had no such conversion: the Transformers fallback would be tried
    old = judged("0.9.2")
    assert old.value("release.architecture_registered") is False
    assert old.value("release.unregistered_architectures") == ["LlamaForSequenceClassification"]


def test_a_dev_build_is_judged_only_where_the_releases_it_may_resemble_agree():
    # --watermark first shipped in 0.24.0: a 0.23.1 nightly may already accept it
    nightly = facts_for("vllm serve m --watermark 0.5", "0.23.1rc1.dev20+g0d8097964")
    assert nightly.value("release.judged") == "0.23.0"
    assert "release.unaccepted_options" not in nightly
    reason = nightly.why_missing("release.unaccepted_options")
    assert "between 0.23.0 and 0.26.0" in reason
    assert "0.23.0: ['--watermark']; 0.24.0–0.26.0: []" in reason
    assert verdict("ARGS100", nightly) == UNDECIDED
    # the release itself does refuse it
    assert verdict("ARGS100", facts_for("vllm serve m --watermark 0.5", "0.23.0")) == APPLIES
    # a typo no release accepts is refused by both ends: still an error for the nightly
    typo = facts_for("vllm serve m --tensor-parallel-sise 2", "0.23.1rc1.dev20+g0d8097964")
    assert verdict("ARGS100", typo) == APPLIES


def test_a_nightly_after_the_newest_covered_release_is_not_judged():
    facts = facts_for("vllm serve m --some-new-flag 1", "0.33.1rc1.dev5+gabc")
    assert "release.judged" not in facts
    assert "may carry changes" in facts.why_missing("release.judged")
    assert verdict("ARGS100", facts) == UNDECIDED


def test_a_what_if_version_does_not_judge_the_packages_installed_here():
    # installing vLLM 0.10.0 brings its pinned torch: this machine's torch says nothing
    facts = facts_for("vllm serve m", "0.10.0")
    assert "release.torch_matches_pin" not in facts
    assert "what-if" in facts.why_missing("release.torch_matches_pin")
    assert verdict("ENV101", facts) == UNDECIDED
    # a torch given as a what-if too is judged
    kept = facts_for("vllm serve m", "0.10.0", torch_version="2.9.0")
    assert kept.value("release.torch_matches_pin") is False
    assert verdict("ENV101", kept) == APPLIES


# -- what a log's "unrecognized arguments" means, by the options table --------------------


def test_refused_options_are_named_with_the_releases_that_accept_them():
    from vllm_doctor.facts.release import refused_option_hints

    words = [
        "--tensor-parallel-sise",
        "2",
        "--guided-decoding-backend",
        "xgrammar",
        "/models/m",
        "--omni",
    ]
    hints = refused_option_hints(words, None)
    assert hints[1] == "--guided-decoding-backend: accepted by 0.8.0–0.11.2"  # in the log's order
    assert (
        "--tensor-parallel-sise: no release 0.8.0–0.33.0 accepts it; nearest valid spelling "
        "--tensor-parallel-size" in hints
    )
    assert "--omni: no release 0.8.0–0.33.0 accepts it" in hints
    # "2" and "xgrammar" are the refused options' values; the path is an extra positional
    assert [h for h in hints if h.startswith("/models/m: not an option")]
    assert not [h for h in hints if h.startswith(("2:", "xgrammar:"))]
    judged = refused_option_hints(words, "0.12.0")
    assert (
        "--guided-decoding-backend: vLLM 0.12.0 does not accept it (accepted by 0.8.0–0.11.2)"
        in judged
    )
    # a release that accepts the option: the log came from somewhere else, and it says so
    assert refused_option_hints(["--max-model-len", "4096"], "0.20.0") == [
        "--max-model-len: vLLM 0.20.0 accepts it (accepted by 0.8.0–0.33.0): the log may come "
        "from another vLLM version or entry point"
    ]


# -- negation forms and value forms, per release's own parser (issue 16) ------------------------


def _unaccepted(serve: str, version: str) -> list[str]:
    return facts_for(serve, version).value("release.unaccepted_options")


def test_negation_forms_come_from_each_release_parser():
    # --disable-log-requests: store_true up to 0.10.0, a deprecated BooleanOptionalAction up
    # to 0.16.0, the EnableDisableAction inverse of --enable-log-requests on 0.33.0
    for version in ("0.8.5", "0.9.2", "0.10.0", "0.10.1", "0.16.0", "0.33.0"):
        assert _unaccepted("vllm serve m --disable-log-requests", version) == [], version
    assert _unaccepted("vllm serve m --disable-log-requests", "0.20.0") == [
        "--disable-log-requests"
    ]
    # a store_true flag has no --no- form; BooleanOptionalAction has
    assert _unaccepted("vllm serve m --no-disable-log-requests", "0.9.2") == [
        "--no-disable-log-requests"
    ]
    assert _unaccepted("vllm serve m --no-disable-log-requests", "0.10.1") == []


def test_no_enable_chunked_prefill_per_release():
    # 0.9.1-0.11.0 type it SkipValidation[bool]: a BooleanOptionalAction as anywhere else
    for version in ("0.9.1", "0.10.0", "0.11.0", "0.33.0"):
        assert _unaccepted("vllm serve m --no-enable-chunked-prefill", version) == [], version
    # 0.8.0-0.8.4: StoreBoolean (a bare flag or one true/false word), no --no- form
    assert _unaccepted("vllm serve m --no-enable-chunked-prefill", "0.8.4") == [
        "--no-enable-chunked-prefill"
    ]
    facts = facts_for("vllm serve m --enable-chunked-prefill false", "0.8.4")
    assert facts.value("release.unaccepted_options") == []
    assert facts.value("release.invalid_choices") == []


def test_enable_disable_inverse_only_where_the_release_pairs_them():
    assert _unaccepted("vllm serve m --disable-prefix-caching", "0.33.0") == []
    assert _unaccepted("vllm serve m --disable-prefix-caching", "0.20.0") == [
        "--disable-prefix-caching"
    ]


def test_abbreviation_is_judged_against_the_release_strings():
    assert _unaccepted("vllm serve m --max-model 4096", "0.10.0") == []
    # unique in the union of all releases, but not an option string of 0.8.0
    assert _unaccepted("vllm serve m --no-enable-chunked", "0.8.0") == ["--no-enable-chunked"]


def test_key_value_form_of_limit_mm_per_prompt():
    for version in ("0.8.0", "0.8.4", "0.8.5", "0.9.2"):
        facts = facts_for("vllm serve Qwen/Qwen2-VL-7B --limit-mm-per-prompt image=5", version)
        assert facts.value("release.invalid_choices") == [], version
        assert verdict("ARGS101", facts) == NOT_APPLIES
    facts = facts_for("vllm serve Qwen/Qwen2-VL-7B --limit-mm-per-prompt image=5", "0.10.0")
    [text] = facts.value("release.invalid_choices")
    assert text.startswith("--limit-mm-per-prompt image=5: vLLM 0.10.0 refuses the value")
    assert text.endswith("(read by 0.8.0–0.9.2)")
    assert verdict("ARGS101", facts) == APPLIES
    # JSON was not read by 0.8.0-0.8.4 (nullable_kvs only)
    facts = facts_for("""vllm serve m --limit-mm-per-prompt '{"image": 5}'""", "0.8.4")
    assert facts.value("release.invalid_choices")[0].endswith("(read by 0.8.5–0.33.0)")


def test_a_package_collect_env_never_lists_is_unknown_not_absent(tmp_path):
    # a real report (H100 x8), its vLLM line set to 0.19.1, which does not bundle DeepGEMM
    text = (REPO / "tests/fixtures/reports/h100x8_nvlink_nightly.txt").read_text()
    text = text.replace("0.29.1rc1.dev350+gd5f0a6e82 (git sha: d5f0a6e82)", "0.19.1")
    report = tmp_path / "collect-env.txt"
    report.write_text(text)
    facts = facts_for(
        "vllm serve deepseek-ai/DeepSeek-V3.2 -tp 8", model="DeepSeek-V3.2", report=report
    )
    assert facts.value("vllm.version") == "0.19.1"
    assert "deep-gemm would not be listed" in facts.why_missing("packages.deep-gemm")
    assert verdict("ENV008", facts) == UNDECIDED
    # transformers is listed by every collect-env: its absence would be real
    assert "packages.transformers" in facts
    # a ROCm report (a source build of torch, no +rocm in its version)
    facts = facts_for(
        "vllm serve deepseek-ai/DeepSeek-V3.2 -tp 8",
        model="DeepSeek-V3.2",
        report=REPO / "tests/fixtures/reports/rocm_mi300x.txt",
    )
    assert verdict("ENV008", facts) != APPLIES


def test_mla_model_without_its_mla_fields_has_an_unknown_head_size(tmp_path):
    # DeepSeek-V3's config.json less kv_lora_rank / qk_*_head_dim: transformers fills them
    # from DeepseekV3Config's defaults, so hidden_size / heads (56) is not the head size
    import json

    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["DeepseekV3ForCausalLM"],
                "model_type": "deepseek_v3",
                "hidden_size": 7168,
                "num_attention_heads": 128,
                "num_key_value_heads": 128,
                "num_hidden_layers": 61,
                "vocab_size": 129280,
                "torch_dtype": "bfloat16",
            }
        )
    )
    facts = collect_facts(
        CollectOptions(
            serve_string="vllm serve deepseek-ai/DeepSeek-V3",
            vllm_version="0.20.0",
            probe_machine=False,
            model_config=tmp_path,
        )
    )
    assert "model.head_dim" not in facts
    assert "MLA model" in facts.why_missing("model.head_dim")
    assert verdict("ATTN100", facts) != APPLIES


def _report_at(tmp_path, version: str) -> Path:
    """The real RTX 5060 Ti x2 report with its vLLM line set to ``version``."""
    text = (REPO / "tests/fixtures/reports/rtx5060ti_x2_pcie.txt").read_text()
    text = text.replace("0.23.1rc1.dev20+g0d8097964 (git sha: 0d8097964)", version)
    path = tmp_path / f"collect-env-{version}.txt"
    path.write_text(text)
    return path


def test_oversized_world_size_per_release(tmp_path):
    # 0.11.1+ refuse TP x PP above the node's GPUs; up to 0.11.0 vLLM switches to Ray by
    # itself, which fails only without Ray (a collect-env report does not list ray)
    for version, expected in (("0.12.0", APPLIES), ("0.23.0", APPLIES), ("0.10.0", UNDECIDED)):
        facts = facts_for("vllm serve m -tp 4", report=_report_at(tmp_path, version))
        assert facts.value("gpu.count") == 2
        assert verdict("HW005", facts) == expected, version
    facts = facts_for("vllm serve m -tp 4", report=_report_at(tmp_path, "0.10.0"))
    assert facts.value("release.oversized_world") == "ray"
    assert "ray would not be listed" in facts.why_missing("packages.ray")


def test_a_release_candidate_that_serves_the_architecture_draws_no_model100():
    # DeepseekV32ForCausalLM is registered from 0.11.0: its release candidates (built between
    # 0.10.2 and 0.11.0) may serve it, so the registry facts are unknown, not "unregistered"
    for version in ("0.11.0rc1", "0.11.0rc2.dev5+g0123abc"):
        facts = facts_for("vllm serve deepseek-ai/DeepSeek-V3.2", version, "DeepSeek-V3.2")
        assert "release.architecture_registered" not in facts
        assert verdict("MODEL100", facts) == UNDECIDED, version
    facts = facts_for("vllm serve deepseek-ai/DeepSeek-V3.2", "0.11.0", "DeepSeek-V3.2")
    assert facts.value("release.architecture_registered") is True
    facts = facts_for("vllm serve deepseek-ai/DeepSeek-V3.2", "0.10.2", "DeepSeek-V3.2")
    assert verdict("MODEL100", facts) == APPLIES
