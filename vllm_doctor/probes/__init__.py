"""On-GPU probes: small experiments that reproduce a known failure's mechanism on this hardware.

The doctor never imports torch: probes run in worker processes (see ``runner``), and this
package's public API is plain Python::

    from vllm_doctor.probes import run_probes, PROBES_FOR_RULE
    results = run_probes(["tp-softembed"], tp=2, device="cuda", timeout=120, model=None)
    [r.to_dict() for r in results]
"""

from vllm_doctor.probes.collection import load_results_dir
from vllm_doctor.probes.registry import PROBE_NAMES, PROBES, PROBES_FOR_RULE, ProbeSpec
from vllm_doctor.probes.result import ProbeResult
from vllm_doctor.probes.runner import run_probes

__all__ = [
    "PROBES",
    "PROBES_FOR_RULE",
    "PROBE_NAMES",
    "ProbeResult",
    "ProbeSpec",
    "load_results_dir",
    "run_probes",
]
