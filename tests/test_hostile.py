"""The third hardening pass (issue 37): the container gate, the Hub, the compiled rule cache,
manifests and the streams a run writes to, under hostile input. Each test fails on the code
before the pass; the same inputs run as subprocesses under limits in
tests/fixtures/bad_inputs.py (third pass) and bench/hardening/tally.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from doctor_forks import doctor_run, seed_builds

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent / "vllm_doctor" / "examples" / "diffusion-gemma-tp2"


def doctor(*args: str, env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "VLLM_"))}
    environ.update(env or {})
    return doctor_run(*args, env=environ, timeout=120, text=False, python_flags=("-P",), **kwargs)


def one_line(stderr: bytes) -> str:
    lines = [line for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


# --- bad input is exit 2 and one line ----------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--vllm-version", "0.24.0", "--", "vllm", "serve", "m", ""],
        ["check", "--vllm-version", "0.24.0", "--", "vllm", "serve", "", "-tp", "2"],
    ],
)
def test_an_empty_word_in_the_serve_line_is_bad_input(argv):
    run = doctor(*argv)
    assert run.returncode == 2, run.stderr
    assert "empty word" in one_line(run.stderr)


def test_an_empty_option_value_is_no_empty_word():
    run = doctor("check", "-q", "--vllm-version", "0.24.0", "--", "vllm", "serve", "m",
                 "--served-model-name", "")  # fmt: skip
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("word", [b"\xff\xfe", b"org/m\xc3"])
def test_invalid_utf8_in_argv_is_bad_input(word):
    argv = [b"check", b"--vllm-version", b"0.24.0", b"--", b"vllm", b"serve", word]
    run = subprocess.run(
        [sys.executable.encode(), b"-P", b"-m", b"vllm_doctor", *argv],
        capture_output=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert "not valid UTF-8" in one_line(run.stderr)


# --- the streams: a reader that leaves, a closed or full stderr --------------------------------


def shell(script: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "VLLM_"))}
    env["DOCTOR"] = f"{sys.executable} -P -m vllm_doctor"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                          timeout=120)  # fmt: skip


@pytest.mark.parametrize(
    "args, code",
    [
        ("--version", 0),
        ("--help", 0),
        ("probe --list", 0),
        ("rules validate", 0),
        ("check --serve 'vllm serve m' --vllm-version banana", 2),
        (f"explain --log {EXAMPLE}/crash.log", 1),
    ],
)
def test_the_exit_code_survives_a_reader_that_leaves_and_a_broken_stderr(args, code):
    # stdout and stderr both into a pipe whose reader exits at once; then stderr alone
    run = shell(
        f'$DOCTOR {args} 2>&1 | true; echo "a=${{PIPESTATUS[0]}}"; '
        f'$DOCTOR {args} 2>/dev/full >/dev/null; echo "b=$?"; '
        f'$DOCTOR {args} 2>&- >/dev/null; echo "c=$?"'
    )
    assert run.stdout.split() == [f"a={code}", f"b={code}", f"c={code}"], run.stdout + run.stderr


def test_a_crash_log_line_never_steers_the_terminal(tmp_path):
    log = tmp_path / "crash.log"
    text = (EXAMPLE / "crash.log").read_bytes()  # the matched line carries a title sequence
    log.write_bytes(
        text.replace(b"call_function <built-in", b"call_function \x1b]0;PWNED\x07<built-in")
    )
    run = doctor("explain", "--log", str(log))
    assert run.returncode == 1, run.stderr
    assert b"\x1b" not in run.stdout and b"\x07" not in run.stdout


# --- a hostile Hub (tests/fixtures/hostile_hub.py) ------------------------------------------------

sys.path.insert(0, str(HERE / "fixtures"))

from hostile_hub import HostileHub  # noqa: E402

TOKEN = "hf_" + "t" * 34


@pytest.fixture(scope="module")
def evil_hub():
    with HostileHub() as server:
        yield server


def hub_run(hub: HostileHub, tmp_path: Path, attack: str, *flags: str, env=None, serve=()):
    tmp_path.mkdir(parents=True, exist_ok=True)
    if not (tmp_path / "cache").exists():  # a user who has run the doctor before
        seed_builds(tmp_path / "cache", tmp_path / "home" / "state")
    before = len(hub.requests)
    environ = {
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(tmp_path / "hf"),
        "VLLM_DOCTOR_CACHE_DIR": str(tmp_path / "cache"),
        "HF_TOKEN": TOKEN,
        "HOME": str(tmp_path / "home"),
        "VLLM_DOCTOR_STATE_DIR": str(tmp_path / "home" / "state"),
        **(env or {}),
    }
    run = doctor("check", "--format", "json", *flags, "--", "vllm", "serve", f"evil/{attack}",
                 "-tp", "3", *serve, env=environ, cwd=tmp_path)  # fmt: skip
    return run, hub.requests[before:]


def written(tmp_path: Path) -> list[str]:
    """The files a run left under ``tmp_path``, but the compiled rule base and its seal key
    (compact.py)."""
    import re

    names = (str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    own = r"cache/[^/]+\.marshal|home/state/seal\.key"
    return sorted(n for n in names if not re.fullmatch(own, n))


def assert_only_the_doctors_cache(tmp_path: Path) -> None:
    import re

    for name in written(tmp_path):
        assert re.fullmatch(
            r"cache/hub/[0-9a-f]{32}/(refs/[0-9a-f]{32}|[0-9a-f]{40}/(config\.json|model\.json))",
            name,
        ), name
    assert not list(Path("/tmp").glob("EVIL*"))


@pytest.mark.parametrize(
    "attack, says",
    [
        ("sha-path", "is not a 40-hex commit hash"),
        ("sha-branch", "is not a 40-hex commit hash"),
        ("sha-long", "is not a 40-hex commit hash"),
        ("nan-sha", "is not a 40-hex commit hash"),
        ("not-json", "file list is not valid JSON"),
        ("list", "file list is not an object"),
        ("no-siblings", "has no siblings list"),
        ("config-list", "config.json is not a JSON object"),
        ("config-not-json", "config.json is not UTF-8 text"),
        ("huge-config", "config.json is over 32 MiB"),
        ("endless-config", "config.json is over 32 MiB"),
    ],
)
def test_a_malformed_hub_answer_is_bad_input(evil_hub, tmp_path, attack, says):
    run, _ = hub_run(evil_hub, tmp_path, attack)
    assert run.returncode == 2, run.stderr
    line = one_line(run.stderr)
    assert line.startswith(f"vllm-doctor: the Hub ({evil_hub.url})") and says in line
    assert written(tmp_path) == []  # nothing of a refused answer is kept


@pytest.mark.parametrize("attack", ["etag", "ok", "range-ignored", "huge-header", "redirect-host"])
def test_names_come_from_the_doctor_not_the_server(evil_hub, tmp_path, attack):
    run, requests = hub_run(evil_hub, tmp_path, attack)
    assert run.returncode == 1, run.stderr  # PAR001: 32 heads at TP 3, from the Hub's config
    assert_only_the_doctors_cache(tmp_path)
    assert len(requests) <= 4
    # the token goes to the endpoint's host only: never to a host a redirect names
    assert requests[0][2] == f"Bearer {TOKEN}"
    if attack == "redirect-host":  # config.json moved to http://localhost:PORT/evil/ok/…
        moved = [auth for _, path, auth in requests if path.startswith("/evil/ok/")]
        assert moved == [None]


def test_a_range_ignored_or_a_huge_header_leaves_the_dtypes_unknown(evil_hub, tmp_path):
    for attack in ("range-ignored", "huge-header"):
        run, _ = hub_run(evil_hub, tmp_path / attack, attack)
        facts = __import__("json").loads(run.stdout)["facts"]["facts"]
        assert "model.weights_dtypes" not in facts
        assert facts["model.weights_bytes"]["value"] == 2 << 30  # from the file list


def test_a_huge_index_and_5000_shards_stay_within_bounds(evil_hub, tmp_path):
    import json

    run, requests = hub_run(evil_hub, tmp_path / "a", "huge-index")
    assert run.returncode == 1 and len(requests) == 3, run.stderr
    missing = json.loads(run.stdout)["facts"]["missing"]
    assert "over 32 MiB" in missing["model.weights_bytes"]
    run, requests = hub_run(evil_hub, tmp_path / "b", "many-shards")
    assert run.returncode == 1 and len(requests) == 3, run.stderr  # no 5,000 header requests
    facts = json.loads(run.stdout)["facts"]["facts"]
    assert facts["model.weights_bytes"]["value"] == 10**12


@pytest.mark.parametrize(
    "attack, says",
    [
        ("redirect-loop", "redirected more than 3 times"),
        ("redirect-file", "only http(s) is followed"),
        ("redirect-downgrade", "only http(s) is followed"),
    ],
)
def test_redirects_are_bounded(evil_hub, tmp_path, attack, says):
    import json

    run, requests = hub_run(evil_hub, tmp_path, attack)
    assert run.returncode == 0, run.stderr
    assert says in json.loads(run.stdout)["facts"]["missing"]["model"]
    assert len(requests) <= 2 + 3


@pytest.mark.parametrize("attack", ["slow-api", "slow-config", "slow-status"])
def test_a_server_that_trickles_meets_the_runs_deadline(evil_hub, tmp_path, attack):
    import json
    import time

    start = time.monotonic()
    run, _ = hub_run(evil_hub, tmp_path, attack, env={"VLLM_DOCTOR_HUB_TIMEOUT": "3"})
    assert time.monotonic() - start < 20  # a byte every 4 s for ever: before, it never ended
    assert run.returncode == 0, run.stderr
    assert "took more than 3 s in all" in json.loads(run.stdout)["facts"]["missing"]["model"]
    assert written(tmp_path) == []


def test_the_cache_is_read_offline_and_never_written_through_a_link(evil_hub, tmp_path):
    import json

    first, _ = hub_run(evil_hub, tmp_path, "ok")
    assert first.returncode == 1, first.stderr
    # offline: the doctor's cache answers, the Hub is asked nothing
    again, requests = hub_run(evil_hub, tmp_path, "ok", "--offline")
    assert again.returncode == 1 and requests == []
    # a link planted where the next answer is written is replaced, its target left alone
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    [config] = (tmp_path / "cache" / "hub").glob("*/*/config.json")
    for ref in (tmp_path / "cache" / "hub").glob("*/refs/*"):
        ref.unlink()  # forget the revision: the next run fetches again
    config.unlink()
    config.symlink_to(victim)
    third, _ = hub_run(evil_hub, tmp_path, "ok")
    assert third.returncode == 1, third.stderr
    assert victim.read_text() == "untouched" and not config.is_symlink()
    assert json.loads(config.read_text())["num_attention_heads"] == 32


def test_a_cache_folder_others_may_write_is_not_used(evil_hub, tmp_path):
    shared = tmp_path / "cache"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    run, _ = hub_run(evil_hub, tmp_path, "ok")
    assert run.returncode == 1, run.stderr  # the config was still read, from this run's copy
    assert written(tmp_path) == []


# --- secrets: one rule for every source and output ------------------------------------------------


@pytest.mark.parametrize(
    "name", ["PGPASSWORD", "DB_PASS", "SMTP_PW", "GITHUB_PAT", "MYSQLPASSWD", "NPMTOKEN", "dbPass"]
)
def test_secret_names_run_together_or_short(name):
    from vllm_doctor.redact import is_secret_name

    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name", ["PATH", "LD_LIBRARY_PATH", "PASSES", "--max-num-batched-tokens", "PWD_X"]
)
def test_names_that_are_no_secrets(name):
    from vllm_doctor.redact import is_secret_name

    assert is_secret_name(name) is (name == "PWD_X")  # pwd is a password's short name


def test_an_exception_named_like_a_key_hides_nothing():
    from vllm_doctor.redact import redact_text

    assert redact_text("KeyError: 'severity'") == "KeyError: 'severity'"
    assert redact_text("api_key: 'severity'") == "api_key: '<redacted>'"


def test_a_number_option_named_like_a_token_is_no_secret():
    from vllm_doctor.redact import redact_words

    words = ["--long-prefill-token-threshold", "512", "--api-key", "sk-abcdefgh"]
    assert redact_words(words) == [
        "--long-prefill-token-threshold",
        "512",
        "--api-key",
        "<redacted>",
    ]


MANIFESTS = {
    "pod.yaml": """apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.24.0
      command: ["sh", "-c", "vllm serve org/m --served-model-name $PGPASSWORD --weird $(DB_PASS) -tp 2"]
      env:
        - {name: PGPASSWORD, value: CANARYpod1}
        - {name: DB_PASS, value: CANARYpod2}
        - {name: GITHUB_PAT, value: CANARYpod3}
