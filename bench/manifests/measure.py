"""How well `check --manifest` reads real deployment files: the figures issue 33 names.

    python bench/manifests/measure.py [--verbose]

Reads every file of tests/fixtures/manifests/deployments/expected.yaml (which also names the
files of ../corpus) the way `check --manifest FILE` does, judges each target with the shipped
rules (no model config, no machine), and prints:

- files refused (exit 2) although they are valid YAML;
- targets found against the targets expected;
- the tensor-parallel size read right, among all the targets whose serve line states it
  (a target not found, or a file refused, counts as not read right);
- the vLLM version read right, among all the targets whose file names one (and any version
  stated where the file names none);
- the GPU count read right, among all the targets that ask for GPUs;
- the pods of a serving group (a LeaderWorkerSet's size: the nodes a world size spans) read
  right, among the targets whose expectation names it (``nodes``), and left undecided where
  the file does not settle it (``nodes: null``);
- error findings (none of these files is broken, so every one is a false error).
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENTS = ROOT / "tests" / "fixtures" / "manifests" / "deployments"


def _judge(target, rules):
    from vllm_doctor.engine.evaluate import APPLIES, evaluate_rules
    from vllm_doctor.facts.collect import CollectOptions, collect_facts

    facts = collect_facts(CollectOptions(manifest_target=target, probe_machine=False))
    errors = [
        f.rule.code
        for f in evaluate_rules(rules, facts)
        if f.verdict == APPLIES and f.severity == "error"
    ]
    return facts, errors


def measure(verbose: bool = False) -> dict[str, int]:
    from vllm_doctor.engine.loader import default_rules_dir, load_rules
    from vllm_doctor.errors import InputError
    from vllm_doctor.serveline import manifest

    rules = load_rules([default_rules_dir()])
    expected = yaml.safe_load((DEPLOYMENTS / "expected.yaml").read_text(encoding="utf-8"))
    n = dict.fromkeys(
        (
            "files",
            "refused",
            "targets",
            "found",
            "tp_stated",
            "tp_right",
            "tp_left_open",
            "tp_open_right",
            "version_named",
            "version_right",
            "version_invented",
            "gpus_asked",
            "gpus_right",
            "nodes_stated",
            "nodes_right",
            "nodes_left_open",
            "nodes_open_right",
            "error_findings",
        ),
        0,
    )
    for name, wanted in expected.items():
        n["files"] += 1
        n["targets"] += len(wanted)
        path = (DEPLOYMENTS / name).resolve()
        try:
            targets = manifest.read_targets(str(path))
        except InputError as err:
            n["refused"] += 1
            for want in wanted:
                n["tp_stated" if want["tp"] is not None else "tp_left_open"] += 1
                n["version_named"] += want["version"] is not None
                n["gpus_asked"] += want["gpus"] is not None
                _count_nodes(n, want)
            if verbose:
                print(f"REFUSED {name}: {err.problem}")
            continue
        unused = list(targets)
        for want in wanted:
            # the denominators count every target expected, found or not
            n["tp_stated" if want["tp"] is not None else "tp_left_open"] += 1
            n["version_named"] += want["version"] is not None
            n["gpus_asked"] += want["gpus"] is not None
            target = next((t for t in unused if want["target"] in t.name), None)
            if target is None:
                _count_nodes(n, want)
                if verbose:
                    print(f"MISSING {name}: {want['target']} (found {[t.name for t in targets]})")
                continue
            unused.remove(target)
            n["found"] += 1
            try:
                facts, errors = _judge(target, rules)
            except InputError as err:  # `check` exits 2 on it
                n["refused"] += 1
                _count_nodes(n, want)
                if verbose:
                    print(f"UNREADABLE {name} {target.name}: {err.problem}")
                continue
            tp = facts.value("serve.tensor_parallel_size")
            version = facts.value("vllm.version")
            gpus = facts.value("deploy.gpus_per_pod")
            nodes = facts.value("deploy.nodes")
            _count_nodes(n, want, nodes)
            if want["tp"] is None:
                n["tp_open_right"] += tp is None
            else:
                n["tp_right"] += tp == want["tp"]
            if want["version"] is None:
                n["version_invented"] += version is not None
            else:
                n["version_right"] += version == want["version"]
            if want["gpus"] is not None:
                n["gpus_right"] += gpus == want["gpus"]
            n["error_findings"] += len(errors)
            wrong = (
                (want["tp"] is not None and tp != want["tp"])
                or (want["tp"] is None and tp is not None)
                or version != want["version"]
                or (want["gpus"] is not None and gpus != want["gpus"])
                or ("nodes" in want and nodes != want["nodes"])
                or errors
            )
            if verbose and wrong:
                print(
                    f"WRONG {name} {target.name}: tp {tp} (want {want['tp']}), "
                    f"version {version} (want {want['version']}), gpus {gpus} "
                    f"(want {want['gpus']}), nodes {nodes} (want {want.get('nodes', '-')}), "
                    f"errors {errors}"
                )
    return n


def _count_nodes(n: dict[str, int], want: dict, read: object = "not read") -> None:
    """The pods of a group, for an expectation that names them (None: left undecided)."""
    if "nodes" not in want:
        return
    if want["nodes"] is None:
        n["nodes_left_open"] += 1
        n["nodes_open_right"] += read is None
    else:
        n["nodes_stated"] += 1
        n["nodes_right"] += read == want["nodes"]


def main() -> None:
    n = measure("--verbose" in sys.argv)
    print(f"files: {n['files']}, refused (exit 2) although valid: {n['refused']}")
    print(f"targets found: {n['found']}/{n['targets']}")
    print(
        f"tensor-parallel size right: {n['tp_right']}/{n['tp_stated']} stated; "
        f"left undecided where the file leaves it open: {n['tp_open_right']}/{n['tp_left_open']}"
    )
    print(
        f"vLLM version right: {n['version_right']}/{n['version_named']} named; "
        f"stated where none is named: {n['version_invented']}"
    )
    print(f"GPU count right: {n['gpus_right']}/{n['gpus_asked']} that ask for GPUs")
    print(
        f"pods per group right: {n['nodes_right']}/{n['nodes_stated']} stated; left undecided "
        f"where the file leaves it open: {n['nodes_open_right']}/{n['nodes_left_open']}"
    )
    print(f"error findings (false: no file is broken): {n['error_findings']}")


if __name__ == "__main__":
    main()
