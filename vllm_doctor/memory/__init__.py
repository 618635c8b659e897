"""A memory model of vLLM's start-up: weights, activation peak, non-torch and CUDA-graph
memory, KV cache bytes, tokens and concurrency, per release (estimate.py, kv.py, weights.py)."""
