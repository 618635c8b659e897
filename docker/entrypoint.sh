#!/bin/sh
# Entrypoint of the vllm-doctor image. It takes what the vLLM image takes, with the gate in
# front (`vllm-doctor serve`: check the very serve line with this container's facts, then exec
# `vllm serve` only when the gate passes):
#   docker run --gpus all IMAGE meta-llama/Llama-3.1-8B-Instruct -tp 2   the gate, then vllm serve
#   docker run --gpus all IMAGE --model M ...  /  IMAGE vllm serve M ...  the same
#   docker run --gpus all IMAGE serve --fail-on warning -- M ...          the gate with its options
#   docker run --gpus all IMAGE check|facts|probe|explain|rules ...       that doctor command
#   docker run --gpus all IMAGE                                           check this container
#   docker run -it IMAGE bash   (any other program on PATH)               runs as given
# The gate's settings also come from VLLM_DOCTOR_* (VLLM_DOCTOR_FAIL_ON, VLLM_DOCTOR_NO_GATE=1).
set -e
if [ "$#" -eq 0 ]; then
    exec vllm-doctor check
fi
case "$1" in
    check|facts|probe|explain|rules|serve|--version|--help)
        exec vllm-doctor "$@" ;;
    vllm)
        if [ "${2:-}" = serve ]; then
            shift 2
            exec vllm-doctor serve -- "$@"
        fi
        exec "$@" ;;
    -*)
        exec vllm-doctor serve -- "$@" ;;
esac
# a program on PATH runs as given; anything else names the model (a hub name or a directory)
if [ -d "$1" ] || ! command -v "$1" >/dev/null 2>&1; then
    exec vllm-doctor serve -- "$@"
fi
exec "$@"
