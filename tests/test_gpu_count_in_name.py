"""`--gpu "4 x H100 80GB HBM3"`: a count written before the product, as reports write it, is
the GPU count; a different --gpus is a contradiction (exit 2)."""

from __future__ import annotations

import pytest

from vllm_doctor.errors import InputError
from vllm_doctor.facts.hardware import TargetHardware, apply_target_hardware
from vllm_doctor.facts.model import Facts


@pytest.mark.parametrize(
    ("name", "product", "count"),
    [("4 x H100 80GB HBM3", "H100 80GB HBM3", 4), ("2x RTX 3090", "RTX 3090", 2), ("8×H200", "H200", 8)],
)  # fmt: skip
def test_a_counted_name_gives_the_product_and_the_count(name, product, count):
    facts = Facts()
    apply_target_hardware(facts, TargetHardware(gpu=name))
    assert facts.value("gpu.count") == count
    assert facts.value("gpu.names") == [product] * count
    assert name in facts.get("gpu.count").detail  # the evidence shows what was typed


def test_the_same_count_given_twice_agrees_and_another_is_refused():
    facts = Facts()
    apply_target_hardware(facts, TargetHardware(gpu="2x RTX 3090", count=2))
    assert facts.value("gpu.count") == 2
    with pytest.raises(InputError, match="names 4 GPUs, --gpus 2 says otherwise"):
        apply_target_hardware(Facts(), TargetHardware(gpu="4 x H100", count=2))


def test_a_product_number_is_no_count():
    facts = Facts()
    apply_target_hardware(facts, TargetHardware(gpu="4090"))
    assert facts.value("gpu.names") == ["RTX 4090"]
