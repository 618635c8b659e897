"""The serve line: read from where it is written (a command line, a serve config YAML, a
Kubernetes manifest, a docker-compose file, a Dockerfile), parsed as vLLM's argparse reads it.

Every reader produces the same ``ServeLine`` object (``vllm_doctor.serve_args``); the
manifest reader (``manifest``) adds the facts the file states about where the line runs.
Nothing is imported here: ``check`` loads only the reader it needs.
"""
