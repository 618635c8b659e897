"""The probe runner with self-test probes (no torch): deadlines, crashes, sticky errors,
teardown hangs, isolated parts, Ctrl-C/SIGTERM clean-up, and that nothing is left running."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vllm_doctor.errors import InputError
from vllm_doctor.probes import run_probes
from vllm_doctor.probes.collection import tail
from vllm_doctor.probes.launch import pid_alive

ROOT = Path(__file__).resolve().parent.parent


def by_name(results):
    return {r.name: r for r in results}


def pids_in(run_dir: Path) -> set[int]:
    """Every process the runner started (its pid list) and every pid a worker announced."""
    pids = set()
    if (run_dir / "pids").exists():
        pids.update(int(w) for w in (run_dir / "pids").read_text().split())
    for f in run_dir.glob("events.*.jsonl"):
        for line in f.read_text().splitlines():
            ev = json.loads(line)
            if ev.get("ev") in ("hello", "forked") and ev.get("pid"):
                pids.add(int(ev["pid"]))
    return pids


def assert_all_gone(pids):
    assert pids, "no worker pids were recorded"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.05)
    assert not [p for p in pids if pid_alive(p)]


def test_ok_and_isolated_part_per_rank(tmp_path):
    res = by_name(run_probes(["selftest-ok", "selftest-part"], 2, "cpu", 20, run_dir=tmp_path))
    ok = res["selftest-ok"]
    assert ok.status == "pass"
    assert [r["rank"] for r in ok.ranks] == [0, 1]
    assert {r["metrics"]["pid"] for r in ok.ranks} == {
        r["metrics"]["pid"] for r in ok.ranks
    } and len({r["metrics"]["pid"] for r in ok.ranks}) == 2  # one process per rank
    part = res["selftest-part"]
    assert part.status == "pass"
    child_pid = part.metrics["child"]["child_pid"]
    assert child_pid not in {r["metrics"]["rank"] for r in part.ranks}
    assert "teardown" not in res  # no process group: nothing to tear down
    assert_all_gone(pids_in(tmp_path))


def test_deadline_kills_and_later_probes_run_in_fresh_workers(tmp_path):
    t0 = time.monotonic()
    res = by_name(run_probes(["selftest-sleep", "selftest-raise"], 2, "cpu", 1.5, run_dir=tmp_path))
    elapsed = time.monotonic() - t0
    sleep = res["selftest-sleep"]
    assert sleep.status == "timeout"
    assert "1.5s deadline" in sleep.reason
    assert any("sleeping forever" in line for line in sleep.log_tail)
    raised = res["selftest-raise"]
    assert raised.status == "error" and "planned failure" in raised.reason
    assert any("ran again in fresh worker processes" in n for n in raised.notes)
    assert elapsed < 15
    assert_all_gone(pids_in(tmp_path))


def test_one_rank_timing_out_reports_per_rank(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_DOCTOR_PROBE_PARAMS", json.dumps({"selftest": {"sleep_rank": 1}}))
    res = by_name(run_probes(["selftest-sleep"], 2, "cpu", 1.0, run_dir=tmp_path))
    ranks = {r["rank"]: r["status"] for r in res["selftest-sleep"].ranks}
    assert ranks == {0: "pass", 1: "timeout"}
    assert res["selftest-sleep"].status == "timeout"


def test_crash_is_reported_with_signal_and_log(tmp_path):
    res = by_name(run_probes(["selftest-crash", "selftest-ok"], 2, "cpu", 20, run_dir=tmp_path))
    crash = res["selftest-crash"]
    assert crash.status == "error"
    assert "SIGABRT" in crash.reason
    assert any("about to abort" in line for line in crash.log_tail)
    assert res["selftest-ok"].status == "pass"  # the doctor went on
    assert_all_gone(pids_in(tmp_path))


def test_sticky_error_stops_the_process_and_the_rest_reruns(tmp_path):
    res = by_name(run_probes(["selftest-poison", "selftest-part"], 2, "cpu", 20, run_dir=tmp_path))
    assert res["selftest-poison"].status == "error"
    assert "illegal memory access" in res["selftest-poison"].reason
    later = res["selftest-part"]  # runs after the poisoned probe: in fresh processes
    assert later.status == "pass"
    assert any("fresh worker processes" in n for n in later.notes)
    assert later.metrics["child"]["status"] == "pass"  # its part was not forked twice
    assert len(list(tmp_path.glob("events.part-*.jsonl"))) == 1
    assert len(list(tmp_path.glob("rank0.g*.log"))) == 2  # a second worker group ran


def test_teardown_that_never_exits_is_killed_and_reported(tmp_path):
    t0 = time.monotonic()
    res = by_name(
        run_probes(["selftest-teardown-hang"], 2, "cpu", 20, run_dir=tmp_path, teardown_timeout=0.5)
    )
    elapsed = time.monotonic() - t0
    assert res["selftest-teardown-hang"].status == "pass"  # results came before the hang
    td = res["teardown"]
    assert td.status == "warn"
    assert "teardown hang" in td.reason and "killed" in td.reason
    assert all(r["killed"] for r in td.ranks)
    assert elapsed < 10
    assert_all_gone(pids_in(tmp_path))


def test_teardown_call_that_never_returns_is_reported_by_the_worker(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_DOCTOR_PROBE_PARAMS", json.dumps({"selftest": {"teardown": "soft"}}))
    res = by_name(
        run_probes(["selftest-teardown-hang"], 2, "cpu", 20, run_dir=tmp_path, teardown_timeout=0.5)
    )
    td = res["teardown"]
    assert td.status == "warn"
    assert "did not return within 0.5s" in td.reason
    assert all(r["returned"] is False and not r["killed"] for r in td.ranks)


def test_part_that_overruns_is_killed_and_the_probe_warns(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_DOCTOR_PROBE_PARAMS", json.dumps({"selftest": {"part_sleep": True}}))
    res = by_name(run_probes(["selftest-part"], 1, "cpu", 1.5, run_dir=tmp_path))
    part = res["selftest-part"]
    assert part.status == "warn"
    assert "child sub-check" in part.reason and "deadline" in part.reason
    assert_all_gone(pids_in(tmp_path))


def test_unknown_probe_is_an_input_error():
    with pytest.raises(InputError):
        run_probes(["no-such-probe"], 1, "cpu", 5)
    with pytest.raises(InputError):
        run_probes(["selftest-ok"], 0, "cpu", 5)
    with pytest.raises(InputError):
        run_probes(["selftest-ok"], 1, "tpu", 5)


def test_gpu_only_probes_skip_on_cpu_without_launching(tmp_path):
    res = by_name(
        run_probes(
            ["cudagraph-replay", "fp8-scaled-mm-3d", "p2p-nccl"], 2, "cpu", 5, run_dir=tmp_path
        )
    )
    for name in ("cudagraph-replay", "fp8-scaled-mm-3d", "p2p-nccl"):
        assert res[name].status == "skip" and "CUDA GPU" in res[name].reason
    assert not list(tmp_path.glob("*.log"))


def test_multi_rank_probes_skip_at_tp1(tmp_path):
    res = by_name(run_probes(["tp-softembed", "pp-handoff"], 1, "cpu", 5, run_dir=tmp_path))
    assert res["tp-softembed"].status == "skip" and "needs 2 ranks" in res["tp-softembed"].reason


def test_tail_drops_cpp_frames(tmp_path):
    log = tmp_path / "x.log"
    log.write_text(
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: an illegal memory access was encountered\n"
        + "".join(f"frame #{i}: f + 0x1 (0x2 in lib.so)\n" for i in range(30))
    )
    lines = tail(log)
    assert lines[-1].strip().startswith("what():")
    assert not any(line.startswith("frame #") for line in lines)


def default_signals() -> None:
    """For the doctor under test: a shell starting a command in the background has it ignore
    SIGINT and SIGQUIT (POSIX), and the exec'd doctor would inherit that."""
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


