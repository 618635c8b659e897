"""The real probes on the CPU (gloo, world size 2, small shapes): through the runner and
through torchrun with the very same worker."""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from doctor_forks import doctor_run

# the ranks import torch, not this process (each test worker collects every module)
if importlib.util.find_spec("torch") is None:
    pytest.skip("torch is not installed", allow_module_level=True)

from vllm_doctor.probes import load_results_dir, run_probes
from vllm_doctor.probes.registry import BY_NAME

ROOT = Path(__file__).resolve().parent.parent
CPU_PROBES = ["tp-softembed", "padded-batch", "pp-handoff"]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_DOCTOR_CACHE_DIR", str(tmp_path / "cache"))


def check_cpu_results(res, world=2):
    soft = res["tp-softembed"]
    assert soft.status == "pass", soft.reason
    m = soft.metrics
    assert m["sizes_from"] == "shrunk for a CPU run" and m["shrunk_from"] == [262144, 2816]
    shard = 4096 // world
    assert m["bug_eager"].startswith(
        f"RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x4096 and {shard}x64)"
    )
    assert m["fix_allgather_weight_exact"] is True
    assert m["fix_allgather_rel_err"] < m["tolerance_rel"]
    assert m["fix_slice_allreduce_rel_err"] < m["tolerance_rel"]
    assert m["fix_allgather_extra_bytes_per_rank"] == (4096 - shard) * 64 * 2
    assert m["allgather_busbw_gbps"] == pytest.approx(
        m["allgather_algbw_gbps"] * (world - 1) / world, abs=0.02
    )
    assert re.fullmatch(
        r"a and b must have same reduction dim, but got \[s\d+, s\d+\] X "
        rf"\[{512 // world}, 64\]\.",
        m["compile"]["error"],
    )
    assert soft.rules_confirmed == ["MODEL001"]
    assert len(soft.ranks) == world

    pad = res["padded-batch"]
    assert pad.status == "pass", pad.reason
    assert set(pad.rules_confirmed) == {"SPEC002", "SPEC003"}
    for case in pad.metrics["block_table"]:
        assert case["unsliced_outcome"] == "raises"
        assert case["sliced_ok"] and case["sliced_max_abs_err"] < 1e-4
        assert case["padded_to"] > case["num_reqs"]
    idx = pad.metrics["indexer"]
    assert idx["num_decode_tokens"] == 10 and idx["unpacked_rows"] == 8
    assert "must match the existing size (8)" in idx["writeback_padded"]
    assert idx["writeback_fixed_ok"] and idx["writeback_untouched_rows_ok"]

    pp = res["pp-handoff"]
    assert pp.status == "pass", pp.reason
    assert pp.metrics["fix_cast_int64_exact"] is True
    assert (
        "torch.int32" in pp.metrics["guard"]["int32"] and pp.metrics["guard"]["int64"] == "accepted"
    )
    assert pp.metrics["float32_ids_wrong"] == 0 and pp.metrics["bfloat16_ids_wrong"] > 0
    assert pp.metrics["sampling_stage"] == world - 1
    assert pp.rules_confirmed == ["MODEL002"]


def test_cpu_probes_through_the_runner(tmp_path, monkeypatch):
    """The CPU probes through the runner on one node, where the ranks meet through a file
    store; the same group of ranks then holds its process group (selftest-hold) while gloo's
    sockets are looked at: they stay on loopback."""
    run = tmp_path / "run"
    results, addresses = run_holding_the_group([*CPU_PROBES, "selftest-hold"], run, monkeypatch)
    res = {r.name: r for r in results}
    hold = res["selftest-hold"]
    assert hold.status == "pass" and hold.ranks[0]["metrics"]["backend"] == "gloo"
    loopback = ("0100007F", "00000000000000000000000001000000")
    assert all(a in loopback for a in addresses), addresses
    check_cpu_results(res)
    td = res["teardown"]
    assert td.status == "pass" and td.metrics["destroy_process_group_s"] is not None
    for r in results:
        json.dumps(r.to_dict())
    # A second run, of a model's sizes: the compile sub-check (tiny shapes of its own, keyed by
    # the world size only) is cached now and reused, saying so; the model's sizes are used and
    # its odd vocabulary padded
    again = {
        r.name: r
        for r in run_probes(
            ["tp-softembed"], 2, "cpu", 120, {"vocab_size": 1001, "hidden_size": 48}
        )
    }
    import torch

    assert again["tp-softembed"].metrics["compile"]["cached"]["torch"] == torch.__version__
    assert (
        again["tp-softembed"].metrics["compile"]["error"]
        == res["tp-softembed"].metrics["compile"]["error"]
    )
    m = again["tp-softembed"].metrics
    assert (m["vocab_size"], m["hidden_size"], m["padded_vocab"]) == (1001, 48, 1002)
    assert m["shrunk_from"] == [1001, 48]
    assert again["tp-softembed"].status == "pass"


@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun not installed")
def test_cpu_probes_through_torchrun(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [
            "torchrun",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "vllm_doctor.probes.worker",
            "--device",
            "cpu",
            "--out",
            str(out),
            "--probes",
            ",".join(CPU_PROBES),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "[rank 1] padded-batch: pass" in proc.stdout
    res = {r.name: r for r in load_results_dir(out)}
    check_cpu_results(res)
    assert res["teardown"].status == "pass"
    cli = doctor_run("probe", "--results", str(out), "--format", "json", env=env, timeout=60)
    assert cli.returncode == 0, cli.stderr
    doc = json.loads(cli.stdout)
    assert doc["tp"] == 2 and doc["summary"]["pass"] == 4


def test_every_probe_module_has_its_functions():
    import importlib

    for spec in BY_NAME.values():
        module = importlib.import_module(f"vllm_doctor.probes.{spec.module}")
        assert callable(getattr(module, "run_" + spec.name.replace("-", "_"), None) or module.run)
        for part in spec.parts:
            assert callable(getattr(module, "part_" + part.name))


def test_cpu_probes_at_world_size_4(tmp_path):
    """The runner and the probes at world size 4 (gloo; more ranks than this CI machine has cores)."""
    res = {r.name: r for r in run_probes(CPU_PROBES, 4, "cpu", 300, None, run_dir=tmp_path / "run")}
    check_cpu_results(res, world=4)
    assert res["teardown"].status == "pass" and len(res["teardown"].ranks) == 4


def _listening(pids: set[int]) -> list[str]:
    """Local addresses of the TCP sockets in LISTEN state that these processes hold."""
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                out.append(fields[1].split(":")[0])
    return out


def run_holding_the_group(probes, run, monkeypatch):
    """``run_probes`` at world size 2 with selftest-hold among ``probes``: the ranks hold their
    process group (60 s at most) until the TCP sockets they listen on have been read; the
    results, and those sockets' local addresses."""
    import threading

    release = run.parent / "looked"
    hold = {"hold_s": 60, "release_file": str(release)}
    monkeypatch.setenv("VLLM_DOCTOR_PROBE_PARAMS", json.dumps({"selftest": hold}))
    box = {}
    thread = threading.Thread(
        target=lambda: box.setdefault("res", run_probes(probes, 2, "cpu", 120, run_dir=run))
    )
    thread.start()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            logs = " ".join(p.read_text(errors="replace") for p in run.glob("rank*.log"))
            if logs.count("holding its process group") >= 2:
                break
            time.sleep(0.1)
        pids = {int(w) for w in (run / "pids").read_text().split()}
        addresses = _listening(pids)
    finally:
        release.touch()
    thread.join(120)
    return box["res"], addresses
