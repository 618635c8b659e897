"""Every verdict of ~150 `check` runs as JSON lines, to show a speed change leaves them as they
were (bench/suite/RESULTS.md, eighth pass):

    python bench/suite/verdict_dump.py fork > /tmp/before.jsonl   # one forked child per run
    python bench/suite/verdict_dump.py same > /tmp/before-same.jsonl  # all in one process
    python bench/suite/verdict_dump.py fork --report   # only the runs whose command names it
    (change the doctor, run both again, `diff` each pair)

The runs: version-less serve lines (options, variables in front, what-if GPUs, a model
config, --elsewhere), what-if releases and dev builds, every collect-env report under
tests/fixtures/reports with and without a serve line, every deployment manifest under
tests/fixtures/manifests/deployments, the bundled examples and a crash log. Each line is the
command's exit code and its whole JSON document (every finding, undecided and not applicable
one, with its evidence and missing facts, and every fact) less the run's duration. ``fork``
runs each command in a child of a process that imported the doctor and loaded its rules (as
the test suite's fork servers do); ``same`` runs them one after the other in one process, so
anything a run keeps for the next must not change the next one's answer.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLES = ROOT / "vllm_doctor" / "examples"
# folders of their own, as tests/conftest.py gives a test run, named alike in every run (the
# facts show them)
for name, folder in (("VLLM_DOCTOR_CACHE_DIR", "cache"), ("VLLM_DOCTOR_STATE_DIR", "state")):
    path = Path(tempfile.gettempdir()) / "vllm-doctor-verdict-dump" / folder
    path.mkdir(parents=True, exist_ok=True)
    os.environ[name] = str(path)

SERVE_LINES = [
    "vllm serve m",
    "vllm serve org/m -tp 2 --task embed --api-key x",
    "vllm serve m --quantization fp8 --kv-cache-dtype fp8 --max-model-len 65536",
    "VLLM_USE_V1=0 VLLM_ATTENTION_BACKEND=FLASHINFER vllm serve m -tp 4 --enforce-eager",
    "VLLM_USE_DEEP_GEMM=1 vllm serve deepseek-ai/DeepSeek-V3 -tp 8 --enable-expert-parallel",
    'vllm serve m --speculative-config \'{"method": "eagle", "num_speculative_tokens": 3}\'',
    "vllm serve m --bogus-flag 3 -pp 2 --gpu-memory-utilization 0.95",
]
WHAT_IFS: list[list[str]] = [
    [],
    ["--elsewhere"],
    ["--gpu", "H100", "--gpus", "2"],
    ["--gpu", "MI300X", "--gpus", "8"],
    ["--gpu", "4090"],
    ["--torch-version", "2.5.1"],
    ["--package", "flashinfer-python==0.6.12"],
    ["--vllm-version", "0.14.0"],
    ["--vllm-version", "0.23.1rc1.dev20+g0d8097964"],
    ["--vllm-version", "0.11.1.dev0+gb8b302cde"],
]


def commands() -> list[list[str]]:
    out: list[list[str]] = []
    for line in SERVE_LINES:
        for what_if in WHAT_IFS:
            out.append(["check", "--serve", line, *what_if])
    model = str(EXAMPLES / "diffusion-gemma-tp2" / "model")
    out.append(["check", "--serve", "vllm serve m -tp 2", "--model-config", model])
    out.append(["check", "--serve", "vllm serve m -tp 2", "--model-config", model, "--gpu", "L4"])
    for report in sorted((FIXTURES / "reports").glob("*.*")):
        if report.name == "SOURCES.md":
            continue
        out.append(["check", "--report", str(report)])
        out.append(["check", "--report", str(report), "--serve", "vllm serve m -tp 2"])
    for manifest in sorted((FIXTURES / "manifests" / "deployments").iterdir()):
        if manifest.suffix in (".yaml", ".yml", ".json") or manifest.name.startswith("Docker"):
            out.append(["check", "--manifest", str(manifest)])
    for example in sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()):
        out.append(["check", "--example", example])
    crash = EXAMPLES / "diffusion-gemma-tp2"
    out.append(["check", "--log", str(crash / "crash.log"), "--serve", "vllm serve m -tp 2"])
    out.append(["check", "--report", str(crash / "collect-env.txt"), "--log",
                str(crash / "crash.log")])  # fmt: skip
    return [[*argv, "--offline", "--format", "json", "--fail-on", "never"] for argv in out]


def _run(argv: list[str]) -> tuple[int, str, str]:
    from vllm_doctor import cli

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def _without_durations(value: Any) -> Any:
    """The document less every ``duration_s`` (a run's, a manifest target's)."""
    if isinstance(value, dict):
        return {k: _without_durations(v) for k, v in value.items() if k != "duration_s"}
    if isinstance(value, list):
        return [_without_durations(v) for v in value]
    return value


def _line(argv: list[str], code: int, stdout: str, stderr: str) -> str:
    try:
        document = _without_durations(json.loads(stdout))
    except ValueError:
        document = stdout
    stderr = "\n".join(x for x in stderr.splitlines() if " checked in " not in x)
    shown = [a.replace(str(ROOT), ".") for a in argv]
    return json.dumps({"argv": shown, "rc": code, "doc": document, "stderr": stderr})


def _forked(argv: list[str]) -> str:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            line = _line(argv, *_run(argv)).encode()
            with os.fdopen(write, "wb") as pipe:
                pipe.write(line)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        line = pipe.read().decode()
    os.waitpid(pid, 0)
    return line


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "fork"
    sys.path.insert(0, str(FIXTURES))
    import doctor_forks

    for name in doctor_forks.PRELOAD:
        __import__(name)
    from vllm_doctor.engine import loader

    loader.load_rules()
    only = sys.argv[2] if len(sys.argv) > 2 else ""  # the runs whose command names this
    for argv in commands():
        if only not in " ".join(argv):
            continue
        print(_forked(argv) if mode == "fork" else _line(argv, *_run(argv)), flush=True)


if __name__ == "__main__":
    main()
