"""What the wrappers in front of vLLM do to the environment it sees and the user it runs as.

``env -i VAR=x vllm serve ...`` starts vLLM with only the variables it names; ``env -u VAR``
unsets one; ``sudo`` resets the environment by the sudoers policy (env_reset, env_keep: not
read here) unless ``-E``/``--preserve-env`` keeps it, and runs vLLM as root or as ``-u USER``.
So this machine's environment and its user's facts (container.*) stand for the process only
where the wrappers leave them: the rest is set aside here, with the wrapper that decides it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_ENV_CLEARING = ("-i", "-", "--ignore-environment")
_SUDO_KEEPS_ALL = ("-E", "--preserve-env")
_ROOT = ("root", "0", "#0")


@dataclass
class Launch:
    """The wrappers' effect, from ``words._strip_prefix``'s record of them."""

    cleared_by: str | None = None  # `env -i`: none of the caller's variables pass on
    reset_by: str | None = None  # `sudo`: the sudoers policy decides which pass on
    kept: frozenset[str] = frozenset()  # `sudo --preserve-env=A,B`: these pass on
    unset: set[str] = field(default_factory=set)  # `env -u VAR`
    user: str | None = None  # `sudo [-u USER]`: the user vLLM runs as
    dropped_words: int = 0  # the KEY=VALUE words before the last clearing wrapper

    def passes_on(self, name: str) -> bool:
        """Whether the caller's variable ``name`` reaches vLLM (as far as the line shows)."""
        if name in self.unset or self.cleared_by:
            return False
        return not self.reset_by or name in self.kept


def read_launch(wrappers: list[tuple[str, list[str], int]]) -> Launch:
    """The effect of the wrappers (name, option words, env words before it) in line order."""
    launch = Launch()
    for name, options, words_before in wrappers:
        if name == "env":
            if any(option in _ENV_CLEARING for option in options):
                launch = Launch(cleared_by="env -i", user=launch.user)
                launch.dropped_words = words_before
            launch.unset |= _values_of(options, "-u", "--unset")
        elif name == "sudo":
            user = _values_of(options, "-u", "--user")
            launch.user = next(iter(user)) if user else "root"
            kept = [o for o in options if o.startswith("--preserve-env=")]
            if not any(o in _SUDO_KEEPS_ALL for o in options):
                launch.reset_by = "sudo"
                launch.kept = frozenset(
                    name for o in kept for name in o.partition("=")[2].split(",") if name
                )
                launch.dropped_words = max(launch.dropped_words, words_before)
    return launch


def _values_of(options: list[str], short: str, long: str) -> set[str]:
    """The values of ``-u VAR``, ``-uVAR``, ``--unset VAR``, ``--unset=VAR`` among ``options``."""
    values: set[str] = set()
    for i, option in enumerate(options):
        if option in (short, long) and i + 1 < len(options):
            values.add(options[i + 1])
        elif option.startswith(long + "="):
            values.add(option.partition("=")[2])
        elif option.startswith(short) and len(option) > len(short) and not option.startswith("--"):
            values.add(option[len(short) :])
    return values


def set_aside_for_launch(launch: Launch, facts: Any) -> None:
    """Before the line's own KEY=VALUE words are set: the variables the wrappers keep from
    vLLM and, run as another user, this machine's user facts."""
    from vllm_doctor.facts.model import Source

    for path in [p for p in facts.values if p.startswith("env.")]:
        if not launch.passes_on(path.removeprefix("env.")):
            del facts.values[path]
    if launch.reset_by and not launch.cleared_by:
        kept = f" (--preserve-env keeps {', '.join(sorted(launch.kept))})" if launch.kept else ""
        facts.mark_missing(
            "env",
            f"`sudo` resets the environment by the sudoers policy (env_reset, env_keep), not "
            f"read here{kept}: set the variables on the line (sudo VAR=value vllm serve ...) "
            "or keep them with sudo -E",
        )
    if launch.user is None:
        return
    uid = facts.value("container.uid")
    if launch.user in _ROOT and uid == 0:
        return  # root already: sudo changes no user
    reason = (
        f"`sudo` runs vLLM as {launch.user}: its home, caches and passwd entry are not this "
        "user's (run the check as that user)"
    )
    for path in [p for p, f in facts.values.items() if p.startswith("container.")]:
        if facts.values[path].source == Source.MACHINE:
            del facts.values[path]
            facts.mark_unknowable(path, reason)
