"""The CPU of forked command-line runs (bench/suite/RESULTS.md, seventh pass).

    git show REV:tests/fixtures/doctor_forks.py > /tmp/old/doctor_forks.py
    /usr/bin/time -f "%U %S %e" python bench/suite/forked_runs.py /tmp/old 10
    /usr/bin/time -f "%U %S %e" python bench/suite/forked_runs.py tests/fixtures 10

Runs four commands ROUNDS times through ``doctor_run`` of the doctor_forks.py in FOLDER, every
other round in the environment the command-line tests give (``VLLM_*`` left out), the others
in the test run's (its own cache and state folders, as conftest sets them). The servers are
children of this process and are waited for at its exit, so /usr/bin/time counts them and
every run they forked.
"""

from __future__ import annotations

import os
import sys
import tempfile

folder, rounds = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, folder)
for name in ("VLLM_DOCTOR_CACHE_DIR", "VLLM_DOCTOR_STATE_DIR"):  # as tests/conftest.py does
    os.environ.setdefault(name, tempfile.mkdtemp(prefix="vllm-doctor-bench-"))

from doctor_forks import doctor_run  # noqa: E402

stripped = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
COMMANDS = [
    ("check", "--serve", "vllm serve m -tp 2", "--format", "json"),
    ("check", "--serve", "vllm serve m", "--vllm-version", "0.14.0"),
    ("facts", "--serve", "vllm serve m"),
    ("check", "--serve", "vllm serve m --bogus-flag 3", "--fail-on", "never"),
]
for round_ in range(rounds):
    for command in COMMANDS:
        run = doctor_run(*command, env=stripped if round_ % 2 else None)
        assert run.returncode in (0, 1), run.stderr
