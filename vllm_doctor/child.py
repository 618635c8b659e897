"""Starting the doctor's own Python child processes so that nothing in the working directory runs.

``python -m pkg.module`` puts the working directory first on ``sys.path``: a ``json.py``,
``shutil.py``, ``signal.py`` or ``typer.py`` there (a model directory, a repository being
checked) would be imported in place of the standard module and run. Every child the doctor
starts (the probes' workers, parts, compiler and reaper, the pre-commit hook's checks) goes
through ``module_command``: ``-P`` (Python 3.11+) keeps the working directory and the
script's directory off ``sys.path``; on Python 3.10, which has no ``-P``, ``-I`` (isolated
mode) does, at the price of ignoring ``PYTHONPATH`` and the user's site-packages, so callers
that can also give the child a private working directory do (the probes' run directory).
"""

from __future__ import annotations

import sys

SAFE_PATH_FLAG = "-P" if sys.version_info >= (3, 11) else "-I"


def module_command(module: str, *args: str, python: str | None = None) -> list[str]:
    """``[python, -P, -m, module, *args]``: a child that imports nothing from its working
    directory (``python`` defaults to this interpreter, whose version picks the flag)."""
    return [python or sys.executable, SAFE_PATH_FLAG, "-m", module, *args]
