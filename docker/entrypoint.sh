#!/bin/sh
# Entrypoint of the vllm-doctor image: `docker run --gpus all IMAGE [check ARGS...]`.
# No arguments: check this container's stack and GPUs. A vllm-doctor command or option: run it.
# Anything else (bash, vllm serve ...): run that command, so the image still serves.
set -e
if [ "$#" -eq 0 ]; then
    set -- check
fi
case "$1" in
    check|facts|probe|explain|rules|-*)
        exec vllm-doctor "$@" ;;
    *)
        exec "$@" ;;
esac
