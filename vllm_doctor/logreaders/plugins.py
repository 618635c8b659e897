"""An architecture vLLM refuses by name: one its release does not register yet (upgrade), or
one no release registers (an out-of-tree model, which only a plugin registers in every vLLM
process).

The knowledge ``registry`` (each release's model registry, from the wheels) says in which
releases vLLM itself provides the architecture.
"""

from __future__ import annotations

import re

from vllm_doctor.logreaders import LogReading, judged_release

_REFUSED = re.compile(
    r"Model architectures \['([A-Za-z_]\w{1,120})'[^\]\n]{0,400}\] are not supported for now|"
    r"(?<![\w'])([A-Za-z_]\w{1,120}) has no vLLM implementation and the Transformers "
    r"implementation is not compatible with vLLM"
)


def read(text: str, version: str | None) -> LogReading | None:
    from vllm_doctor.knowledge import load

    found = _REFUSED.search(text)
    if found is None:
        return None
    arch = found.group(1) or found.group(2)
    registry = load("registry")
    release = judged_release(version)
    if arch in registry:
        first, last = registry.first_release(arch), registry.last_release(arch)
        if first is None or last is None:  # listed without a span: nothing to say
            return None
        read_lines = [
            f"vLLM refused the architecture {arch}",
            f"vLLM registers {arch} in {first}–{last} (knowledge: registry, from the wheels)",
        ]
        index = registry.releases.index
        if release is not None and index(first) <= index(release) <= index(last):
            return None  # the release has it: refused for another reason (ATTN/MODEL rules)
        if release is not None and index(release) > index(last):
            return LogReading(
                f"vLLM {release} no longer registers {arch} (the last release that does is {last})",
                [f"pip install 'vllm=={last}'"],
                read_lines,
            )
        return LogReading(
            f"the running vLLM{f' {release}' if release else ''} predates {arch}: vLLM registers it "
            f"from {first} on",
            [f"pip install -U 'vllm>={first}'"],
            read_lines,
        )
    if found.group(1):
        return None  # "not supported for now" for an unknown name: MODEL101 speaks (facts decide)
    return LogReading(
        f"{arch} is in no vLLM release's registry ({registry.releases[0]}–{registry.newest}): only an "
        "out-of-tree model provides it, and vLLM runs the model in other processes than the "
        "script that calls ModelRegistry.register_model",
        [
            "register it from a plugin: an entry point in the group vllm.general_plugins whose "
            f'function calls ModelRegistry.register_model("{arch}", "your_package.module:{arch}"); '
            "pip install the package (every vLLM process loads the plugin)",
            "or, if the checkpoint names a wrong architecture, --hf-overrides "
            '\'{"architectures": ["<an architecture vLLM registers>"]}\'',
        ],
        [
            f"vLLM refused the architecture {arch}",
            f"no release {registry.releases[0]}–{registry.newest} registers {arch} (knowledge: registry)",
        ],
    )
