"""Property tests draw the same examples on every run, so the test command cannot go red by
luck; ``FUZZ_EXAMPLES=N`` (see test_fuzz_parsers.py) draws fresh random ones for a hunt."""

import os
import sys
from pathlib import Path

from hypothesis import settings

# the helpers under tests/fixtures (doctor_forks.doctor_run: the doctor's command line, run as
# a process of its own forked from one that has imported the doctor) import as top-level modules
sys.path.insert(0, str(Path(__file__).parent / "fixtures"))

settings.register_profile("fixed", derandomize=True)
settings.register_profile("hunt", derandomize=False)
settings.load_profile("hunt" if "FUZZ_EXAMPLES" in os.environ else "fixed")

# the compact builds (vllm_doctor.compact) of a test run go to a directory of their own, shared
# by the run's subprocesses and xdist workers (they inherit it), never the user's cache; and so
# does the key that seals them (mkdtemp makes it 0700, as the doctor requires). The process
# that made them removes them when the run ends.
_MADE_HERE = []
for _name, _prefix in (
    ("VLLM_DOCTOR_CACHE_DIR", "vllm-doctor-test-cache-"),
    ("VLLM_DOCTOR_STATE_DIR", "vllm-doctor-test-state-"),
):
    if _name not in os.environ:
        import tempfile

        os.environ[_name] = tempfile.mkdtemp(prefix=_prefix)
        _MADE_HERE.append(os.environ[_name])


def pytest_unconfigure(config):
    import shutil

    for folder in _MADE_HERE:
        shutil.rmtree(folder, ignore_errors=True)


# The doctor and its children start in other working directories (a model directory, a probe
# run directory) where the isolation tests plant look-alike modules; a relative PYTHONPATH
# entry ("." or an empty one, as in `PYTHONPATH=. pytest`) would make them import those planted
# modules, which the doctor never does on its own. The entries are made absolute against the
# directory the tests were started from, which is what the caller meant by them.
if os.environ.get("PYTHONPATH"):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        os.path.abspath(entry or os.curdir) for entry in os.environ["PYTHONPATH"].split(os.pathsep)
    )


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _no_secret_of_another_test():
    """Secrets a test's in-process run remembered (vllm_doctor.redact) are that test's only."""
    from vllm_doctor.redact import forget_secrets

    forget_secrets()
    yield
    forget_secrets()
