"""vllm-doctor: a preflight doctor for vLLM deployments."""

__version__ = "0.1.0"
