"""Multi-node groups from Helm values (issue 33, item 2): llm-d's modelservice chart with
``multinode: true`` (a LeaderWorkerSet per role whose group is the chart's ``numWorkers`` pods,
the parallelism helpers of llm-d-incubation/llm-d-modelservice v0.4.12's ``_helpers.tpl``, the
variables it adds, what the values leave to the chart's version) and production-stack's
``raySpec`` (the RayCluster's head and workers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_doctor.errors import InputError
from vllm_doctor.facts.collect import CollectOptions, collect_facts
from vllm_doctor.serveline import manifest

WIDE_EP = (
    Path(__file__).parent
    / "fixtures"
    / "manifests"
    / "deployments"
    / "llm-d-modelservice-values-wide-ep.yaml"
)


def facts_of(target):
    return collect_facts(CollectOptions(manifest_target=target, probe_machine=False))


def test_the_wide_ep_guide_values_are_a_leader_worker_set_per_role():
    decode, prefill = manifest.read_targets(str(WIDE_EP))
    assert decode.name == (
        "LeaderWorkerSet/release-name-llm-d-modelservice-decode worker container vllm-worker-decode"
    )
    assert prefill.name.startswith("LeaderWorkerSet/release-name-llm-d-modelservice-prefill ")
    for target in (decode, prefill):
        facts = facts_of(target)
        # `--tensor-parallel-size $TP_SIZE`: the chart's TP_SIZE (parallelism.tensor)
        assert facts.value("serve.tensor_parallel_size") == 1
        assert facts.value("env.TP_SIZE") == "1"
        assert facts.value("deploy.gpus_per_pod") == 8  # the container's own limit
        # the role's volumes: /dev/shm is the 1 GiB Memory emptyDir, not the runtime's 64 MB
        assert facts.value("deploy.shm_mib") == 1024
        # $((LWS_GROUP_SIZE * DP_SIZE_LOCAL)) is arithmetic on the group: never guessed
        assert "serve.data_parallel_size" not in facts
    decode_facts, prefill_facts = facts_of(decode), facts_of(prefill)
    # decode's `data: 2` alone: 2 pods for the chart the guide pinned (v0.2.7), one pod of
    # two ranks for charts since v0.3.6 — undecided, with both readings and the fix
    assert "deploy.nodes" not in decode_facts
    reason = decode_facts.why_missing("deploy.nodes")
    assert "before v0.3.6" in reason and "set parallelism.workers and dataLocal" in reason
    assert "env.DP_SIZE_LOCAL" not in decode_facts  # the chart's own, or the container's
    # prefill's `data: 1` is one pod for every chart; the container's DP_SIZE_LOCAL=8 is
    # overridden by the chart's 1 since v0.3.6 and kept before it: undecided
    assert prefill_facts.value("deploy.nodes") == 1
    assert "env.DP_SIZE_LOCAL" not in prefill_facts


VALUES = """modelArtifacts:
  name: deepseek-ai/DeepSeek-R1
  uri: hf://deepseek-ai/DeepSeek-R1
multinode: true
decode:
  parallelism: {PARALLELISM}
  containers:
  - name: vllm
    image: ghcr.io/llm-d/llm-d-cuda:v0.3.0
    modelCommand: vllmServe
prefill:
  create: false
