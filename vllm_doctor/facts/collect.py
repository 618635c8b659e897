"""Collect every fact the rules may look at, one collector per source.

Order: this machine (environment → packages → GPUs through NVML), or instead a collect-env
report (parsed first; its areas stand for this machine's) → a rule case's given facts → a
manifest container's stated facts → the target hardware (--gpu/--gpus/--driver/--cuda) → the
stated platform (--platform) → serve line → model config → this machine as a node of a fleet (host, NCCL library, the model's
files) → crash log → what-if versions → inferred facts (hardware and stack from what is known)
→ derived facts → release facts, release kernels and the release's reading of the
environment (what the judged vLLM release accepts, from the generated knowledge).

A collector that crashes is recorded as missing ("collector X crashed: ...") for the areas it
owns and in ``Facts.crashes``, and collection goes on, so the report still shows everything
else; ``check`` and ``facts`` then end with exit code 3 (a crash never lets a gate pass). Bad
user input (``InputError``) is not a crash and propagates to the CLI (exit code 2).
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_doctor.errors import CRASH_PREFIX, Crash, InputError
from vllm_doctor.facts.model import Facts, Source
from vllm_doctor.facts.schema import SUPPLY_HINTS

if TYPE_CHECKING:
    from vllm_doctor.facts.hardware import TargetHardware

# areas a collect-env report replaces wholesale
REPORT_AREAS = ("vllm", "torch", "packages", "driver", "gpu", "topology", "env")
MACHINE_AREAS = ("vllm", "torch", "packages", "driver", "gpu", "topology")
# this machine as one node of a fleet (facts/host.py)
HOST_AREAS = ("host", "nccl")
# the steps' names in messages ("could not finish: model config: RecursionError ...")
STEP_NAMES = {
    "report": "collect-env report",
    "environment": "environment",
    "packages": "installed packages",
    "platform": "platform and container",
    "gpus": "GPUs (NVML)",
    "serve": "serve line",
    "model": "model config",
    "host": "host and NCCL library",
    "overrides": "what-if versions",
    "inferred": "inferred facts",
    "derived": "derived facts",
}


@dataclass
class CollectOptions:
    serve_tokens: list[str] | None = None  # `-- vllm serve MODEL ...`
    serve_string: str | None = None  # --serve "vllm serve ..."
    serve_config: Path | None = None  # --serve-config serve.yaml
    manifest: str | None = None  # --manifest deploy.yaml (or -)
    model_config: Path | None = None
    report: Path | None = None  # facts from a report replace this machine's
    log: Path | None = None  # sets log.path/log.lines (the text is read by check)
    vllm_version: str | None = None  # what-if overrides (Source.USER)
    torch_version: str | None = None
    # --package NAME==VERSION: what-if versions of other packages (canonical name → version)
    packages: dict[str, str] | None = None
    target: TargetHardware | None = None  # --gpu/--gpus/--driver/--cuda (facts/hardware.py)
    # --platform words (wsl2, container, kernel=R, ...): the platform the user states
    platform: list[str] | None = None
    offline: bool = False  # --offline: never ask the Hugging Face Hub
    probe_machine: bool = True  # False: do not look at this machine (examples, tests)
    # the setup runs on another machine (check --elsewhere): this one is not read, but its
    # Hugging Face cache and the Hub still give the model's config (the same everywhere)
    elsewhere: bool = False
    environ: Mapping[str, str] | None = None
    # one container of a manifest (serveline.manifest.Target): its serve line and what its
    # file states (image, GPUs, env, /dev/shm) stand for this machine's
    manifest_target: Any = None
    # facts that stand for this machine's (a rule case's `facts:` beside its real inputs):
    # set before the serve line, so the collectors after it and the derived facts see them
    given: Facts | None = None
    # read the Hugging Face cache and ask the Hub for a config.json it lacks (None: when this
    # machine or a manifest's container is examined; True: also without, as tests judge a
    # corpus through a local stand-in of the Hub given in ``environ``)
    hub: bool | None = None


def _read_text(path: Path, what: str) -> str:
    from vllm_doctor.bounds import read_text

    return read_text(path, what, "report", errors="replace")


class _Runner:
    def __init__(self, facts: Facts, timings: dict[str, float] | None):
        self.facts = facts
        self.timings = timings

    def step(self, name: str, areas: tuple[str, ...], fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        try:
            return fn()
        except InputError:
            raise
        except Exception as err:  # recorded, collection goes on; the run exits 3 at the end
            crash = Crash.of(STEP_NAMES.get(name, name), err)
            self.facts.crashes.append(crash)
            reason = f"{CRASH_PREFIX} ({name}): {crash.error}"
            for area in areas:
                self.facts.mark_missing(area, reason)
            self.facts.notes.append(reason)
            return None
        finally:
            if self.timings is not None:
                self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start


def _collect_serve(
    facts: Facts, options: CollectOptions, env: Mapping[str, str]
) -> tuple[str | None, Any]:
    """Parse the serve line (one of three forms) into serve.*; returns the model it names and
    the container run the line is (None for another form)."""
    if options.serve_string is not None and not options.serve_string.strip():
        raise InputError("--serve", "the serve line is empty")
    given = [
        x
        for x in (
            options.serve_tokens,
            options.serve_string,
            options.serve_config,
            options.manifest_target,
        )
        if x
    ]
    if not given:
        facts.mark_missing("serve", SUPPLY_HINTS["serve"])
        return None, None
    if len(given) > 1:
        raise InputError(
            "serve line",
            "give only one of `-- vllm serve ...`, --serve, --serve-config and --manifest",
        )
    # the serve line's readers (vllm_doctor/serveline, through its face serve_args), imported
    # only when a line is given
    from vllm_doctor import serve_args

    if options.manifest_target is not None:
        target = options.manifest_target
        line = target.serve_line()
        line.to_facts(facts, Source.SERVE, env)
        target.place_serve_facts(facts)
        return (None if "model" in target.unresolved else line.model), None
    if options.serve_tokens:
        line = serve_args.parse_serve_argv(list(options.serve_tokens), Path.cwd())
        source = Source.SERVE
    elif options.serve_string:
        line = serve_args.parse_serve_string(options.serve_string)
        source = Source.SERVE
    else:  # the one input left
        assert options.serve_config is not None
        line = serve_args.load_serve_config(Path(options.serve_config))
        source = Source.SERVE_CONFIG
    line.to_facts(facts, source, env)
    return getattr(line, "model", None), getattr(line, "container", None)


def _env_from_facts(facts: Facts) -> dict[str, str]:
    return {path[4:]: str(fact.value) for path, fact in facts.area("env")}


def collect_facts(options: CollectOptions, timings: dict[str, float] | None = None) -> Facts:
    """All facts for ``options``; ``timings`` (if given) receives seconds per collector.

    The steps, in the order the module docstring gives: the machine (or the report that
    stands for it), the facts given for it, a manifest's container, the target hardware, the
    serve line and the model, this machine as a fleet's node, the crash log, and what is
    computed from the rest."""
    facts = Facts()
    run = _Runner(facts, timings)
    if options.environ is not None:
        environ: Mapping[str, str] | None = options.environ
    else:
        environ = os.environ if options.probe_machine else None
    report_facts = _collect_machine(run, options, environ)
    _apply_given(facts, options.given)
    _apply_manifest(facts, options, report_facts)
    # the target hardware replaces this machine's (or the report's) GPUs
    if options.target:
        from vllm_doctor.facts.hardware import apply_target_hardware

        apply_target_hardware(facts, options.target)  # bad names are InputError (exit 2)
    # the platform the user states replaces this machine's (or the report's)
    if options.platform:
        from vllm_doctor.facts.platform import apply_stated_platform

        apply_stated_platform(facts, options.platform)
    _collect_serve_and_model(run, options, environ)
    _collect_host(run, options, environ)
    _collect_log(facts, options.log)
    _compute_the_rest(run, options)
    return facts


def _collect_machine(
    run: _Runner, options: CollectOptions, environ: Mapping[str, str] | None
) -> Facts | None:
    """This machine's environment, packages and GPUs; or, with a collect-env report, the
    report's facts in their place (returned, for a manifest to be compared with)."""
    from vllm_doctor.facts import environment, packages, platform

    facts = run.facts
    report_facts: Facts | None = None
    if options.report is not None:
        text = _read_text(options.report, "report file")

        def parse() -> Facts:
            from vllm_doctor.facts.report import parse_report

            return parse_report(text, str(options.report))

        report_facts = run.step("report", REPORT_AREAS, parse)

    if options.report is None:
        if environ is not None:
            run.step(
                "environment", ("env",), lambda: environment.collect_environment(facts, environ)
            )
        elif options.elsewhere:
            # as a collect-env report's listing: what the inputs set is the environment
            run.step("environment", ("env",), lambda: environment.collect_environment(facts, {}))
            facts.notes.append(
                "--elsewhere: the environment is what the inputs state (the serve line's "
                "VAR=value, a manifest's env); a variable they do not set is taken as unset"
            )
        else:
            facts.mark_missing("env", "this machine's environment was not examined")
        if options.probe_machine:
            run.step(
                "packages", ("vllm", "torch", "packages"), lambda: packages.collect_packages(facts)
            )
            run.step(
                "platform",
                ("platform", "container"),
                lambda: platform.collect_platform(facts, environ or {}),
            )

            def gpus() -> None:
                from vllm_doctor.facts.gpus import collect_gpus

                collect_gpus(facts, environ)

            run.step("gpus", ("gpu", "driver", "topology"), gpus)
        else:
            reason = (
                "the setup runs elsewhere (--elsewhere): this machine was not examined"
                if options.elsewhere
                else "this machine was not examined (no report given)"
            )
            for area in MACHINE_AREAS:
                facts.mark_missing(area, reason)
            platform.not_examined(facts, reason)
    elif report_facts is not None:
        facts.merge(report_facts, replace_areas=REPORT_AREAS)
        facts.notes.append(
            f"facts from the report {options.report} replace this machine's "
            f"({', '.join(REPORT_AREAS)})"
        )
        platform.platform_from_report(facts, text, str(options.report))
    return report_facts


