"""Runs INSIDE a throwaway environment that has one vLLM release installed (make_venv.py),
never in the doctor's process: vLLM's own `vllm serve` parsing, and its config validation as
far as it goes without a GPU, for every serve line it is given.

    /work/venvs/diff-vllm-0.27.1/bin/python tools/differential/vllm_side.py \
        --cases cases.jsonl --out vllm.jsonl [--model-dir DIR]

Each input line is ``{"id": ..., "argv": [words after `vllm serve`]}``; each output line is
``{"id", "parse": "accept" | "refuse", "parse_error", "config": "accept" | "refuse" |
"not-reached", "config_error"}``.

* parse: the release's own CLI parser — ``FlexibleArgumentParser`` with the ``serve``
  subcommand built by ``vllm.entrypoints.cli.serve.cmd_init()``, exactly as ``vllm serve``
  builds it, then the subcommand's ``validate``. argparse's exit is caught.
* config: ``AsyncEngineArgs.from_cli_args`` then ``create_engine_config()``, with the model
  replaced by ``--model-dir`` (a local config.json: the Hub is not reachable here, and the
  command's own checkpoint is not at hand). What fails for want of a GPU, a model file or
  the network is "not-reached" with its reason; a ``ValueError``/``TypeError``/validation
  error about the arguments is "refuse".

No GPU is here: a stand-in CUDA platform (its enum and device names only) is installed as
``vllm.platforms.current_platform`` before anything reads it, so the parser's defaults are the
CUDA ones; no kernel is loaded.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

# what says "this stage needs what is not here", not "the arguments are wrong"
NOT_HERE = (
    "cuda",
    "nvml",
    "gpu",
    "world size",
    "available devices",
    "device",
    "libcuda",
    "no such file",
    "does not appear to have a file",
    "hugging face",
    "huggingface",
    "offline",
    "connection",
    "repository not found",
    "not a local folder",
    "platform",
    "nccl",
    "_c.abi3",
    "triton",
    "flash_attn",
    "flashinfer",
)


def _stand_in_platform() -> None:
    import vllm.platforms as platforms
    from vllm.platforms.interface import Platform, PlatformEnum

    class StandInCuda(Platform):  # names only: what the parser's defaults read
        _enum = PlatformEnum.CUDA
        device_name = "cuda"
        device_type = "cuda"
        dispatch_key = "CUDA"
        ray_device_key = "GPU"
        dist_backend = "nccl"
        device_control_env_var = "CUDA_VISIBLE_DEVICES"

    platforms.current_platform = StandInCuda()
    platforms._current_platform = platforms.current_platform


def _stand_in_model_classes() -> None:
    """The model registry inspects a model class by importing it, which loads GPU kernels
    (flash-attention) that are not here: a failed inspection is replaced by a plain decoder's
    description (text generation, pipeline-parallel capable), so that the config validation
    after it runs. Checks that depend on the real class's interfaces are therefore not what
    vLLM would decide with the class (the README says so)."""
    import dataclasses

    from vllm.model_executor.models import registry

    info_cls = getattr(registry, "_ModelInfo", None)
    original = getattr(registry, "_try_inspect_model_cls", None)
    if info_cls is None or original is None:
        return

    def stand_in(arch: str):
        values = {}
        for f in dataclasses.fields(info_cls):
            name = f.name
            if name == "architecture":
                values[name] = arch
            elif name in ("is_text_generation_model", "supports_pp"):
                values[name] = True
            elif name == "attn_type":
                values[name] = "decoder"
            elif "pooling_type" in name:
                values[name] = "LAST"
            elif name == "score_type":
                values[name] = "bi-encoder"
            elif "tuple" in str(f.type):
                values[name] = ()
            else:
                values[name] = False
        return info_cls(**values)

    def inspect(model_arch, *args, **kwargs):
        found = original(model_arch, *args, **kwargs)
        return found if found is not None else stand_in(model_arch)

    registry._try_inspect_model_cls = inspect


def _import_serve_module():
    """``vllm.entrypoints.cli.serve``. Some releases ask a CUDA kernel at import time
    whether it supports something (0.12.0: ``cutlass_scaled_mm_supports_fp8``, reached from
    the CLI package); with no kernels here each such query is answered "no" and the import
    retried."""
    import re

    from vllm import _custom_ops as ops

    for _ in range(30):
        try:
            from vllm.entrypoints.cli import serve as serve_module

            return serve_module
        except AttributeError as err:
            match = re.search(r"'_C' object has no attribute '(\w+)'", str(err))
            if match is None or not hasattr(ops, match.group(1)):
                raise
            setattr(ops, match.group(1), lambda *args, **kwargs: False)
    raise RuntimeError("too many kernel queries at import")


def _serve_parser():
    serve_module = _import_serve_module()

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    parser = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    commands = {}
    for cmd in serve_module.cmd_init():
        cmd.subparser_init(subparsers).set_defaults(dispatch_function=cmd.cmd)
        commands[cmd.name] = cmd
    return parser, commands["serve"]


def _first_line(err: BaseException | str) -> str:
    """The line that says why: pydantic's "Value error, ..." line, else the last line that
    reads like an error, else the first."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    if not lines:
        return type(err).__name__ if isinstance(err, BaseException) else ""
    for line in lines:
        if line.startswith(("Value error,", "Assertion failed,")):
            return line.split("[type=", 1)[0].strip()[:400]
    errors = [line for line in lines if "error:" in line]
    return (errors[-1] if errors else lines[0])[:400]


def parse(parser, serve, argv: list[str]):
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            args = parser.parse_args(["serve", *argv])
            serve.validate(args)
    except SystemExit as exc:
        message = stderr.getvalue().strip().splitlines()
        return None, (message[-1] if message else f"exit {exc.code}")[:400]
    except Exception as exc:
        return None, f"{type(exc).__name__}: {_first_line(exc)}"
    return args, None


def config(args, model_dir: str | None):
    from vllm.engine.arg_utils import AsyncEngineArgs

    if model_dir:
        args.model = model_dir
        if hasattr(args, "model_tag"):
            args.model_tag = model_dir
        for name in ("tokenizer", "hf_config_path"):
            if hasattr(args, name):
                setattr(args, name, None)
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            engine_args = AsyncEngineArgs.from_cli_args(args)
            engine_args.create_engine_config()
    except Exception as exc:
        text = f"{type(exc).__name__}: {_first_line(exc)}"
        if not isinstance(exc, (ValueError, TypeError)) or any(w in text.lower() for w in NOT_HERE):
            return "not-reached", text
        return "refuse", text
    return "accept", None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model-dir")
    ap.add_argument("--no-config", action="store_true", help="the parse stage only")
    opts = ap.parse_args()
    _stand_in_platform()
    parser, serve = _serve_parser()
    if not opts.no_config:
        _stand_in_model_classes()
    import vllm

    with open(opts.cases, encoding="utf-8") as src, open(opts.out, "w", encoding="utf-8") as out:
        out.write(json.dumps({"vllm": vllm.__version__}) + "\n")
        for line in src:
            case = json.loads(line)
            args, error = parse(parser, serve, case["argv"])
            row = {"id": case["id"], "parse": "refuse" if args is None else "accept"}
            if error:
                row["parse_error"] = error
            if args is not None and not opts.no_config and case.get("config", True):
                row["config"], row["config_error"] = config(args, opts.model_dir)
            out.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
