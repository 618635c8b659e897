"""tools/gen_knowledge.py and the options/registry/pins extractors on small fake wheels.

The wheels are zip files built here with a few fake vllm sources in the layouts the real
releases use: 0.8.0 (explicit add_argument calls), 0.8.1 (an old release with files
missing) and 0.10.0 (config dataclasses read through get_kwargs, FrontendArgs).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from vllm_doctor.knowledge import Table

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / "tools"
KINDS = "options,registry,pins"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


sys.path.insert(0, str(TOOLS))
gen = _load("gen_knowledge", TOOLS / "gen_knowledge.py")

ARG_UTILS_080 = """
class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument('--model', type=str, default='facebook/opt-125m')
        parser.add_argument('--tensor-parallel-size', '-tp', type=int, default=1)
        parser.add_argument('--dtype', type=str, default='auto',
                            choices=['auto', 'half', 'float16', 'bfloat16'])
        parser.add_argument('--load-format', default='auto',
                            choices=[f.value for f in LoadFormat])
        parser.add_argument('--enforce-eager', action='store_true')
        parser.add_argument('--block-size', type=int, choices=[8, 16, 32])
        parser.add_argument('--use-v2-block-manager', action='store_true',
                            help='[DEPRECATED] block manager v1 has been removed')
        parser.add_argument('--quantization', '-q', type=str,
                            choices=[*QUANTIZATION_METHODS, None])
        parser.add_argument('--max-model-len', type=int)
        return parser
"""
CONFIG_080 = """
import enum
class LoadFormat(str, enum.Enum):
    AUTO = "auto"
    SAFETENSORS = "safetensors"
"""
QUANT_080 = """
QUANTIZATION_METHODS: list[str] = ["awq", "fp8", "gptq"]
"""
CLI_ARGS_080 = """
def make_arg_parser(parser):
    parser.add_argument("--host", type=str, default=None)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--allowed-origins", type=json.loads, default=["*"])
    return parser
"""
REGISTRY_080 = """
_TEXT_GENERATION_MODELS = {
    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
    "BertModel": ("bert", "BertModel"),
}
_MULTIMODAL_MODELS = {
    "LlavaForConditionalGeneration": ("llava", "LlavaForConditionalGeneration"),
}
_VLLM_MODELS = {
    **_TEXT_GENERATION_MODELS,
    **_MULTIMODAL_MODELS,
}
"""
INTERFACES = """
class SupportsPP: ...
class SupportsLoRA: ...
class SupportsMultiModal: ...
"""
LLAMA = """
from torch import nn
from .interfaces import SupportsLoRA, SupportsPP
class LlamaForCausalLM(nn.Module, SupportsLoRA, SupportsPP):
    pass
"""
BERT = """
from torch import nn
class BertModel(nn.Module):
    pass
"""
LLAVA = """
from torch import nn
from .interfaces import SupportsMultiModal, SupportsPP
class LlavaBase(nn.Module, SupportsMultiModal):
    pass
class LlavaForConditionalGeneration(LlavaBase):
    supports_pp = True
"""
LOADER_UTILS_080 = """
def resolve_transformers_fallback(model_config, architectures):
    return architectures
"""
METADATA_080 = """Metadata-Version: 2.1
Name: vllm
Version: 0.8.0
Requires-Dist: transformers>=4.48.2
Requires-Dist: tokenizers>=0.19.1
Requires-Dist: torch==2.6.0
Requires-Dist: xformers==0.0.29.post2; platform_system == "Linux" and platform_machine == "x86_64"
Requires-Dist: librosa; extra == "audio"
"""

ARG_UTILS_0100 = """
from typing import Literal, Optional
from vllm.config import ModelConfig, get_kwargs

ModelDType = Literal["auto", "half", "float16", "bfloat16", "float32"]