def _apply_given(facts: Facts, given: Facts | None) -> None:
    """Facts that stand for this machine's (a rule case's ``facts:``)."""
    if given is None:
        return
    for path, fact in given.values.items():
        facts.set(path, fact.value, fact.source, fact.detail)
    for key, reason in given.missing.items():
        facts.mark_missing(key, reason)


def _apply_manifest(facts: Facts, options: CollectOptions, report_facts: Facts | None) -> None:
    """A manifest's container: what its file states stands for this machine's; a report's
    part of another stack than the manifest's is set aside."""
    if options.manifest_target is None:
        return
    from vllm_doctor.facts import platform

    conflicts: list[tuple[tuple[str, ...], str]] = []
    if report_facts is not None:
        from vllm_doctor.facts.stack import manifest_report_conflicts

        stated = Facts()
        options.manifest_target.write_facts(stated)
        conflicts = manifest_report_conflicts(report_facts, stated, str(options.report))
    options.manifest_target.write_facts(facts)
    # the manifest's container runs elsewhere: this machine's platform is not its
    for area in ("platform", "container"):
        facts.drop_area(area)
    platform.not_examined(facts, "the manifest's container is not examined from here")
    options.manifest_target.write_platform(facts)
    for areas, reason in conflicts:  # the report's part of another stack is set aside
        for area in areas:
            facts.drop_area(area)
            facts.mark_missing(area, reason)
        facts.notes.append(reason)