"""


@pytest.mark.parametrize(
    "parallelism, pods, gpus, options",
    [
        # workers and dataLocal: the chart's own example of a two-node group
        ("{tensor: 1, data: 16, dataLocal: 8, workers: 2}", 2, 8, (16, 8)),
        # data and workers: dataLocal = data / workers
        ("{tensor: 2, data: 8, workers: 2}", 2, 8, (8, 4)),
        # data and dataLocal: the group is data / dataLocal pods
        ("{tensor: 1, data: 16, dataLocal: 4}", 4, 4, (16, 4)),
        # dataLocal and workers: data = dataLocal × workers
        ("{tensor: 1, dataLocal: 8, workers: 4}", 4, 8, (32, 8)),
    ],
)
def test_the_group_and_the_gpus_follow_the_charts_helpers(parallelism, pods, gpus, options):
    (target,) = manifest.read_targets("values.yaml", VALUES.replace("{PARALLELISM}", parallelism))
    assert target.name == (
        "LeaderWorkerSet/release-name-llm-d-modelservice-decode worker container vllm"
    )
    facts = facts_of(target)
    assert facts.value("deploy.nodes") == pods
    assert facts.value("deploy.gpus_per_pod") == gpus  # tensor × data-local, the chart adds
    assert facts.value("deploy.gpus") == pods * gpus
    assert facts.get("deploy.nodes").detail.startswith("values.yaml:6 ")  # the parallelism line
    assert (facts.value("serve.data_parallel_size"), facts.value("env.DP_SIZE_LOCAL")) == (
        options[0],
        str(options[1]),
    )


def test_without_multinode_the_same_values_are_a_deployment():
    text = VALUES.replace("multinode: true\n", "").replace(
        "{PARALLELISM}", "{tensor: 2, data: 8, workers: 2}"
    )
    (target,) = manifest.read_targets("values.yaml", text)
    assert target.name == "Deployment/release-name-llm-d-modelservice-decode container vllm"
    assert facts_of(target).value("deploy.gpus_per_pod") == 8


def test_parallelism_the_chart_refuses_to_render_is_exit_2():
    text = VALUES.replace("{PARALLELISM}", "{tensor: 1, data: 7, workers: 2}")
    with pytest.raises(InputError) as err:
        manifest.read_targets("values.yaml", text)
    assert "data must be a multiple of workers" in err.value.problem


# -- production-stack's raySpec: the chart's KubeRay RayCluster ----------------------------------

RAY_VALUES = (
    Path(__file__).parent
    / "fixtures"
    / "manifests"
    / "deployments"
    / "production-stack-values-15-a-pipeline-parallel-raycluster.yaml"
)


def test_a_ray_model_spec_is_the_ray_clusters_head_and_its_workers():
    (head,) = manifest.read_targets(str(RAY_VALUES))  # no Deployment: the chart renders none
    assert head.name == (
        "RayCluster/release-name-distilgpt2-raycluster-raycluster head container vllm-ray-head"
    )
    facts = facts_of(head)
    # vllm-entrypoint.sh's line: the Ray executor, the vllmConfig's parallelism
    assert facts.value("serve.distributed_executor_backend") == "ray"
    assert facts.value("serve.pipeline_parallel_size") == 2
    assert facts.value("serve.world_size") == 2
    # the head and replicaCount (1) workers, one GPU each: the world size spans two pods
    assert facts.value("deploy.nodes") == 2
    assert facts.get("deploy.nodes").detail.startswith(f"{RAY_VALUES}:9 ")  # replicaCount
    assert facts.value("deploy.gpus_per_pod") == 1
    assert facts.value("deploy.gpus") == 2
    assert facts.value("env.EXPECTED_NODES") == "2"
    assert facts.value("deploy.shm_mib") == 20 * 1024


def test_a_ray_head_asking_for_other_gpus_than_its_workers_leaves_the_group_open():
    text = RAY_VALUES.read_text(encoding="utf-8")
    assert text.count("requestGPU: 1") == 2  # the workers' (modelSpec), then the head's
    head_asks_two = "requestGPU: 2".join(text.rsplit("requestGPU: 1", 1))
    (head,) = manifest.read_targets("values.yaml", head_asks_two)
    facts = facts_of(head)
    assert facts.value("deploy.gpus_per_pod") == 2
    assert "deploy.nodes" not in facts and "deploy.gpus" not in facts
    assert "the Ray head asks for 2 GPU(s), each of the 1 worker(s) for 1" in facts.why_missing(
        "deploy.nodes"
    )
