from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.schema import is_known_path, spec_for


def test_missing_area_reason_applies_to_paths_below():
    facts = Facts()
    facts.mark_missing("gpu", "NVML not available: no driver")
    assert facts.why_missing("gpu.min_capability") == "NVML not available: no driver"
    facts.set("gpu.count", 2, Source.NVML)
    assert facts.value("gpu.count") == 2
    assert facts.why_missing("gpu.count") == "NVML not available: no driver"  # area reason stays


def test_round_trip_json():
    facts = Facts()
    facts.set("serve.tensor_parallel_size", 2, Source.SERVE, "-tp 2")
    facts.mark_missing("model", "no config.json")
    again = Facts.from_dict(facts.to_dict())
    assert again.get("serve.tensor_parallel_size").describe_source() == "serve line (-tp 2)"
    assert again.why_missing("model.architectures") == "no config.json"


def test_merge_replaces_areas():
    machine = Facts()
    machine.set("gpu.count", 0, Source.NVML)
    machine.set("serve.tensor_parallel_size", 2, Source.SERVE)
    report = Facts()
    report.set("gpu.names", ["NVIDIA H100"], Source.REPORT)
    machine.merge(report, replace_areas=["gpu"])
    assert "gpu.count" not in machine
    assert machine.value("gpu.names") == ["NVIDIA H100"]
    assert machine.value("serve.tensor_parallel_size") == 2


def test_schema_wildcards():
    assert is_known_path("packages.transformers")
    assert is_known_path("env.VLLM_ATTENTION_BACKEND")
    assert not is_known_path("packages.a.b")
    assert not is_known_path("gpu.bogus")
    assert spec_for("serve.tensor_parallel_size").type == "int"
