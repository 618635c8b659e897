# vllm-doctor next to vLLM: the doctor installed into the vLLM image it checks, so it sees
# that image's vLLM, torch and CUDA build, and the host's driver and GPUs through --gpus.
#
#   docker build --build-arg VLLM_IMAGE=vllm/vllm-openai:v0.33.0 -t vllm-doctor .
#   docker run --rm --gpus all vllm-doctor meta-llama/Llama-3.1-8B-Instruct -tp 2
#   docker run --rm --gpus all -e VLLM_DOCTOR_FAIL_ON=warning vllm-doctor meta-llama/Llama-3.1-8B-Instruct
#   docker run --rm --gpus all vllm-doctor check -- vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 2
#   docker run --rm --gpus all --ipc=host vllm-doctor probe --tp 2
#
# It takes the vLLM image's arguments (those of `vllm serve`) with a gate in front: the
# entrypoint runs `vllm-doctor serve -- ARGS`, which checks that serve line with this
# container's facts and execs `vllm serve ARGS` only when the gate passes (--no-gate or
# VLLM_DOCTOR_NO_GATE=1 starts it anyway). Doctor commands run as such; any other program on
# PATH (bash, python) runs as given; no arguments checks the container (docker/entrypoint.sh).
ARG VLLM_IMAGE=vllm/vllm-openai:v0.33.0
FROM ${VLLM_IMAGE}

# The doctor's own dependencies only (typer, rich, packaging, pyyaml, nvidia-ml-py): torch and
# vLLM are the image's, and the doctor never imports them in its main process.
COPY pyproject.toml README.md /opt/vllm-doctor/
COPY vllm_doctor /opt/vllm-doctor/vllm_doctor
COPY rules /opt/vllm-doctor/rules
RUN python3 -m pip install --no-cache-dir /opt/vllm-doctor && vllm-doctor --version

COPY docker/entrypoint.sh /usr/local/bin/vllm-doctor-entrypoint
RUN chmod 0755 /usr/local/bin/vllm-doctor-entrypoint

ENTRYPOINT ["/usr/local/bin/vllm-doctor-entrypoint"]
CMD ["check"]
