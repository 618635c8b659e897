"""The input options that `check`, `facts` and `probe` share, declared once, and how their
comma-separated lists are read."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import typer

from vllm_doctor.facts.platform import PLATFORM_WORDS

# the groups of `--help` (typer's rich_help_panel): what is read, what is supposed, what is
# printed, and what fails the run
INPUTS, WHAT_IF, OUTPUT, GATE = "Inputs", "What-if", "Output", "Gate"

SERVE = typer.Option(
    None,
    "--serve",
    help='The serve line as one string: "vllm serve MODEL ...".',
    rich_help_panel=INPUTS,
)
SERVE_CONFIG = typer.Option(
    None,
    "--serve-config",
    help="A vLLM serve config file (YAML); a manifest given here is read as --manifest.",
    rich_help_panel=INPUTS,
)
MANIFEST = typer.Option(
    None,
    "--manifest",
    help="A Kubernetes manifest (multi-document YAML: helm template, kubectl "
    "-o yaml), docker-compose file or Dockerfile, - for standard input, or a folder whose "
    "manifest files are read as one input (a KServe service and its runtime in two files): "
    "each container that runs vLLM is checked with the facts the files state.",
    rich_help_panel=INPUTS,
)
MODEL_CONFIG = typer.Option(
    None,
    "--model-config",
    help="The model's config.json or model directory.",
    rich_help_panel=INPUTS,
)
REPORT = typer.Option(
    None,
    "--report",
    help="A `vllm collect-env` report (or a package list naming vllm or torch: pip freeze, "
    "pip list, conda list): its facts replace this machine's.",
    rich_help_panel=INPUTS,
)
LOG = typer.Option(
    None, "--log", help="A crash log to match against the known failures.", rich_help_panel=INPUTS
)
VLLM_VERSION = typer.Option(
    None, "--vllm-version", help="What if vLLM were this version.", rich_help_panel=WHAT_IF
)
TORCH_VERSION = typer.Option(
    None,
    "--torch-version",
    help="What if torch were this version (--recommend keeps it for every release).",
    rich_help_panel=WHAT_IF,
)

PACKAGE = typer.Option(
    None,
    "--package",
    help="What if this package were installed at this version: NAME==VERSION, repeatable "
    "(flashinfer-python==0.6.12; vllm==V and torch==V are --vllm-version and --torch-version).",
    rich_help_panel=WHAT_IF,
)


def gpu_table_text() -> str:
    """``--gpu list``: every family of the GPU table with how to write it, its memory sizes
    and its compute capability (or AMD gfx target)."""
    from vllm_doctor.knowledge.gpus import families

    rows = [("family", "memory GiB", "compute", "architecture", "segment", "write it as")]
    for family in families():
        rows.append(
            (
                family.name,
                ", ".join(str(m) for m in sorted(family.memory_options)) or "?",
                family.compute,
                family.arch,
                family.segment,
                ", ".join(family.spellings),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    # the last column (the spellings) is left ragged
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        for row in rows
    ]
    lines.append(
        "A family with several memory sizes is judged for each unless the name says which "
        '(--gpu "H100 80GB"); a bare model number works where one family has it (--gpu 4090).'
    )
    return "\n".join(lines)


def _gpu_option(value: str | None) -> str | None:
    """``--gpu list`` prints the GPU table and exits."""
    if value is not None and value.strip().lower() == "list":
        typer.echo(gpu_table_text())
        raise typer.Exit(0)
    return value


def complete_gpu(incomplete: str) -> list[str]:
    """Shell completion of --gpu: the table's spellings written with dashes, so that each is
    one shell word (--gpu reads "RTX-4090" as "RTX 4090"), and their tails from the model
    word on ("4090", "MI300X"), each only where it names one family; those that start with
    what was typed, in the case it was typed."""
    from vllm_doctor.knowledge.gpus import GpuMatch, families, resolve

    names: list[str] = ["list"]
    for family in families():
        for spelling in family.spellings:
            words = spelling.split()
            model = next((i for i, w in enumerate(words) if any(c.isdigit() for c in w)), 0)
            names += ["-".join(words[i:]) for i in range(model + 1)]
    typed = incomplete.replace(" ", "-")
    return [
        typed + name[len(typed) :]
        for name in dict.fromkeys(names)
        if name.lower().startswith(typed.lower())
        and (name == "list" or isinstance(resolve(name), GpuMatch))
    ]


GPU = typer.Option(
    None,
    "--gpu",
    help='What if the GPUs were this model, written as people do ("H100 80GB", "4090", '
    '"rtx3090", "MI300X"; `--gpu list` prints the table): replaces this machine\'s GPUs.',
    callback=_gpu_option,
    autocompletion=complete_gpu,
    rich_help_panel=WHAT_IF,
)
GPUS = typer.Option(
    None,
    "--gpus",
    help="How many GPUs the target has: of the --gpu model; without --gpu, of the model here "
    "(this machine's or the report's), or with no GPU known, the count alone (which GPU "
    "stays open).",
    rich_help_panel=WHAT_IF,
)
DRIVER = typer.Option(
    None, "--driver", help="What if the NVIDIA driver were this version.", rich_help_panel=WHAT_IF
)
CUDA = typer.Option(
    None,
    "--cuda",
    help="What if the driver's CUDA version (nvidia-smi) were this.",
    rich_help_panel=WHAT_IF,
)
PLATFORM = typer.Option(
    None,
    "--platform",
    help="What if vLLM ran on this platform (it replaces this machine's), repeatable: "
    + "; ".join(f"{word}: {meaning}" for word, meaning in PLATFORM_WORDS.items())
    + ".",
    rich_help_panel=WHAT_IF,
)
ELSEWHERE = typer.Option(
    False,
    "--elsewhere",
    help="The setup runs on another machine (triaging a report): never read this machine's "
    "packages, GPUs, driver or platform (unknown unless the inputs say) or its environment "
    "(only the variables the inputs set are set).",
    rich_help_panel=INPUTS,
)
OFFLINE = typer.Option(
    False,
    "--offline",
    help="Never ask the Hugging Face Hub for a model's config.json (also HF_HUB_OFFLINE=1).",
    rich_help_panel=INPUTS,
)
VERBOSE = typer.Option(
    False,
    "--verbose",
    "-v",
    help="Sources of every fact, everything undecided, timings.",
    rich_help_panel=OUTPUT,
)


def complete_rule_codes(incomplete: str) -> list[str]:
    """Shell completion of rule codes (explain CODE, --select, --ignore): the shipped rules'
    codes, and their category prefixes, that start with what was typed."""
    from vllm_doctor.engine.loader import load_rules

    codes = [rule.code for rule in load_rules()]
    prefixes = sorted({code.rstrip("0123456789") for code in codes})
    typed = incomplete.upper()
    return [c for c in [*prefixes, *codes] if c.startswith(typed)]


def complete_examples(incomplete: str) -> list[str]:
    """Shell completion of --example: the bundled scenarios and `list`."""
    from pathlib import Path

    base = Path(__file__).resolve().parent.parent / "examples"
    names = sorted(p.parent.name for p in base.glob("*/scenario.yaml"))
    return [n for n in ["list", *names] if n.startswith(incomplete)]


def split_commas(values: Iterable[str] | None) -> list[str] | None:
    """Repeatable comma-separated option values as one list (``--select A,B --select C``);
    None when nothing is named."""
    return [p.strip() for v in values or () for p in v.split(",") if p.strip()] or None


def check_version(option: str, value: str) -> None:
    """A what-if version must be a version (PEP 440, as pip and the wheels spell them)."""
    from packaging.version import InvalidVersion, Version

    from vllm_doctor.errors import InputError

    shown = value if len(value) <= 40 else value[:40] + "…"
    try:
        if len(value) > 128:
            raise InvalidVersion(value)
        Version(value.strip())
    except InvalidVersion:
        raise InputError(
            option,
            f"{shown!r} is not a version (like 0.11.0, 0.12.0rc1, "
            "0.13.0.dev5+g1a2b3c, 2.9.0+cu128)",
        ) from None


def parse_packages(values: Iterable[str] | None) -> dict[str, str]:
    """``--package NAME==VERSION`` words as {canonical name: version}; bad input is exit 2."""
    if not values:  # most runs: packaging's requirement parser (and sysconfig) stays unloaded
        return {}
    from packaging.requirements import InvalidRequirement, Requirement

    from vllm_doctor.errors import InputError
    from vllm_doctor.facts.packages import canonical_name

    found: dict[str, str] = {}
    for value in values or ():
        shown = value if len(value) <= 60 else value[:60] + "…"
        try:
            if len(value) > 200:
                raise InvalidRequirement(value)
            requirement = Requirement(value.strip())
        except InvalidRequirement:
            requirement = None
        specs = list(requirement.specifier) if requirement is not None else []
        if (
            requirement is None
            or requirement.extras
            or requirement.marker is not None
            or requirement.url
            or len(specs) != 1
            or specs[0].operator != "=="
            or "*" in specs[0].version
        ):
            raise InputError(
                "--package", f"{shown!r} is not NAME==VERSION (like flashinfer-python==0.6.12)"
            )
        name = canonical_name(requirement.name)
        check_version(f"--package {requirement.name}", specs[0].version)
        if found.get(name, specs[0].version) != specs[0].version:
            raise InputError(
                "--package",
                f"{requirement.name} is given twice, at {found[name]} and {specs[0].version}",
            )
        found[name] = specs[0].version
    return found


def collect_options(
    serve_tokens: list[str] | None,
    serve: str | None,
    serve_config: Path | None,
    model_config: Path | None,
    report: Path | None,
    log: Path | None,
    vllm_version: str | None,
    torch_version: str | None,
    gpu: str | None = None,
    gpus: int | None = None,
    driver: str | None = None,
    cuda: str | None = None,
    offline: bool = False,
    packages: Iterable[str] | None = None,
    platform: Iterable[str] | None = None,
):
    """The collector's options from the shared input options of `check` and `facts`."""
    from vllm_doctor.facts.collect import CollectOptions
    from vllm_doctor.facts.hardware import TargetHardware

    for option, value in (("--vllm-version", vllm_version), ("--torch-version", torch_version)):
        if value is not None:
            check_version(option, value)
    versions = parse_packages(packages)
    # vLLM and torch have their own what-if options, which set more than the version
    for name, option, given in (
        ("vllm", "--vllm-version", vllm_version),
        ("torch", "--torch-version", torch_version),
    ):
        if name in versions and given is not None and given != versions[name]:
            from vllm_doctor.errors import InputError

            raise InputError("--package", f"{name}=={versions[name]} contradicts {option} {given}")
    vllm_version = versions.pop("vllm", vllm_version)
    torch_version = versions.pop("torch", torch_version)

    return CollectOptions(
        serve_tokens=list(serve_tokens) if serve_tokens else None,
        serve_string=serve,
        serve_config=serve_config,
        model_config=model_config,
        report=report,
        log=log,
        vllm_version=vllm_version,
        torch_version=torch_version,
        packages=versions,
        target=TargetHardware(gpu=gpu, count=gpus, driver=driver, cuda=cuda) or None,
        offline=offline,
        platform=list(platform) if platform else None,
    )


RAY = "--ray"


def ray_address_optional(args: list[str]) -> list[str]:
    """``--ray`` takes an optional address: a bare ``--ray`` (last, or before another option)
    gets the empty address, which means RAY_ADDRESS, else ``auto`` (the parser itself only
    knows options that always or never take a value)."""
    out = list(args)
    for i, word in enumerate(out):
        if word == "--":
            break
        if word == RAY and (i + 1 == len(out) or out[i + 1].startswith("-")):
            out.insert(i + 1, "")
            break
    return out