def wait_until_asleep(proc, run_dir, seconds: float) -> Path:
    """The run directory (``run_dir()``, None until it exists) once both ranks sleep and the
    isolated part has started; the test fails if that takes longer than ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = run_dir()
        if found is not None:
            logs = " ".join(p.read_text(errors="replace") for p in found.glob("rank*.log"))
            if logs.count("sleeping forever") >= 2 and list(found.glob("events.part-*.jsonl")):
                return found
        time.sleep(0.05)
    proc.kill()
    pytest.fail("workers did not start")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_kills_every_worker_and_part(tmp_path, sig):
    env = dict(
        os.environ,
        VLLM_DOCTOR_PROBE_DIR=str(tmp_path),
        VLLM_DOCTOR_PROBE_PARAMS=json.dumps({"selftest": {"part_sleep": True}}),
        PYTHONPATH=str(ROOT),
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vllm_doctor",
            "probe",
            "--device",
            "cpu",
            "--tp",
            "2",
            "--only",
            "selftest-part,selftest-sleep",
            "--timeout",
            "60",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=default_signals,  # noqa: PLW1509 - no threads yet
    )
    wait_until_asleep(proc, lambda: tmp_path, seconds=20)
    pids = pids_in(tmp_path)
    assert len(pids) >= 3  # two ranks and the isolated part
    assert all(pid_alive(p) for p in pids)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert b"Traceback" not in err
    assert_all_gone(pids)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGQUIT])
def test_killing_the_doctor_outright_leaves_no_worker_and_no_directory(tmp_path, sig):
    """SIGKILL/SIGQUIT give the doctor no chance to clean up: the workers die with it
    (parent-death signal, watchdog) and the reaper removes the temporary run directory."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(
        os.environ,
        TMPDIR=str(tmp),
        PYTHONPATH=str(ROOT),
        VLLM_DOCTOR_PROBE_PARAMS=json.dumps({"selftest": {"part_sleep": True}}),
    )
    env.pop("VLLM_DOCTOR_PROBE_DIR", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vllm_doctor",
            "probe",
            "--device",
            "cpu",
            "--tp",
            "2",
            "selftest-part",
            "selftest-sleep",
            "--timeout",
            "60",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=default_signals,  # noqa: PLW1509 - no threads yet
    )
    run_dir = wait_until_asleep(
        proc, lambda: next(tmp.glob("vllm-doctor-probe-*"), None), seconds=30
    )
    pids = pids_in(run_dir)
    assert len(pids) >= 3 and all(pid_alive(p) for p in pids)  # two ranks and the isolated part
    proc.send_signal(sig)
    proc.wait(timeout=10)
    assert_all_gone(pids)
    deadline = time.monotonic() + 5
    while run_dir.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not run_dir.exists()


