"""The pre-commit hook (.pre-commit-hooks.yaml): `vllm-doctor check --serve-config FILE` for
every serve config pre-commit passes and `check --manifest FILE` for every Kubernetes manifest,
compose file or Dockerfile that runs vLLM (a vLLM serve command or image in it; the others are
skipped), each in its own process.

    vllm-doctor-pre-commit [CHECK OPTIONS ...] FILE [FILE ...]

Arguments that name existing files are serve configs, whatever they look like (a committed
file named `--ignore-file=x.yaml` is a file, never an option); everything else goes to `check`
as is (put `--report ci/collect-env.txt`, `--vllm-version 0.33.0`, `--fail-on warning` … in the
hook's `args`). Each file reaches `check` as `--serve-config=FILE`, so no file name is read as
an option. The exit code is the worst of the runs: 2 or 3 (could not check) over 1 (findings)
over 0. Each check runs as `python -P -m vllm_doctor` (``child.module_command``): a `typer.py`
committed at the repository's root is never imported.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from vllm_doctor.child import module_command


def value_options() -> set[str]:
    """The options of `check` that take a value (read from the command itself, so a new
    option cannot be missed): their value is never taken for a serve config."""
    import typer.main
    from typer.core import TyperOption

    from vllm_doctor.cli import app

    check = typer.main.get_group(app).commands["check"]
    return {
        opt
        for param in check.params
        if isinstance(param, TyperOption) and not param.is_flag
        for opt in param.opts
    }


def split_arguments(argv: list[str]) -> tuple[list[str], list[str]]:
    """(check options, serve config files)."""
    takes_value = value_options()
    options, files = [], []
    take_value = False
    for arg in argv:
        if take_value:
            options.append(arg)
            take_value = False
        elif Path(arg).is_file():  # pre-commit's file names, even one that starts with "-"
            files.append(arg)
        elif arg in takes_value:
            options.append(arg)
            take_value = True
        else:
            options.append(arg)
    return options, files


def _rank(code: int) -> int:
    return {0: 0, 1: 1}.get(code, 2)


def main(argv: list[str] | None = None) -> None:
    from vllm_doctor.report.output import guard_streams

    guard_streams()  # a reader that leaves, or a closed stderr, never ends the hook early
    options, files = split_arguments(list(sys.argv[1:] if argv is None else argv))
    worst = 0
    from vllm_doctor.serveline.manifest import hook_option

    for path in files:
        option = hook_option(path)  # --manifest, --serve-config, or None: no vLLM in the file
        if option is None:
            continue
        print(f"vllm-doctor: {path}", flush=True)
        code = subprocess.call(
            module_command("vllm_doctor", "check", f"{option}={path}", "-q", *options)
        )
        if _rank(code) > _rank(worst):
            worst = code
    sys.exit(worst)


if __name__ == "__main__":  # pragma: no cover
    main()
