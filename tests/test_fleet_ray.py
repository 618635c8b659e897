"""`vllm-doctor fleet --ray` on a real local Ray cluster of three nodes (Ray's own multi-node
test cluster on one machine), one module-scoped cluster shared by the tests, run through the
real command: a node whose Python shows another vLLM (a distribution on that node's path) and a
node with another NCCL_SOCKET_IFNAME are reported with their nodes (exit 1); the same cluster
made uniform exits 0; a node whose Python never starts is a finding at the deadline, not a hang.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")  # the `test` extra installs it; CI always has it
from ray.cluster_utils import Cluster  # noqa: E402

# one worker runs every test that starts a local Ray cluster (pyproject's `--dist loadgroup`):
# each module's cluster starts once, whatever the worker count, and never beside the other
pytestmark = pytest.mark.xdist_group("ray-clusters")

DOCTOR = [sys.executable, "-m", "vllm_doctor"]
ROOT = Path(__file__).resolve().parent.parent  # the command runs from the checkout


def _fake_vllm(root: Path, version: str) -> str:
    info = root / f"vllm{version}" / f"vllm-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    return str(info.parent)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet")
    v24, v23 = _fake_vllm(root, "0.24.0"), _fake_vllm(root, "0.23.0")
    uniform = {"PYTHONPATH": v24, "NCCL_SOCKET_IFNAME": "lo"}
    # each node offers Ray one GPU resource (none is there: NVML is not), as a GPU node would
    node = {"num_cpus": 1, "num_gpus": 1}
    c = Cluster(initialize_head=True, head_node_args={**node, "env_vars": uniform})
    odd_version = c.add_node(**node, env_vars={**uniform, "PYTHONPATH": v23})
    odd_ifname = c.add_node(**node, env_vars={**uniform, "NCCL_SOCKET_IFNAME": "lo,eth"})
    c.wait_for_nodes()
    yield {
        "cluster": c,
        "uniform": uniform,
        "odd": [odd_version, odd_ifname],
        "root": root,
        "node": node,
    }
    c.shutdown()


def _fleet(address: str, *extra: str, timeout: float = 240) -> tuple[int, dict, str, float]:
    start = time.perf_counter()
    done = subprocess.run(
        [*DOCTOR, "fleet", "--ray", address, "--select", "FLEET", "--format", "json", *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    return done.returncode, json.loads(done.stdout), done.stderr, time.perf_counter() - start


def _fleet_findings(doc: dict) -> dict[str, dict]:
    fleet = next(t for t in doc["targets"] if t["target"]["kind"] == "fleet")
    return {f["code"]: f for f in fleet["findings"]}


def _evidence(finding: dict, suffix: str) -> list[str]:
    return next(e["value"] for e in finding["evidence"] if e["fact"].endswith(suffix))


def test_differences_are_reported_with_their_nodes_then_uniform_passes(cluster):
    c = cluster["cluster"]
    odd_version, odd_ifname = (n.node_id[:8] for n in cluster["odd"])
    code, doc, err, _ = _fleet(c.address, "--deadline", "120")
    assert code == 1, err
    findings = _fleet_findings(doc)
    assert set(findings) >= {"FLEET001", "FLEET008"}
    versions = _evidence(findings["FLEET001"], "vllm_version.nodes")
    assert len(versions) == 2
    lone = next(g for g in versions if g.startswith("0.23.0: "))
    assert odd_version in lone and odd_ifname not in lone
    assert next(g for g in versions if g.startswith("0.24.0: ")).count("@") == 2
    ifnames = _evidence(findings["FLEET008"], "env_NCCL_SOCKET_IFNAME.nodes")
    assert any(g.startswith("lo,eth: ") and odd_ifname in g for g in ifnames)
    # every node answered, through the runtime environment, and is named by id and IP
    nodes = doc["fleet"]["nodes"]
    assert len(nodes) == 3 and all(n["answered"] for n in nodes)
    assert all(n["ip"] and len(n["node_id"]) > 8 for n in nodes)
    assert "runtime environment" in doc["fleet"]["how"]
    # the doctor each node ran is the copy Ray shipped, the head's too (this test runs from the
    # checkout, the folder Ray would otherwise put first on the head's module path)
    assert all("/runtime_resources/py_modules_files/" in n["doctor"] for n in nodes), nodes
    # the same cluster made uniform: the two odd nodes restarted as the others are
    for node in cluster["odd"]:
        c.remove_node(node)
    cluster["odd"] = [c.add_node(**cluster["node"], env_vars=cluster["uniform"]) for _ in range(2)]
    c.wait_for_nodes()
    code, doc, err, _ = _fleet(c.address, "--deadline", "120")
    assert code == 0, (err, {k: f["evidence"] for k, f in _fleet_findings(doc).items()})
    assert not _fleet_findings(doc)
    assert len(doc["fleet"]["nodes"]) == 3


def test_a_node_that_does_not_answer_is_a_finding_at_the_deadline(cluster):
    c = cluster["cluster"]
    import os

    stuck = cluster["root"] / "stuck" / "vllm-0.24.0.dist-info"
    stuck.mkdir(parents=True)
    # a package on this node's path whose metadata never reads back (a hung network mount,
    # say): the doctor's package collector blocks on it there
    os.mkfifo(stuck / "METADATA")
    stuck = stuck.parent
    env = {**cluster["uniform"], "PYTHONPATH": f"{stuck}:{cluster['uniform']['PYTHONPATH']}"}
    hung = c.add_node(**cluster["node"], env_vars=env, wait=False)
    try:
        c.wait_for_nodes()
        code, doc, err, took = _fleet(c.address, "--deadline", "25")
        assert code == 1, err
        silent = _evidence(_fleet_findings(doc)["FLEET017"], "silent_nodes")
        assert len(silent) == 1 and hung.node_id[:8] in silent[0] and "deadline" in silent[0]
        assert took < 120  # the deadline ended it, with Ray's own start and exit around it
    finally:
        c.remove_node(hung, allow_graceful=False)