class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        model_kwargs = get_kwargs(ModelConfig)
        model_group = parser.add_argument_group("ModelConfig")
        model_group.add_argument("--model", **model_kwargs["model"])
        model_group.add_argument("--dtype", **model_kwargs["dtype"])
        model_group.add_argument("--max-model-len", **model_kwargs["max_model_len"])
        model_group.add_argument("--enforce-eager", **model_kwargs["enforce_eager"])
        model_group.add_argument("--hf-overrides", **model_kwargs["hf_overrides"])
        model_group.add_argument("--tokenizer-mode", **model_kwargs["tokenizer_mode"])
        model_group.add_argument("--tensor-parallel-size", "-tp", type=int)
        for arg, type in [("--guided-decoding-backend", str)]:
            model_group.add_argument(arg, type=type, help=f"[DEPRECATED] {arg}",
                                     deprecated=True)
        return parser
"""
CONFIG_0100 = """
from typing import Literal, Optional, Union
from dataclasses import dataclass

TokenizerMode = Literal["auto", "slow", "mistral"]
_SUFFIX_TO_DEFAULTS = [
    ("ForCausalLM", ("generate", "none")),
    ("ForSequenceClassification", ("pooling", "classify")),
]

@config
@dataclass
class ModelConfig:
    model: str = "Qwen/Qwen3-0.6B"
    dtype: Union[ModelDType, "torch.dtype"] = "auto"
    max_model_len: Optional[int] = None
    enforce_eager: bool = False
    hf_overrides: Union[dict, "Callable"] = None
    tokenizer_mode: TokenizerMode = "auto"
"""
CLI_ARGS_0100 = """
from dataclasses import dataclass
from typing import Optional

@config
@dataclass
class FrontendArgs:
    host: Optional[str] = None
    port: int = 8000
    enable_auto_tool_choice: bool = False

def make_arg_parser(parser):
    frontend_kwargs = get_kwargs(FrontendArgs)
    parser.add_argument("--served-model-name", nargs="+", type=str)
    return parser
"""
REGISTRY_0100 = (
    REGISTRY_080.replace(
        '    "BertModel": ("bert", "BertModel"),\n',
        '    "Qwen3ForCausalLM": ("qwen3", "Qwen3ForCausalLM"),\n',
    )
    + """
class _ModelRegistry:
    def _try_resolve_transformers(self, architecture, model_config):
        return None
"""
)
QWEN3 = """
from .llama import LlamaForCausalLM
class Qwen3ForCausalLM(LlamaForCausalLM):
    pass
