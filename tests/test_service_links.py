"""Kubernetes service links: a Service named "vllm" in the manifest gives the pods of its
namespace VLLM_PORT=tcp://IP:PORT (inferred, so ENV064 warns and never errs)."""

from __future__ import annotations

import pytest

from vllm_doctor.facts.model import Facts
from vllm_doctor.serveline import manifest

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: server{namespace}}}
spec:
  template:
    spec:
{pod}      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.29.0
          args: ["--model", "Qwen/Qwen3-8B"]
{env}---
apiVersion: v1
kind: Service
metadata: {{name: {service}{service_namespace}}}
spec:
{cluster_ip}  ports: [{{port: 8000, protocol: TCP}}]
"""


def facts_of(
    service="vllm", pod="", env="", cluster_ip="", namespace="", service_namespace=""
) -> Facts:
    text = DEPLOYMENT.format(
        service=service,
        pod=pod,
        env=env,
        cluster_ip=cluster_ip,
        namespace=namespace,
        service_namespace=service_namespace,
    )
    (target,) = manifest.read_targets("deploy.yaml", text)
    facts = Facts()
    target.write_facts(facts)
    return facts


def test_service_named_vllm_links_vllm_port_as_inferred():
    fact = facts_of(cluster_ip="  clusterIP: 10.43.1.39\n").get("env.VLLM_PORT")
    assert fact is not None and fact.value == "tcp://10.43.1.39:8000"
    assert fact.inferred
    assert 'Service "vllm"' in fact.describe_source()


def test_cluster_ip_not_written_is_named_as_such():
    assert facts_of().value("env.VLLM_PORT") == "tcp://<cluster IP>:8000"


@pytest.mark.parametrize(
    "case",
    [
        {"service": "vllm-svc"},  # another name: VLLM_SVC_PORT, not vLLM's variable
        {"pod": "      enableServiceLinks: false\n"},
        {"cluster_ip": "  clusterIP: None\n"},  # a headless Service injects nothing
        {"service_namespace": ", namespace: other"},  # links stay in their namespace
    ],
)
def test_no_link(case):
    assert facts_of(**case).get("env.VLLM_PORT") is None


def test_variable_written_in_the_container_wins():
    env = '          env:\n            - {name: VLLM_PORT, value: "20001"}\n'
    fact = facts_of(env=env).get("env.VLLM_PORT")
    assert fact.value == "20001" and not fact.inferred


def _env310_severity(facts: Facts) -> str:
    from vllm_doctor.engine.evaluate import evaluate_rule
    from vllm_doctor.engine.loader import default_rules_dir, load_rule_file

    rule, problems = load_rule_file(default_rules_dir() / "env" / "ENV064.yaml")
    assert rule is not None, problems
    finding = evaluate_rule(rule, facts)
    assert finding.verdict == "applies"
    return finding.severity_cap or rule.severity


def test_env310_warns_on_a_linked_port_and_errs_on_a_stated_one():
    assert _env310_severity(facts_of()) == "warning"
    stated = Facts()
    stated.set("env.VLLM_PORT", "tcp://10.43.1.39:8000", "environment")
    assert _env310_severity(stated) == "error"
