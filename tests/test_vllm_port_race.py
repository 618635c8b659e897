"""ENV050's severity: VLLM_PORT pinned with the Ray V2 executor is an error only where the
fleet's placement shows the tensor-parallel group spanning nodes (rule cases check the verdict,
not the severity)."""

from __future__ import annotations

import pytest

from vllm_doctor.facts.model import Facts, Source


@pytest.mark.parametrize(("spans", "severity"), [(True, "error"), (None, "warning")])
def test_vllm_port_race_is_an_error_only_where_the_fleet_shows_the_group_spanning_nodes(
    spans, severity
):
    # ENV050: a single check cannot see where Ray places the workers (a warning); the fleet can
    from vllm_doctor.engine.evaluate import APPLIES, evaluate_rules
    from vllm_doctor.engine.loader import load_rules

    rule = next(r for r in load_rules() if r.code == "ENV050")
    facts = Facts()
    facts.set("vllm.version", "0.26.0", Source.USER, "--vllm-version")
    facts.set("env.VLLM_PORT", "30000", Source.SERVE, "VLLM_PORT=30000")
    facts.set(
        "serve.distributed_executor_backend", "ray", Source.SERVE, "--distributed-executor-backend"
    )
    facts.set("release.env.VLLM_USE_RAY_V2_EXECUTOR_BACKEND", True, Source.DEFAULT, "default")
    facts.set("serve.world_size", 16, Source.DERIVED, "TP 16")
    if spans is not None:
        facts.set("fleet.placement.tp_spans_nodes", spans, Source.DERIVED, "fleet")
    (finding,) = evaluate_rules([rule], facts)
    assert finding.verdict == APPLIES
    assert finding.severity == severity