def _collect_serve_and_model(
    run: _Runner, options: CollectOptions, environ: Mapping[str, str] | None
) -> None:
    """The serve line (one of its forms), then the model it names (config.json, the Hugging
    Face cache or the Hub where allowed)."""
    facts = run.facts
    from_facts = options.report is not None or options.manifest_target is not None
    serve_env: Mapping[str, str] = _env_from_facts(facts) if from_facts else (environ or {})
    model_id, container = run.step(
        "serve", ("serve",), lambda: _collect_serve(facts, options, serve_env)
    ) or (None, None)
    if model_id is None:
        model_id = facts.value("serve.model")
    # a manifest's or another machine's model is looked up in this machine's Hugging Face
    # cache (the config is the same wherever the model is served)
    served_elsewhere = options.manifest_target is not None or options.elsewhere
    lookup_env = os.environ if served_elsewhere else environ

    hub_allowed = (
        options.hub if options.hub is not None else options.probe_machine or served_elsewhere
    )

    def model() -> None:
        from vllm_doctor.facts.model_source import collect_model, names_a_path

        read_as = model_id
        if container is not None and options.model_config is None and names_a_path(model_id):
            # a path inside the container: this machine's copy only through a bind mount
            read_as = container.host_path(model_id)
            if read_as is None:
                facts.set("model.id", model_id, Source.SERVE)
                facts.mark_missing(
                    "model",
                    f"{model_id} is a path inside the container that no `{container.engine} run "
                    "-v` mount maps from this machine: pass --model-config PATH (its config.json)",
                )
                return
        collect_model(
            facts,
            options.model_config,
            read_as,
            Path.cwd(),
            lookup_env if lookup_env is not None else {},
            use_hf_cache=hub_allowed,
            hub=hub_allowed,
            offline=options.offline,
        )
        if container is not None and read_as != model_id:
            engine = container.engine
            facts.set("model.id", model_id, Source.SERVE, f"read at {read_as} (`{engine} run -v`)")

    run.step("model", ("model",), model)