""",
    "compose.yaml": """services:
  vllm:
    image: vllm/vllm-openai:v0.24.0
    environment:
      PGPASSWORD: CANARYcmp1
      DB_PASS: CANARYcmp2
      DATABASE_URL: postgres://u:CANARYcmp3@db/x
    command: ["--model", "org/m", "-tp", "2", "--weird", "$DB_PASS"]
""",
    "Dockerfile": """FROM vllm/vllm-openai:v0.24.0
ENV PGPASSWORD=CANARYdf1 DB_PASS=CANARYdf2
ENV SMTP_PW CANARYdf3
CMD ["--model", "org/m", "--served-model-name", "CANARYdf2"]
""",
}


@pytest.mark.parametrize("manifest", sorted(MANIFESTS))
@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "sarif", "junit", "github", "gitlab"])
def test_a_manifests_secrets_reach_no_output(tmp_path, manifest, fmt):
    (tmp_path / manifest).write_text(MANIFESTS[manifest])
    out = tmp_path / f"out.{fmt}"
    run = doctor("check", "--offline", "-v", "--fail-on", "never", "--format", fmt,
                 "--manifest", str(tmp_path / manifest), "-o", str(out))  # fmt: skip
    assert run.returncode == 0, run.stderr
    shown = run.stdout + run.stderr + out.read_bytes()
    assert b"CANARY" not in shown
    if fmt == "json":  # the variables are there, as set
        assert b'"env.PGPASSWORD"' in out.read_bytes()


# --- control characters: container names --------------------------------------------------------

SPOOF = 'services:\n  "vllm\\n::error title=SPOOF::x\\u001b[31m":\n    image: vllm/vllm-openai:v0.24.0\n    command: ["--model", "org/m", "-tp", "2"]\n'


@pytest.mark.parametrize("fmt", ["text", "markdown", "junit", "github", "gitlab", "sarif", "json"])
def test_a_container_name_never_steers_a_terminal_or_a_ci_log(tmp_path, fmt):
    (tmp_path / "compose.yaml").write_text(SPOOF)
    run = doctor("check", "--offline", "-v", "--fail-on", "never", "--format", fmt,
                 "--manifest", str(tmp_path / "compose.yaml"))  # fmt: skip
    assert run.returncode == 0, run.stderr
    for stream in (run.stdout, run.stderr):
        assert b"\x1b" not in stream
        assert not any(line.startswith(b"::error title=SPOOF") for line in stream.splitlines())
    if fmt == "junit":
        assert b"&#10;" not in run.stdout and b"vllm\\n::error" in run.stdout


def test_the_users_revision_is_asked_and_a_branch_is_resolved_to_a_commit(evil_hub, tmp_path):
    run, requests = hub_run(evil_hub, tmp_path, "ok", serve=("--revision", "v1.0"))
    assert run.returncode == 1, run.stderr
    paths = [path for _, path, _ in requests]
    assert paths[0] == "/api/models/evil/ok/revision/v1.0"
    # the files come from the answered commit, never from the branch name
    assert paths[1] == "/evil/ok/resolve/0123456789abcdef0123456789abcdef01234567/config.json"


@pytest.mark.parametrize(
    "argv, revision",
    [
        (["org/m", "--revision", "abc"], "abc"),
        (["org/m", "--revision=main"], "main"),
        (["org/m", "--tokenizer-revision", "x"], None),
        (["org/m"], None),
        ("not a list", None),
    ],
)
def test_given_revision(argv, revision):
    from vllm_doctor.facts.hub import given_revision

    assert given_revision(argv) == revision
