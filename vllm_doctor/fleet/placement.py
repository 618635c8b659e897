"""Where vLLM's Ray executor puts its ranks, read from vLLM's own code (per release).

``initialize_ray_cluster`` (vllm/executor/ray_utils.py to 0.11.0, vllm/v1/executor/ray_utils.py
from 0.11.1) creates one placement group of ``world_size`` bundles of one GPU each
(``strategy="PACK"``) and waits 120 s for it, then raises "Cannot provide a placement group
requiring N GPUs". From 0.8.0 to 0.32.0 the first bundle is pinned to the node that runs
``vllm serve`` (the driver) and a driver node without a GPU is refused ("Current node has no GPU
available", "driver node id ... is not included in a placement group"); 0.33.0 drops the pin and
sorts the bundles driver-first (``get_bundles_sorted_by_node``). Ranks follow that order: the
driver's bundles, then the other nodes'. ``_verify_bundles`` warns when a node holds fewer
bundles than ``tensor_parallel_size``. (The error catalogue, knowledge/data/errors.json, carries
each message with the releases that raise it.)

Ray's PACK packs bundles onto as few nodes as it can; among nodes with room its order is
Ray's, so this model fills the driver first, then the nodes with the most GPUs. What it decides
for certain: whether the cluster's GPUs hold the group, whether the driver has a GPU, and whether
a tensor-parallel group must span nodes (TP above every node's GPUs).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Placement:
    gpus_needed: int
    fits: bool
    ranks: dict[str, list[int]]  # node label -> the ranks it holds (every replica's)
    tp_spans_nodes: bool

    def describe(self) -> list[str]:
        return [f"{label}: ranks {_ranges(ranks)}" for label, ranks in self.ranks.items() if ranks]

    @property
    def max_ranks_per_node(self) -> int:
        return max((len(r) for r in self.ranks.values()), default=0)


def _ranges(ranks: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    spans: list[list[int]] = []
    for rank in ranks:
        if spans and rank == spans[-1][1] + 1:
            spans[-1][1] = rank
        else:
            spans.append([rank, rank])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def place(gpus: dict[str, int], driver: str, tp: int, world: int, replicas: int = 1) -> Placement:
    """The ranks of ``replicas`` placement groups of ``world`` one-GPU bundles over nodes
    offering ``gpus`` (label -> GPUs), the driver's node first."""
    order = sorted(gpus, key=lambda label: (label != driver, -gpus[label], label))
    needed = world * replicas
    free = dict(gpus)
    ranks: dict[str, list[int]] = {label: [] for label in order}
    rank = 0
    for label in order:
        while free[label] > 0 and rank < needed:
            ranks[label].append(rank)
            free[label] -= 1
            rank += 1
    most = max(gpus.values(), default=0)
    return Placement(needed, sum(gpus.values()) >= needed, ranks, tp > most)
