"""`vllm-doctor probe --ray` on a real local Ray cluster (Ray's multi-node test cluster on one
machine, one module-scoped cluster of two nodes of two CPUs), the CPU (gloo) variant, through the
real command: the ranks are placed as vLLM's Ray executor places its workers (packed per node,
the node's ranks contiguous) and run where the placement says (each node's own environment shows
in its ranks' reports); the collectives probe passes across the nodes; a planted rank that never
joins the process group ends at the join deadline with a finding naming the rank, its node and
where the others waited.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time

import pytest

from vllm_doctor.fleet.probe_ray import Rank, carried_env, worker_order

if importlib.util.find_spec("torch") is None:  # the probes' workers import it on the nodes
    pytest.skip("torch is not installed", allow_module_level=True)
ray = pytest.importorskip("ray")  # the `test` extra installs it; CI always has it
from ray.cluster_utils import Cluster  # noqa: E402

# one worker runs every test that starts a local Ray cluster (pyproject's `--dist loadgroup`):
# each module's cluster starts once, whatever the worker count, and never beside the other
pytestmark = pytest.mark.xdist_group("ray-clusters")

DOCTOR = [sys.executable, "-m", "vllm_doctor"]
IFNAMES = ("lo", "lo,node-b")  # each node's NCCL_SOCKET_IFNAME, reported by its ranks


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 2, "env_vars": {"NCCL_SOCKET_IFNAME": IFNAMES[0]}},
    )
    c.add_node(num_cpus=2, env_vars={"NCCL_SOCKET_IFNAME": IFNAMES[1]})
    c.wait_for_nodes()
    yield c
    c.shutdown()


def _probe(address: str, *args: str, params: dict | None = None) -> tuple[int, dict, str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    if params is not None:
        env["VLLM_DOCTOR_PROBE_PARAMS"] = json.dumps(params)
    start = time.perf_counter()
    done = subprocess.run(
        [
            *DOCTOR,
            "probe",
            "collectives",
            "--ray",
            address,
            "--device",
            "cpu",
            "--format",
            "json",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    took = time.perf_counter() - start
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr, took


def _node_env(c: Cluster) -> dict[str, str]:
    """Ray node id (short) -> the NCCL_SOCKET_IFNAME its raylet was started with."""
    nodes = [c.head_node, *c.worker_nodes]
    return {n.node_id[:8]: IFNAMES[i] for i, n in enumerate(nodes)}


def test_ranks_are_placed_as_vllm_places_them_and_the_collectives_pass(cluster):
    code, doc, err, _ = _probe(cluster.address, "--tp", "3")
    assert code == 0, (err, [(r["name"], r["status"], r.get("reason")) for r in doc["results"]])
    placement = doc["ray"]["placement"]
    # PACK over two nodes of two CPUs: two ranks on one node, one on the other, each node's
    # ranks contiguous (vLLM numbers the workers node by node)
    assert sorted(len(n["ranks"]) for n in placement) == [1, 2]
    assert sorted(r for n in placement for r in n["ranks"]) == [0, 1, 2]
    for node in placement:
        assert node["ranks"] == list(range(node["ranks"][0], node["ranks"][0] + len(node["ranks"])))
    result = next(r for r in doc["results"] if r["name"] == "collectives")
    assert result["status"] == "pass", result["reason"]
    metrics = result["metrics"]
    assert metrics["allreduce_ok"] and metrics["allgather_ok"] and metrics["backend"] == "gloo"
    claimed = {n["node"]: sorted(n["ranks"]) for n in placement}
    assert {k: sorted(v) for k, v in metrics["ranks_by_node"].items()} == claimed
    # every rank ran on the node the placement names: it reports that node's own environment
    env_of = _node_env(cluster)
    for place in metrics["places"]:
        assert place["socket"]["name"] == env_of[place["node"][:8]], place


def test_a_rank_that_never_joins_is_a_finding_at_the_join_deadline(cluster):
    plant = {"selftest": {"never_join_rank": 1}}
    code, doc, err, took = _probe(cluster.address, "--tp", "2", "--join-timeout", "4", params=plant)
    assert code == 1, err
    result = next(r for r in doc["results"] if r["name"] == "collectives")
    assert result["status"] == "timeout"
    placed = {r: n["node"] for n in doc["ray"]["placement"] for r in n["ranks"]}
    assert f"rank 1 on node {placed[1]} never joined the process group" in result["reason"]
    assert f"rank 0 on node {placed[0]} waited in init_process_group" in result["reason"]
    stopped = {r["rank"]: r["metrics"]["stopped"] for r in result["ranks"]}
    assert stopped[1]["blamed"] and not stopped[0]["blamed"]
    assert stopped[1]["where"] == f"node {placed[1]}"
    assert took < 120  # the join deadline ended it, with Ray's and torch's start around it


def _rank(node: str, ip: str) -> Rank:
    return Rank(rank=0, actor=None, node_id=node, ip=ip, gpu_ids=[])


def test_worker_order_is_vllms_driver_node_first_then_fewer_workers_then_ip():
    # bundles as Ray placed them: two on node b, one on c, three on the driver's node a
    placed = [
        _rank("b", "10.0.0.2"),
        _rank("c", "10.0.0.3"),
        _rank("a", "10.0.0.9"),
        _rank("b", "10.0.0.2"),
        _rank("a", "10.0.0.9"),
        _rank("a", "10.0.0.9"),
    ]
    order = [r.node_id for r in worker_order(placed, driver_node="a")]
    assert order == ["a", "a", "a", "c", "b", "b"]


def test_the_drivers_nccl_vllm_and_hub_variables_travel_to_every_rank():
    env = {
        "NCCL_SOCKET_IFNAME": "eth0",
        "VLLM_LOGGING_LEVEL": "DEBUG",
        "HF_HOME": "/models",
        "PYTHONHASHSEED": "0",
        "VLLM_HOST_IP": "10.0.0.1",  # each worker's own
        "CUDA_VISIBLE_DEVICES": "0,1",
        "PATH": "/usr/bin",
    }
    assert carried_env(env) == {
        "NCCL_SOCKET_IFNAME": "eth0",
        "VLLM_LOGGING_LEVEL": "DEBUG",
        "HF_HOME": "/models",
        "PYTHONHASHSEED": "0",
    }


def test_ray_with_results_is_bad_input(tmp_path):
    done = subprocess.run(
        [*DOCTOR, "probe", "--ray", "auto", "--results", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--results" in done.stderr


def test_more_ranks_than_the_cluster_offers_is_one_line_and_exit_2(cluster):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    done = subprocess.run(
        [*DOCTOR, "probe", "collectives", "--ray", cluster.address, "--device", "cpu", "--tp", "9"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 2
    assert (
        done.stderr.count("\n") == 1
        and "cannot place vLLM's placement group of 9 CPU" in done.stderr
    )
    assert "CPU per node" in done.stderr