def _collect_host(run: _Runner, options: CollectOptions, environ: Mapping[str, str] | None) -> None:
    """This machine as a node of a fleet (after the serve line: the model it names)."""
    if options.probe_machine and options.report is None and options.manifest_target is None:

        def host() -> None:
            from vllm_doctor.facts.host import collect_host

            collect_host(run.facts, environ if environ is not None else {})

        run.step("host", HOST_AREAS, host)
        if options.target is not None and options.target.gpu is not None:
            # --gpu names the target's GPUs: the deployment runs on another machine, whose
            # model files this one's disk does not show (ENV065/ENV066 judge them)
            for path in ("host.model_copy", "host.model_weights"):
                run.facts.values.pop(path, None)
                run.facts.mark_unknowable(
                    path, "--gpu names another machine's GPUs: its model files are not read"
                )
    else:
        for area in HOST_AREAS:
            run.facts.mark_missing(
                area, "this machine was not examined (facts from the inputs given)"
            )
        if options.report is not None:
            # a collect-env report lists no model cache: the reporter's copy cannot be known
            for path in ("host.model_copy", "host.model_weights"):
                run.facts.mark_unknowable(
                    path, "a collect-env report does not show the serving machine's model files"
                )


def _collect_log(facts: Facts, log: Path | None) -> None:
    """The crash log's size, the memory figures a start-up log prints and whether it names
    FlashInfer's sampler (`check` matches the signatures on the same text)."""
    if log is None:
        facts.mark_missing("log", SUPPLY_HINTS["log"])
        return
    from vllm_doctor.facts.crashlog import read_log

    text = read_log(log)  # `check` matches signatures on this same read
    facts.set("log.path", str(log), Source.LOG)
    facts.set("log.lines", len(text.splitlines()), Source.LOG)
    from vllm_doctor.memory.readback import printed

    # a start-up log's memory figures, compared with the estimate in every report
    facts.set("log.memory_figures", printed(text), Source.LOG, str(log))
    from vllm_doctor.logreaders.memory_figures import says_flashinfer_sampler

    if says_flashinfer_sampler(text):  # decides the profile's sampler peak (memory/profile)
        facts.set("log.flashinfer_sampler", True, Source.LOG, str(log))


