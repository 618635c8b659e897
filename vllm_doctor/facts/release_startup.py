"""What the judged release refuses or decides at start-up for this serve line: parser names it
does not register, options given without what it checks they need, the backend it picks for a
world larger than the node, and whether one replica's ranks may lie beyond this node's GPUs
(knowledge/data/parsers.json, checks.json, parallel.json)."""

from __future__ import annotations

import difflib

from vllm_doctor.facts.model import Facts
from vllm_doctor.facts.release_model import _loaded_class
from vllm_doctor.facts.release_options import SOURCE, _given_words

# parser kind -> (its option, the option that loads plugins registering more names)
_PARSER_OPTIONS = {
    "tool": ("tool-call-parser", "tool-parser-plugin"),
    "reasoning": ("reasoning-parser", "reasoning-parser-plugin"),
}
_PARSER_WORDS = {"tool": "tool-call parser", "reasoning": "reasoning parser"}


def _parsers(facts: Facts, release: str) -> None:
    """``release.unknown_parsers``: each parser name on the line that the judged release does
    not register and refuses at start-up for this line."""
    line, _ = _given_words(facts)
    if line is None:
        facts.mark_missing(
            "release.unknown_parsers",
            "no serve line: " + (facts.why_missing("serve.argv") or "not given"),
        )
        return
    from vllm_doctor import knowledge

    table = knowledge.load("parsers")
    names = table.at(release)
    checks = names.get("@release", {})
    options = knowledge.load("options").at(release)
    refused: list[str] = []
    for kind, (option, plugin) in _PARSER_OPTIONS.items():
        name = line.options.get(option)
        if not isinstance(name, str) or f"{kind}:{name}" in names:
            continue
        if "choices" in options.get(option, {}):
            continue  # the release's argparse choices: ARGS101 names the value
        if line.options.get(plugin):
            facts.mark_missing(
                "release.unknown_parsers",
                f"--{plugin} may register '{name}' (what a plugin registers is not known here)",
            )
            return
        check = checks.get(f"{kind}_check")
        if kind == "tool" and checks.get("tool_choices"):
            where = f"argparse choices ({checks['tool_choices']})"
        elif check and all(line.options.get(r) for r in check["requires"]):
            where = f"{check['function']} in {check['file']}" + "".join(
                f", with --{r}" for r in check["requires"]
            )
        else:
            continue  # this release does not check the name for this line
        have = sorted(k.split(":", 1)[1] for k in names if k.startswith(f"{kind}:"))
        first = table.first_release(f"{kind}:{name}")
        text = (
            f"--{option} {name}: vLLM {release} has no {_PARSER_WORDS[kind]} '{name}' "
            f"(refused by {where}); it has: {', '.join(have)}; "
        )
        text += (
            f"first release with '{name}': {first}"
            if first
            else f"no release {table.releases[0]}–{table.newest} has '{name}'"
        )
        nearest = difflib.get_close_matches(name, have, n=1, cutoff=0.6)
        refused.append(text + (f"; nearest name in {release}: {nearest[0]}" if nearest else ""))
    facts.set(
        "release.unknown_parsers",
        refused,
        SOURCE,
        f"the parsers vLLM {release} registers (knowledge/data/parsers.json)",
    )


def _requirements(facts: Facts, release: str) -> None:
    """``release.unmet_requirements``: options given without what the judged release checks
    they need at start-up (knowledge table ``checks``): another option, or a multimodal model
    (``:@multimodal``)."""
    line, _ = _given_words(facts)
    if line is None:
        facts.mark_missing(
            "release.unmet_requirements",
            "no serve line: " + (facts.why_missing("serve.argv") or "not given"),
        )
        return
    from vllm_doctor import knowledge

    unmet, undecided = [], []
    for key, check in knowledge.load("checks").at(release).items():
        option, needed = key.split(":", 1)
        if not line.options.get(option):
            continue
        if needed == "@multimodal":
            loaded = _loaded_class(facts, release)
            if isinstance(loaded, str):
                undecided.append(f"--{option} needs a multimodal model: {loaded}")
                continue
            arch, entry = loaded
            if entry.get("multimodal"):
                continue
            what = f"--{option} on {arch}, which is not multimodal"
        elif line.options.get(needed):
            continue
        else:
            what = f"--{option} without --{needed}"
        unmet.append(
            f"{what}: vLLM {release} refuses it ({check['function']} in "
            f'{check["file"]}: "{check["message"]}")'
        )
    if undecided and not unmet:
        facts.mark_missing("release.unmet_requirements", "; ".join(undecided))
        return
    facts.set(
        "release.unmet_requirements",
        unmet,
        SOURCE,
        f"the start-up checks of vLLM {release} (knowledge/data/checks.json)",
    )