"""
METADATA_0100 = (
    METADATA_080.replace("0.8.0", "0.10.0")
    .replace("torch==2.6.0", "torch==2.7.1")
    .replace("transformers>=4.48.2", "transformers<5,>=4.53.2")
)


def _wheel(
    folder: Path, version: str, files: dict[str, str], metadata: str | None, cudart: int | None = 12
) -> Path:
    path = folder / f"vllm-{version}-cp38-abi3-manylinux1_x86_64.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for rel, text in files.items():
            zf.writestr(f"vllm/{rel}", textwrap.dedent(text))
        if metadata is not None:
            zf.writestr(f"vllm-{version}.dist-info/METADATA", metadata)
        if cudart is not None:
            zf.writestr(
                "vllm/cumem_allocator.abi3.so",
                b"\x7fELF\x00\x00libcuda.so.1\x00libcudart.so.%d\x00" % cudart,
            )
    return path


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    models_080 = {
        "model_executor/models/registry.py": REGISTRY_080,
        "model_executor/models/interfaces.py": INTERFACES,
        "model_executor/models/llama.py": LLAMA,
        "model_executor/models/bert.py": BERT,
        "model_executor/models/llava.py": LLAVA,
    }
    _wheel(
        folder,
        "0.8.0",
        {
            "engine/arg_utils.py": ARG_UTILS_080,
            "config.py": CONFIG_080,
            "model_executor/layers/quantization/__init__.py": QUANT_080,
            "entrypoints/openai/cli_args.py": CLI_ARGS_080,
            "model_executor/model_loader/utils.py": LOADER_UTILS_080,
            **models_080,
        },
        METADATA_080,
    )
    # an old release with files missing: no frontend, no registry, no METADATA, no .so
    _wheel(
        folder,
        "0.8.1",
        {"engine/arg_utils.py": ARG_UTILS_080, "config.py": CONFIG_080},
        None,
        cudart=None,
    )
    models_0100 = {
        **models_080,
        "model_executor/models/registry.py": REGISTRY_0100,
        "model_executor/models/qwen3.py": QWEN3,
    }
    _wheel(
        folder,
        "0.10.0",
        {
            "engine/arg_utils.py": ARG_UTILS_0100,
            "config/__init__.py": CONFIG_0100,
            "entrypoints/openai/cli_args.py": CLI_ARGS_0100,
            **models_0100,
        },
        METADATA_0100,
        cudart=13,
    )
    return folder


@pytest.fixture(scope="module")
def tables(wheels, tmp_path_factory) -> dict[str, Table]:
    out = tmp_path_factory.mktemp("data")
    rc = gen.main([str(wheels), "--only", KINDS, "--out", str(out), "--jobs", "2"])
    assert rc == 0
    loaded = {
        kind: Table(kind, json.loads((out / f"{kind}.json").read_text()))
        for kind in KINDS.split(",")
    }
    loaded["_dir"] = out  # type: ignore[assignment]
    return loaded


# -- the framework ------------------------------------------------------------------------------


def test_discovers_the_extractors():
    found = gen.discover()
    assert {"options", "registry", "pins"} <= set(found)
    for module in found.values():
        assert callable(module.extract)


def test_writes_every_table_and_the_release_list(tables):
    out = tables["_dir"]
    listing = json.loads((out / "releases.json").read_text())
    assert listing["releases"] == ["0.8.0", "0.8.1", "0.10.0"]
    for kind in KINDS.split(","):
        assert tables[kind].releases == ["0.8.0", "0.8.1", "0.10.0"]
        assert tables[kind].meta["generated_by"] == "tools/gen_knowledge.py"


def test_records_what_an_old_release_lacks(tables):
    problems = tables["options"].meta["problems"]
    assert list(problems) == ["0.8.1"]
    assert "make_arg_parser" in problems["0.8.1"][0]
    registry = tables["registry"].meta["problems"]["0.8.1"]
    assert any("registry.py is missing" in p for p in registry)
    pins = tables["pins"].meta["problems"]["0.8.1"]
    assert any("METADATA" in p for p in pins) and any("CUDA build" in p for p in pins)
    assert tables["pins"].meta["counts"]["0.8.1"] == 0


def test_a_crashing_extractor_is_recorded_not_fatal(wheels, tmp_path):
    folder = tmp_path / "extractors"
    folder.mkdir()
    (folder / "boom.py").write_text(
        textwrap.dedent("""
        KIND = "boom"
        def extract(release):
            if str(release.version) == "0.8.1":
                raise KeyError("no such thing")
            return {"x": 1}
    """)
    )
    out = tmp_path / "out"
    assert (
        gen.main([str(wheels), "--extractors", str(folder), "--out", str(out), "--jobs", "1"]) == 0
    )
    data = json.loads((out / "boom.json").read_text())
    assert data["unreadable"] == ["0.8.1"]
    assert "KeyError" in data["problems"]["0.8.1"][0]
    assert data["entries"]["x"] == [
        {"first": "0.8.0", "last": "0.8.0", "value": 1},
        {"first": "0.10.0", "last": "0.10.0", "value": 1},
    ]


def test_bad_usage_exits_2(wheels, tmp_path, capsys):
    assert gen.main([str(wheels), "--only", "nonsense", "--out", str(tmp_path)]) == 2
    assert "no extractor for nonsense" in capsys.readouterr().err
    assert gen.main([str(tmp_path / "missing"), "--out", str(tmp_path)]) == 2


def test_audit_reports_contradictions(tables, tmp_path):
    rules = tmp_path / "rules"
    (rules / "par").mkdir(parents=True)
    # PAR004 wrongly says Llama never supports PP (and misses BertModel)
    (rules / "par" / "PAR004.yaml").write_text(
        textwrap.dedent("""
        when:
          all:
            - {fact: serve.pipeline_parallel_size, gt: 1}
            - {fact: model.architectures, contains_any: [LlamaForCausalLM]}
    """)
    )
    out = tables["_dir"]
    rc = gen.main(
        ["unused", "--only", "registry", "--audit-only", "--out", str(out), "--rules", str(rules)]
    )
    assert rc == 1


# -- options -------------------------------------------------------------------------------------


def test_old_layout_options(tables):
    opts = tables["options"].at("0.8.0")
    assert opts["tensor-parallel-size"]["kind"] == "int"
    assert opts["tensor-parallel-size"]["aliases"] == ["-tp"]
    assert opts["dtype"]["choices"] == ["auto", "bfloat16", "float16", "half"]
    assert opts["load-format"]["choices"] == ["auto", "safetensors"]  # enum values
    assert opts["quantization"]["choices"] == ["awq", "fp8", "gptq"]  # [*LIST, None]
    assert opts["block-size"]["choices"] == [8, 16, 32]
    assert opts["enforce-eager"]["kind"] == "flag"
    assert opts["use-v2-block-manager"].get("deprecated") is True
    assert "deprecated" not in opts["enforce-eager"]
    assert opts["allowed-origins"]["kind"] == "json" and opts["allowed-origins"]["json"]
    assert opts["port"]["kind"] == "int"


def test_new_layout_options(tables):
    opts = tables["options"].at("0.10.0")
    assert opts["max-model-len"]["kind"] == "hrint"
    assert opts["enforce-eager"]["kind"] == "bool"
    assert opts["hf-overrides"]["kind"] == "json_or_str"
    # Literal through an alias; this release's get_kwargs gives choices even beside str
    assert opts["tokenizer-mode"]["choices"] == ["auto", "mistral", "slow"]
    assert opts["dtype"]["kind"] == "str"
    assert opts["served-model-name"]["kind"] == "list"
    assert opts["enable-auto-tool-choice"]["kind"] == "bool"  # FrontendArgs field
    assert opts["guided-decoding-backend"] == {
        "kind": "str",
        "aliases": [],
        "json": False,
        "deprecated": True,
    }  # added in a loop
    assert "use-v2-block-manager" not in opts


def test_option_spans(tables):
    options = tables["options"]
    assert options.first_release("guided-decoding-backend") == "0.10.0"
    assert options.last_release("use-v2-block-manager") == "0.8.1"
    # the kind changed (store_true -> BooleanOptionalAction): two spans
    assert [(s.first, s.last, s.value["kind"]) for s in options.spans("enforce-eager")] == [
        ("0.8.0", "0.8.1", "flag"),
        ("0.10.0", "0.10.0", "bool"),
    ]


# -- registry ------------------------------------------------------------------------------------


def test_registry(tables):
    reg = tables["registry"]
    llama = reg.get("LlamaForCausalLM", "0.8.0").value
    assert llama == {
        "module": "llama",
        "class": "LlamaForCausalLM",
        "group": "text_generation",
        "pp": True,
        "lora": True,
        "multimodal": False,
        "quant": False,
        "pooling": False,
    }
    assert reg.get("BertModel", "0.8.0").value["pp"] is False
    llava = reg.get("LlavaForConditionalGeneration", "0.8.0").value
    assert llava["multimodal"] is True and llava["pp"] is True  # supports_pp = True
    assert llava["modalities"] is None  # no processor registered: not known, never "none"
    qwen3 = reg.get("Qwen3ForCausalLM", "0.10.0").value
    assert qwen3["pp"] is True  # inherited through a vLLM base class
    assert reg.first_release("Qwen3ForCausalLM") == "0.10.0"
    assert reg.last_release("BertModel") == "0.8.0"
    assert reg.get("@release", "0.8.0").value["transformers_fallback"] is True
    assert reg.get("@release", "0.10.0").value["where"] == "model_executor/models/registry.py"
    assert reg.get("@release", "0.10.0").value["convert_suffixes"] == [
        "ForCausalLM",
        "ForSequenceClassification",
    ]
    assert "convert_suffixes" not in reg.get("@release", "0.8.0").value
    assert reg.get("@release", "0.8.1") is None  # unreadable, not "no fallback"


# -- pins ----------------------------------------------------------------------------------------


def test_pins(tables):
    pins = tables["pins"]
    assert pins.get("torch", "0.8.0").value["pin"] == "2.6.0"
    assert pins.get("torch", "0.10.0").value["pin"] == "2.7.1"
    trf = pins.get("transformers", "0.10.0").value
    assert (trf["min"], trf["max"], trf.get("max_inclusive")) == ("4.53.2", "5", None)
    assert pins.get("transformers", "0.8.0").value["max"] is None
    xformers = pins.get("xformers", "0.8.0").value
    assert xformers["pin"] == "0.0.29.post2" and "platform_system" in xformers["marker"]
    assert "librosa" not in pins  # an extra's requirement
    assert pins.get("cuda", "0.8.0").value == {"major": 12, "from": "libcudart.so.12"}
    assert pins.get("cuda", "0.10.0").value["major"] == 13


def test_options_and_pins_audits(tables, tmp_path):
    rules = tmp_path / "rules"
    (rules / "args").mkdir(parents=True)
    (rules / "env").mkdir()
    # use-v2-block-manager is last in 0.8.1, so it is gone from 0.10.0 on: right;
    # --block-size removed in 0.10.0: right (the fake 0.10.0 has none);
    # and --dtype removed in 0.10.0: wrong (0.10.0 has it)
    (rules / "args" / "ARGS001.yaml").write_text(
        "affected: {ranges: [{events: [{introduced: '0.10.0'}]}]}\n"
        "when: {fact: serve.flags, matches: '^(--)?use[-_]v2[-_]block[-_]manager$'}\n"
    )
    (rules / "args" / "ARGS004.yaml").write_text(
        textwrap.dedent("""
        when:
          any:
            - all:
                - {fact: serve.flags, matches: '^(--)?block[-_]size$'}
                - {fact: vllm.version, version: ">=0.10.0"}
            - all:
                - {fact: serve.flags, matches: '^(--)?dtype$'}
                - {fact: vllm.version, version: ">=0.10.0"}
    """)
    )
    (rules / "env" / "ENV002.yaml").write_text(
        "# pins torch==X: 2.6.0 in 0.8.0, 2.7.0 in 0.10.0\nwhen: {}\n"
    )
    sys.path.insert(0, str(TOOLS / "extractors"))
    found = gen.discover()
    options_problems = found["options"].audit(
        json.loads((tables["_dir"] / "options.json").read_text()), rules
    )
    assert options_problems == [
        "ARGS004: --dtype removed in 0.10.0 by the rule, but the "
        "wheels have it up to 0.10.0 (first release without it: "
        "none covered)"
    ]
    pins_problems = found["pins"].audit(
        json.loads((tables["_dir"] / "pins.json").read_text()), rules
    )
    assert pins_problems == ["ENV002 says 0.10.0 pins torch==2.7.0; its METADATA says ==2.7.1"]


def test_download_fetches_only_missing_releases(wheels, monkeypatch):
    import audit_wheels
    from packaging.version import Version

    asked = []
    monkeypatch.setattr(
        audit_wheels,
        "available_releases",
        lambda lo: [Version(v) for v in ("0.8.0", "0.8.1", "0.10.0", "0.34.0") if Version(v) >= lo],
    )
    monkeypatch.setattr(
        audit_wheels, "download", lambda folder, versions: asked.extend(map(str, versions)) or []
    )
    # the aarch64 wheels are asked of pip for every release read (a `pip download` each, over
    # the network): recorded here instead
    aarch64 = []
    monkeypatch.setattr(gen, "download_aarch64", lambda folder, versions: aarch64.extend(versions))
    gen.download_missing(wheels, "0.8.0")
    assert asked == ["0.34.0"]
    assert aarch64 == [r.version for r in gen.find_releases(wheels, "0.8.0")] and aarch64
    monkeypatch.setattr(audit_wheels, "download", lambda folder, versions: ["0.34.0: 404"])
    with pytest.raises(gen.UsageError, match="download failed"):
        gen.download_missing(wheels, "0.8.0")