def _compute_the_rest(run: _Runner, options: CollectOptions) -> None:
    """What-if versions, then everything computed from the rest: inferred facts, derived
    facts, what the judged release accepts (release knowledge) and the memory estimate."""
    from vllm_doctor.facts import derived, packages, platform

    facts = run.facts
    if options.vllm_version or options.torch_version:
        run.step(
            "overrides",
            ("vllm", "torch"),
            lambda: packages.apply_version_overrides(
                facts, options.vllm_version, options.torch_version
            ),
        )
    if options.packages:
        run.step(
            "overrides",
            ("packages",),
            lambda: packages.apply_package_overrides(facts, options.packages or {}),
        )

    def inferred() -> None:
        from vllm_doctor.facts.hardware import infer_hardware
        from vllm_doctor.facts.stack import infer_stack

        infer_hardware(facts)
        infer_stack(facts)
        platform.gpu_architecture(facts)

    run.step("inferred", (), inferred)
    run.step("derived", ("derived",), lambda: derived.compute_derived(facts))

    # what the judged release itself accepts (generated release knowledge) ------------------
    def release() -> None:
        from vllm_doctor.facts.release import collect_release, judged_between_releases

        judged_between_releases(facts, collect_release)

    run.step("release", ("release",), release)

    def release_kernels() -> None:
        from vllm_doctor.facts.release import judged_between_releases
        from vllm_doctor.facts.release_kernels import collect_release_kernels

        # reads the knowledge tables only when it needs them
        judged_between_releases(facts, collect_release_kernels)

    run.step(
        "release kernels",
        ("release.quant", "release.attention", "release.stack", "release.kernels"),
        release_kernels,
    )

    def release_env() -> None:
        from vllm_doctor.facts.release import judged_between_releases
        from vllm_doctor.facts.release_env import collect_release_env

        judged_between_releases(facts, collect_release_env)

    run.step(
        "release environment",
        (
            "release.env",
            "release.env_unknown",
            "release.env_invalid",
            "release.model_runner_v2",
            "release.deep_gemm",
            "release.deep_gemm_arch",
            "release.aiter",
        ),
        release_env,
    )

    def flashinfer_jit() -> None:
        from vllm_doctor.facts.flashinfer_jit import collect_flashinfer_jit
        from vllm_doctor.facts.release import judged_between_releases

        judged_between_releases(facts, collect_flashinfer_jit)  # reads release.env

    run.step("flashinfer jit", ("release.flashinfer_sampler_jit",), flashinfer_jit)

    def flashinfer_attention_jit() -> None:
        from vllm_doctor.facts.flashinfer_attention_jit import collect_flashinfer_attention_jit
        from vllm_doctor.facts.release import judged_between_releases

        judged_between_releases(facts, collect_flashinfer_attention_jit)  # reads release.attention

    run.step(
        "flashinfer attention jit",
        (
            "release.flashinfer_attention_jit",
            "release.flashinfer_attention_modules",
            "release.flashinfer_attention_alternatives",
        ),
        flashinfer_attention_jit,
    )

    def release_memory() -> None:
        from vllm_doctor.facts.release import judged_between_releases
        from vllm_doctor.facts.release_memory import collect_release_memory

        judged_between_releases(facts, collect_release_memory)

    run.step("release memory", ("release.uma_free_memory",), release_memory)

    def release_aiter_moe() -> None:
        from vllm_doctor.facts.release import judged_between_releases
        from vllm_doctor.facts.release_aiter_moe import collect_release_aiter_moe

        judged_between_releases(facts, collect_release_aiter_moe)

    run.step("release AITER MoE request", ("release.aiter_moe_refused",), release_aiter_moe)

    def release_moe_backend() -> None:
        from vllm_doctor.facts.release import judged_between_releases
        from vllm_doctor.facts.release_moe_backend import collect_release_moe_backend

        judged_between_releases(facts, collect_release_moe_backend)

    run.step(
        "release MoE backend",
        ("release.moe_backend.refused_on_gpu", "release.moe_backend.devices"),
        release_moe_backend,
    )

    def aiter_tuned() -> None:
        from vllm_doctor.facts.aiter_tuned import collect_aiter_tuned

        collect_aiter_tuned(facts)  # reads derived.moe_intermediate_per_rank: after it

    run.step("AITER tuned MoE shapes", ("derived.aiter_moe_untuned",), aiter_tuned)

    def memory() -> None:
        from vllm_doctor.memory.facts import compute_memory

        compute_memory(facts)  # reads the judged release: after it

    run.step("memory", ("memory",), memory)


def with_serve_line(facts: Facts, argv: list[str]) -> Facts:
    """The same facts for another serve line (a corrected command): the machine, report and
    model facts kept, the serve line's own facts and everything computed from them (derived,
    release) recomputed. InputError when the line itself is bad input."""
    from vllm_doctor import serve_args
    from vllm_doctor.facts import derived
    from vllm_doctor.facts.release import collect_release, judged_between_releases
    from vllm_doctor.facts.release_env import collect_release_env
    from vllm_doctor.facts.release_kernels import collect_release_kernels

    line = serve_args.parse_serve_argv(list(argv))
    other = copy.deepcopy(facts)  # inferred facts keep their possible values
    for area in ("serve", "derived", "release", "memory"):
        other.drop_area(area)
    for path, fact in list(other.area("env")):
        if fact.source == Source.SERVE:  # KEY=VALUE words in front of the old command
            other.values.pop(path, None)
    line.to_facts(other, Source.SERVE, _env_from_facts(other))
    derived.compute_derived(other)
    judged_between_releases(other, collect_release)
    judged_between_releases(other, collect_release_kernels)
    judged_between_releases(other, collect_release_env)
    from vllm_doctor.facts.flashinfer_jit import collect_flashinfer_jit

    judged_between_releases(other, collect_flashinfer_jit)
    from vllm_doctor.facts.flashinfer_attention_jit import collect_flashinfer_attention_jit

    judged_between_releases(other, collect_flashinfer_attention_jit)
    from vllm_doctor.facts.aiter_tuned import collect_aiter_tuned

    collect_aiter_tuned(other)  # the per-rank shape follows the serve line's TP / EP
    from vllm_doctor.memory.facts import compute_memory

    compute_memory(other)
    return other