def _parallel(facts: Facts, release: str) -> None:
    """``release.oversized_world``: ray or refuse (knowledge table ``parallel``)."""
    from vllm_doctor import knowledge

    entry = knowledge.load("parallel").at(release).get("oversized_world")
    if entry is None:
        facts.mark_missing(
            "release.oversized_world",
            f"the knowledge does not say how vLLM {release} picks the backend",
        )
        return
    facts.set(
        "release.oversized_world",
        entry["behaviour"],
        SOURCE,
        f"ParallelConfig.__post_init__ of vLLM {release} (knowledge/data/parallel.json)",
    )


# executor backends for which ParallelConfig skips its node check: Ray places the ranks over
# its cluster, an external launcher (torchrun) starts them where it was told
_SPANNING_BACKENDS = ("ray", "external_launcher")
# options that name other nodes without changing what the node check compares
_OTHER_NODE_WORDS = ("headless", "data-parallel-address", "data-parallel-start-rank")


def _world_nodes(facts: Facts) -> None:
    """``release.world_spans_nodes``: the ranks of one data-parallel replica (TP × PP × PCP)
    may lie beyond this node's GPUs, as ParallelConfig.__post_init__ decides it in every
    release: it compares the world size with this node's GPUs only when no executor backend
    is given and ``--nnodes`` is 1 (0.11.1 on; before, it switches to Ray by itself, which
    release.oversized_world says). A given backend of ray or external_launcher, or ``--nnodes``
    above 1, spreads the ranks over nodes. ``--headless``, ``--data-parallel-address`` and
    the other data-parallel options name other nodes, but each replica's ranks are still
    compared with this node's GPUs: they are named in the detail, and decide nothing."""
    line, _ = _given_words(facts)
    if line is None:
        facts.mark_missing("release.world_spans_nodes", "no serve line")
        return
    backend = line.value("distributed-executor-backend")
    nnodes = line.value("nnodes")
    try:
        nodes = int(nnodes) if nnodes is not None else 1
    except (TypeError, ValueError):
        nodes = 1
    world = facts.value("serve.world_size")
    others = [f"--{w}" for w in _OTHER_NODE_WORDS if w in line.given]
    local = line.value("data-parallel-size-local")
    dp = line.value("data-parallel-size")
    if local is not None and dp is not None and str(local).isdigit() and int(local) < int(dp):
        others.append(f"--data-parallel-size-local {local} of {dp}")
    if isinstance(backend, str) and backend in _SPANNING_BACKENDS:
        facts.set(
            "release.world_spans_nodes",
            True,
            SOURCE,
            f"--distributed-executor-backend {backend}: the {world} ranks are placed by "
            + ("the Ray cluster" if backend == "ray" else "the external launcher")
            + ", not counted against this node's GPUs",
        )
    elif nodes > 1:
        per = f" ({int(world) // nodes} per node)" if isinstance(world, int) else ""
        facts.set(
            "release.world_spans_nodes",
            True,
            SOURCE,
            f"--nnodes {nodes}: the {world} ranks spread over {nodes} nodes{per}",
        )
    else:
        facts.set(
            "release.world_spans_nodes",
            False,
            SOURCE,
            "no executor backend and --nnodes 1: vLLM compares the "
            f"{world} ranks of a replica with this node's GPUs"
            + (
                f" ({', '.join(others)} name other nodes, but not where one replica's ranks "
                "run: that takes --nnodes or --distributed-executor-backend ray)"
                if others
                else ""
            ),
        )
