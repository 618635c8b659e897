"""Errors the doctor reports as one clear line, never as a traceback.

Exit codes (documented in the README):
  0  nothing at or above --fail-on
  1  findings at or above --fail-on
  2  bad usage or bad input (InputError)
  3  the doctor could not finish (DoctorError)
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3


class InputError(Exception):
    """Bad input from the user: a serve line, a config file, a report, a rule file.

    ``source`` names the input (a file path, "--speculative-config", "serve line"), so the
    message reads "vllm-doctor: <source>: <problem>".
    """

    def __init__(self, source: str, problem: str):
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


class DoctorError(Exception):
    """The doctor itself could not finish (exit code 3)."""
