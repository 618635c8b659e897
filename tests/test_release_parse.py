"""The serve line judged with each release's own parse and validation semantics (issue 29):
no working serve line refused, no broken one passed. Real inputs in
tests/fixtures/serve/release-parse/ (README.md there names each source)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from scripts import load_script

from vllm_doctor import yaml_io
from vllm_doctor.commands.check import judge
from vllm_doctor.engine.loader import default_rules_dir, load_rules
from vllm_doctor.errors import InputError
from vllm_doctor.facts.collect import CollectOptions
from vllm_doctor.facts.hardware import TargetHardware

HERE = Path(__file__).parent / "fixtures" / "serve" / "release-parse"
CHECKPOINT = HERE / "autoround-checkpoint"
SETUPS = yaml_io.safe_load((HERE / "autoround-setups.yaml").read_text())["setups"]


@pytest.fixture(scope="module")
def rules():
    return load_rules([default_rules_dir()])


def _commands(name: str) -> list[str]:
    lines = (HERE / name).read_text().splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


def _judge(rules, words, version=None, model_config=None, target=None, serve_config=None):
    options = CollectOptions(
        serve_tokens=words,
        serve_config=serve_config,
        vllm_version=version,
        model_config=model_config,
        probe_machine=False,
        offline=True,
        target=target,
    )
    return judge(options, rules)


def _applying(doc, code: str):
    return next((f for f in doc.applies if f.rule.code == code), None)


def _errors(doc) -> list[str]:
    return [f.rule.code for f in doc.applies if f.severity == "error"]


# -- 1. --quantization auto_round with an AutoRound checkpoint ---------------------------------


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"{s['release']}-{s['gpus']}gpu")
def test_autoround_setups_that_serve_draw_no_quantization_error(rules, setup):
    target = TargetHardware(gpu=setup["gpu"], count=setup["gpus"])
    doc = _judge(rules, shlex.split(setup["command"]), setup["release"], CHECKPOINT, target)
    # the release's INC override claims the auto-round checkpoint whatever the flag says
    assert doc.facts.value("release.quant.method") == "inc"
    assert doc.facts.value("release.quant.known") is True
    assert doc.facts.value("release.quant.conflict") == ""
    assert "INCConfig.override_quantization_method" in doc.facts.get("release.quant.method").detail
    assert not {"QUANT101", "ARGS100", "ARGS101"} & set(_errors(doc)), setup["source"]


def _bench_setups_with_auto_round() -> list[Path]:
    """The working setups of bench/reports2026 whose serve line has --quantization auto_round
    (club-3090 bench reports; the bench counted them as working setups drawing QUANT101)."""
    reports = Path(__file__).parent.parent / "bench" / "reports2026" / "reports"
    found = [
        d
        for d in sorted(reports.iterdir())
        if (d / "serve.txt").is_file()
        and "--quantization auto_round" in (d / "serve.txt").read_text(encoding="utf-8")
        and "outcome: working" in (d / "report.yaml").read_text(encoding="utf-8")
    ]
    assert found, "bench/reports2026 holds no working auto_round setup"
    return found


@pytest.mark.parametrize("directory", _bench_setups_with_auto_round(), ids=lambda d: d.name)
def test_bench_setups_with_auto_round_draw_no_error(directory):
    # judged as bench/reports2026/measure.py judges a working setup: `check` with what the
    # report shows (its serve line, GPU, count and vLLM version; no checkpoint config)
    import json

    from typer.testing import CliRunner

    from vllm_doctor.cli import app

    measure = load_script(directory.parents[1] / "measure.py", "reports2026_measure")

    report = yaml_io.safe_load((directory / "report.yaml").read_text(encoding="utf-8"))
    args, _ = measure.check_args(report, directory, {"--package"})
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    applying = [f for f in json.loads(result.stdout)["findings"] if f["verdict"] == "applies"]
    assert [f["code"] for f in applying if f["severity"] == "error"] == []
    assert "QUANT101" not in {f["code"] for f in applying}


def test_auto_round_on_an_unquantized_checkpoint_is_unknown(rules, tmp_path):
    # the same flag where no override claims the checkpoint: "Unknown quantization method"
    config = tmp_path / "config.json"
    config.write_text('{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}')
    words = shlex.split(SETUPS[1]["command"])
    doc = _judge(rules, words, SETUPS[1]["release"], tmp_path)
    finding = _applying(doc, "QUANT101")
    assert finding is not None and finding.severity == "error"
    assert doc.facts.value("release.quant.method") == "auto_round"


def test_auto_round_where_the_release_has_no_override_is_refused_not_passed(rules):
    # 0.13.0 has AutoRoundConfig as its own "auto-round" method and no override: vLLM stops
    # with "does not match"; the doctor does not call the method known
    doc = _judge(rules, shlex.split(SETUPS[1]["command"]), "0.13.0", CHECKPOINT)
    assert "release.quant.known" not in doc.facts
    assert "does not match --quantization (auto_round)" in doc.facts.why_missing(
        "release.quant.known"
    )
    finding = _applying(doc, "QUANT103")
    assert finding is not None and finding.severity == "error"
    assert "checkpoint's quant_method (auto-round)" in doc.facts.value("release.quant.conflict")
    # 0.12.0's argparse takes any word there (QuantizationMethods is Any at run time; the
    # differential check showed it): the same refusal comes from its config validation
    doc = _judge(rules, shlex.split(SETUPS[1]["command"]), "0.12.0", CHECKPOINT)
    assert doc.facts.value("release.invalid_choices") == []
    assert _applying(doc, "QUANT103") is not None
    # 0.8.x has no AutoRound at all and no override: refused the same way
    doc = _judge(rules, shlex.split(SETUPS[1]["command"]), "0.8.5", CHECKPOINT)
    assert _applying(doc, "QUANT103") is not None


def test_auto_round_without_the_checkpoint_is_undecided_not_an_error(rules):
    doc = _judge(rules, shlex.split(SETUPS[1]["command"]), SETUPS[1]["release"])
    assert "QUANT101" not in _errors(doc)
    assert "override step may replace it" in doc.facts.why_missing("release.quant.known")


# -- 2. a value no covered release reads ---------------------------------------------------------


def test_a_value_no_covered_release_reads_warns_without_a_version(rules):
    (line,) = _commands("retention-recipe.txt")
    doc = _judge(rules, shlex.split(line))  # no vLLM installed here: the version is unknown
    assert _errors(doc) == []
    finding = _applying(doc, "ARGS102")
    assert finding is not None and finding.severity == "warning"
    unread = " ".join(doc.facts.value("release.unread_values"))
    assert "--prefix-cache-retention-interval auto" in unread
    assert "a newer release may" in unread


def test_a_value_no_covered_release_reads_is_not_bad_input_on_the_command_line():
    # the CLI's own exit: 2 is bad input; the unread value is a warning
    import json

    from typer.testing import CliRunner

    from vllm_doctor.cli import app

    (line,) = _commands("retention-recipe.txt")
    args = ["check", "--offline", "--no-config", "--format", "json", "--serve", line]
    result = CliRunner().invoke(app, args)
    assert result.exit_code != 2, result.output
    applying = {
        f["code"]: f["severity"]
        for f in json.loads(result.stdout)["findings"]
        if f["verdict"] == "applies"
    }
    assert applying.get("ARGS102") == "warning"
    # releases before the option (0.29.0) refuse it, the covered ones its value: warnings,
    # since the version is unknown
    assert "error" not in applying.values()


def test_a_value_a_known_release_refuses_is_its_argparse_error(rules):
    (line,) = _commands("retention-recipe.txt")
    doc = _judge(rules, shlex.split(line), "0.33.0")
    assert _applying(doc, "ARGS101") is not None
    assert "vLLM 0.33.0 refuses the value (expected an integer, got 'auto')" in " ".join(
        doc.facts.value("release.invalid_choices")
    )
    doc = _judge(rules, shlex.split(line), "0.28.0")  # before the option existed
    assert doc.facts.value("release.unaccepted_options") == ["--prefix-cache-retention-interval"]


# -- 3. -cc.<key> ---------------------------------------------------------------------------------


@pytest.mark.parametrize("line", _commands("cc-shorthand.txt"))
def test_cc_shorthand_is_accepted_where_the_release_parser_takes_it(rules, line):
    words = shlex.split(line)
    for release in ("0.12.0", "0.27.1", "0.33.0"):
        doc = _judge(rules, words, release)
        assert doc.facts.value("release.unaccepted_options") == [], release
        assert "ARGS100" not in _errors(doc)
    # 0.11.x has no -cc alias: argparse refuses it there
    doc = _judge(rules, words, "0.11.0")
    assert _applying(doc, "ARGS100") is not None
    assert "accepted by 0.12.0–0.33.0" in " ".join(doc.facts.value("release.option_hints"))
    # version unknown: some covered releases refuse it, so a warning at most
    assert "ARGS100" not in _errors(_judge(rules, words))


def test_o_shorthand_follows_the_release(rules):
    # -O3 was -O (the --compilation-config alias) up to 0.11, --optimization-level after
    for release in ("0.10.0", "0.11.0", "0.12.0", "0.33.0"):
        doc = _judge(rules, ["vllm", "serve", "m", "-O3"], release)
        assert doc.facts.value("release.unaccepted_options") == [], release


def test_dotted_keys_only_where_the_release_merges_them(rules):
    words = ["vllm", "serve", "m", "--compilation-config.cudagraph_mode", "FULL"]
    assert _judge(rules, words, "0.9.0").facts.value("release.unaccepted_options") == []
    # 0.8.x has no dotted keys: argparse sees an unknown option
    assert _judge(rules, words, "0.8.5").facts.value("release.unaccepted_options") == [
        "--compilation-config.cudagraph_mode"
    ]


# -- 4. a misspelt key in a serve config file ------------------------------------------------------


def test_a_misspelt_serve_config_key_is_judged_like_the_option(rules):
    path = HERE / "serve-typo.yaml"
    doc = _judge(rules, None, "0.27.1", serve_config=path)
    finding = _applying(doc, "ARGS100")
    assert finding is not None and finding.severity == "error"
    assert doc.facts.value("release.unaccepted_options") == ["--tensor-parallel-sise"]
    (hint,) = doc.facts.value("release.option_hints")
    assert hint.startswith("--tensor-parallel-sise (serve-typo.yaml:4: tensor-parallel-sise: 2)")
    assert doc.facts.value("release.config_corrections") == [
        "serve-typo.yaml:4: rename `tensor-parallel-sise:` to `tensor-parallel-size:`"
    ]
    # with the version unknown (the pre-commit hook's case) it is still refused by every release
    doc = _judge(rules, None, serve_config=path)
    assert doc.facts.value("release.unknown_options") == ["--tensor-parallel-sise"]
    assert _applying(doc, "ARGS100") is not None


def test_a_correct_serve_config_draws_no_option_finding(rules, tmp_path):
    good = tmp_path / "serve.yaml"
    good.write_text((HERE / "serve-typo.yaml").read_text().replace("sise", "size"))
    doc = _judge(rules, None, "0.27.1", serve_config=good)
    assert doc.facts.value("release.unaccepted_options") == []
    assert (
        doc.facts.get("serve.tensor_parallel_size").detail
        == "serve.yaml:4: tensor-parallel-size: 2"
    )


def test_the_serve_config_typo_through_the_cli(tmp_path):
    from typer.testing import CliRunner

    from vllm_doctor.cli import app

    result = CliRunner().invoke(
        app,
        [
            "check",
            "--offline",
            "--vllm-version",
            "0.27.1",
            "--serve-config",
            str(HERE / "serve-typo.yaml"),
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "serve-typo.yaml:4" in result.output
    assert "ARGS100" in result.output


def test_structural_bad_input_stays_exit_2(rules):
    with pytest.raises(InputError):
        _judge(rules, ["vllm", "serve", "m", "--max-model-len"])


def test_the_pre_commit_hook_fails_on_the_misspelt_key(tmp_path, capfd):
    # the hook runs `check --serve-config=FILE` in a child process for each staged serve file
    from vllm_doctor import precommit

    staged = tmp_path / "serve.yaml"  # a name the hook takes for a serve config
    staged.write_text((HERE / "serve-typo.yaml").read_text())
    with pytest.raises(SystemExit) as exit_:
        precommit.main(["--offline", str(staged)])
    assert exit_.value.code == 1
    out = capfd.readouterr().out
    assert "ARGS100" in out and "serve.yaml:4" in out