def test_rank_count_timeout_and_teardown_limits_are_checked():
    from vllm_doctor.probes.launch import max_ranks

    assert max_ranks("cpu") >= 4  # world size 4 runs on a 2-core CI machine
    with pytest.raises(InputError, match="more than this machine can run"):
        run_probes(["selftest-ok"], max_ranks("cpu") + 1, "cpu", 5)
    with pytest.raises(InputError, match="2 are visible"):
        run_probes(["selftest-ok"], 3, "cuda", 5, visible_gpus=2)
    for bad in (float("nan"), float("inf"), 0, -1, 10**9):
        with pytest.raises(InputError, match="--timeout"):
            run_probes(["selftest-ok"], 1, "cpu", bad)
    with pytest.raises(InputError, match="--teardown-timeout"):
        run_probes(["selftest-ok"], 1, "cpu", 5, teardown_timeout=float("nan"))


def test_world_size_4_runs_every_rank(tmp_path):
    res = by_name(run_probes(["selftest-ok", "selftest-part"], 4, "cpu", 30, run_dir=tmp_path))
    assert res["selftest-ok"].status == "pass"
    assert [r["rank"] for r in res["selftest-ok"].ranks] == [0, 1, 2, 3]
    assert {r["metrics"]["world"] for r in res["selftest-ok"].ranks} == {4}
    assert res["selftest-part"].metrics["child"]["status"] == "pass"
    assert_all_gone(pids_in(tmp_path))


def test_verdict_words_before_the_join_name_a_mechanism_not_a_bug():
    from vllm_doctor.probes import ProbeResult
    from vllm_doctor.probes.render import mark_and_style

    fixed = ProbeResult("p", "pass", "both fixes match", rules_confirmed=["MODEL001"])
    assert fixed.verdict() == "mechanism present (MODEL001); the fix's approach verified"
    assert mark_and_style(fixed) == ("[!]", "yellow")
    broken = ProbeResult("p", "fail", "fix B off the reference", rules_confirmed=["MODEL001"])
    assert "the fix's approach did not check out: fix B off" in broken.verdict()
    assert mark_and_style(broken)[1] == "red"
    clean = ProbeResult("p", "pass", "all pairs", rules_refuted=["HW001"])
    assert clean.verdict() == "ok: no known failure's mechanism shown (mechanism absent: HW001)"
    assert mark_and_style(clean) == ("[✓]", "green")
    joined = ProbeResult(
        "p",
        "pass",
        "",
        rules_confirmed=["MODEL001"],
        verdicts=[{"rule": "MODEL001", "level": "pass", "text": "protected"}],
    )
    assert joined.verdict() == "MODEL001: protected" and mark_and_style(joined) == ("[✓]", "green")


def test_link_class_expectations():
    from vllm_doctor.probes.p2p_nccl import _link_class, expected_busbw

    assert (
        _link_class("NV18", True) == "nvlink"
        and _link_class("NV18", True, nvswitch=True) == "nvswitch"
    )
    assert expected_busbw("nvlink", 18) == 90.0 and expected_busbw("nvswitch", 12) == 60.0
    assert expected_busbw("nvlink", 1) == 5.0
    assert _link_class("PIX", True) == "pcie-p2p" and _link_class("SYS", False) == "pcie-no-p2p"
    assert expected_busbw("pcie-p2p") > expected_busbw("pcie-no-p2p") > 0
    assert expected_busbw("inter-node") == 1.0


def test_a_rank_that_never_joins_ends_at_the_join_deadline_naming_it(tmp_path):
    pytest.importorskip("torch")  # the process group is gloo's
    plant = {"selftest": {"never_join_rank": 1, "hold_s": 0}}
    start = time.monotonic()
    res = by_name(
        run_probes(["selftest-hold"], 2, "cpu", 60, run_dir=tmp_path, params=plant, join_timeout=3)
    )
    hold = res["selftest-hold"]
    assert hold.status == "timeout"
    assert "within the 3s join deadline" in hold.reason
    assert "rank 1 never joined the process group; it had started" in hold.reason
    assert "rank 0 waited in init_process_group" in hold.reason
    stopped = {r["rank"]: r["metrics"]["stopped"] for r in hold.ranks}
    assert stopped[1]["blamed"] and not stopped[0]["blamed"] and stopped[1]["where"] is None
    assert time.monotonic() - start < 55  # the join deadline, not the 60 s start-up limit
    assert_all_gone(pids_in(tmp_path))
