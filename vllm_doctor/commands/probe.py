"""`vllm-doctor probe`: run the on-GPU probes (worker subprocesses; torch never loads here)."""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import Any

import typer

from vllm_doctor.commands.inputs import split_commas
from vllm_doctor.errors import EXIT_FINDINGS, EXIT_OK, InputError
from vllm_doctor.report.output import echo

FORMATS = ("text", "json")
INSTALL_HINT = 'pip install "vllm-preflight[probe]"'


def visible_gpus(environ: dict[str, str] | None = None) -> tuple[int | None, list[str]]:
    """(count, names) of the GPUs this process may use, without torch: NVML with
    CUDA_VISIBLE_DEVICES honoured, else the variable's entries (names unknown); (None, [])
    when neither says."""
    count, names, _ = gpu_survey(environ)
    return count, names


def gpu_survey(environ: dict[str, str] | None = None) -> tuple[int | None, list[str], dict | None]:
    """visible_gpus' (count, names) and the node's topology as the probes take it
    (``{"devices": [{"uuid"}], "links": [...]}`` from NVML, or None): read once here, so that
    the workers need not initialise NVML while their process group forms."""
    env = dict(os.environ) if environ is None else environ
    try:
        from vllm_doctor.facts.gpus import collect_gpus
        from vllm_doctor.facts.model import Facts

        facts = Facts()
        collect_gpus(facts, environ=env)
        count = facts.value("gpu.count")
        if isinstance(count, int):
            devices = facts.value("gpu.devices") or []
            topology = {
                "devices": [{"uuid": d.get("uuid")} for d in devices if isinstance(d, dict)],
                "links": facts.value("topology.links") or [],
            }
            return count, list(facts.value("gpu.names") or []), topology
    except Exception:
        pass
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None, [], None
    entries = [p.strip() for p in value.split(",") if p.strip()]
    out = []
    for e in entries:  # CUDA stops at the first invalid entry ("-1" hides everything)
        if e.startswith("-"):
            break
        out.append(e)
    return len(out), [], None


def nvidia_driver_present() -> bool:
    """Whether an NVIDIA driver is loaded on this machine (asked of the kernel, not of CUDA)."""
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


def process_age() -> float | None:
    """Seconds since this process started (Linux /proc; None elsewhere): the doctor's own
    start-up (interpreter, imports, NVML) before it launches the workers."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
        return round(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError):
        return None


def visible_gpu_count(environ: dict[str, str] | None = None) -> int | None:
    return visible_gpus(environ)[0]


def parse_serve(tokens: list[str]) -> dict[str, Any]:
    """The parts of a `vllm serve` line the probes use (model, tensor-parallel size), read by
    the doctor's one serve-line parser."""
    from vllm_doctor.errors import InputError
    from vllm_doctor.serveline.parser import parse_serve_argv

    line = parse_serve_argv(list(tokens))
    if "tensor-parallel-size" in line.unread:
        # the probes size their ranks by it: a value no release reads cannot size them
        raise InputError("--tensor-parallel-size", line.unread["tensor-parallel-size"])
    return {
        "model": line.model,
        "tp": line.options.get("tensor-parallel-size"),
        "pp": line.options.get("pipeline-parallel-size"),
        "budget": {
            key.replace("-", "_"): line.options[key]
            for key in SERVE_BUDGET
            if isinstance(line.options.get(key), int)
        },
    }


# the serve line's token and sequence budgets the memory probe sizes its forward and graphs by
SERVE_BUDGET = ("max-num-batched-tokens", "max-num-seqs")


def model_sizes(model_config: Path | None, model_id: str | None) -> dict[str, int] | None:
    """The model's sizes (model_dims) from its config.json (--model-config, a local model
    directory, or the Hugging Face cache), or None."""
    if model_config is None and not model_id:
        return None
    from vllm_doctor.facts.model import Facts
    from vllm_doctor.facts.model_source import collect_model

    facts = Facts()
    collect_model(facts, model_config=model_config, model_id=model_id)
    return model_dims(facts)


def model_dims(facts: Any) -> dict[str, int] | None:
    """The model sizes the probes take (registry.MODEL_KEYS: vocab and hidden size, heads,
    layers) from collected facts, or None."""
    from vllm_doctor.probes.registry import MODEL_KEYS

    sizes = {k: facts.value(f"model.{k}") for k in MODEL_KEYS}
    sizes = {k: v for k, v in sizes.items() if isinstance(v, int) and v > 0}
    return sizes or None


def require_torch(machine: Any, device: str) -> None:
    """Bad input (exit 2, one line) when the probes cannot run here: no torch, or a torch
    without CUDA where the probes would run on a GPU. Read from the installed files, never by
    importing torch."""
    from vllm_doctor.facts.packages import collect_packages

    collect_packages(machine)
    if machine.get("torch.version") is None:
        why = machine.why_missing("torch") or "torch is not installed"
        raise InputError("probe", f"{why}; the probes run on torch: {INSTALL_HINT}")
    if device == "cuda" and machine.get("torch.cuda_version") is None:
        why = machine.why_missing("torch.cuda_version") or "this torch has no CUDA"
        raise InputError(
            "probe",
            f"torch {machine.value('torch.version')}: {why}, and the probes "
            f"would run on the GPU: install a CUDA build of torch "
            f"(https://pytorch.org/get-started/locally/), then "
            f"{INSTALL_HINT}; or run the CPU variant with --device cpu",
        )


def judged_facts(machine: Any, vllm_version: str | None, report: Path | None) -> Any:
    """The facts whose vLLM the probes' verdicts are joined with: a report's (its areas
    replace this machine's, as in `check --report`), else the installed vLLM (its version and
    source tree, so fingerprints decide), either replaced by --vllm-version."""
    from vllm_doctor.commands.inputs import check_version
    from vllm_doctor.facts.packages import apply_version_overrides, collect_packages

    if vllm_version is not None:
        check_version("--vllm-version", vllm_version)
    if report is not None:
        from vllm_doctor.facts.collect import CollectOptions, collect_facts

        return collect_facts(CollectOptions(report=report, vllm_version=vllm_version))
    if machine.get("vllm.installed") is None:  # not read yet (require_torch reads it)
        collect_packages(machine)
    if vllm_version:
        apply_version_overrides(machine, vllm_version, None)
    return machine


def judged_vllm(facts: Any) -> dict[str, Any]:
    """Which vLLM the verdicts speak of, for the report's head."""
    fact = facts.get("vllm.version")
    if fact is None:
        why = facts.why_missing("vllm.version") or facts.why_missing("vllm") or "unknown"
        return {
            "version": None,
            "source": None,
            "said": f"no vLLM ({why}); --vllm-version V or --report FILE judges one",
        }
    from vllm_doctor.facts.model import Source

    where = (
        ""
        if fact.source == Source.MACHINE
        else " (--vllm-version)"
        if fact.source == Source.USER
        else f" ({fact.describe_source()})"
    )
    location = facts.value("vllm.location")
    tree = f", source at {location}" if location else ""
    return {"version": fact.value, "source": fact.source, "said": f"vLLM {fact.value}{where}{tree}"}


def run_probe_command(
    names: list[str] | None,
    tp: int | None,
    device: str | None,
    timeout: float,
    fmt: str,
    serve_tokens: list[str],
    model_config: Path | None,
    results_dir: Path | None,
    verbose: bool,
    teardown_timeout: float,
    list_only: bool = False,
    use_cache: bool = True,
    vllm_version: str | None = None,
    report: Path | None = None,
    extensions: list[Path] | None = None,
    ray_address: str | None = None,
    join_timeout: float | None = None,
    doctor_from: str = "upload",
) -> int:
    from vllm_doctor.facts.model import Facts
    from vllm_doctor.probes import PROBES, load_results_dir, run_probes
    from vllm_doctor.probes.render import Progress, cpu_variant, render_text, to_json
    from vllm_doctor.probes.verdict import exit_level, join_results

    if fmt not in FORMATS:
        raise InputError("--format", f"unknown format {fmt!r} (text or json)")
    if list_only:
        for p in PROBES:
            if not p.hidden:
                said = "measures; runs when named" if p.on_request else ", ".join(p.rules)
                echo(f"{p.name:18} {p.title} [{said}]")
        return EXIT_OK
    from vllm_doctor.probes.deadlines import MAX_TEARDOWN_TIMEOUT_S, MAX_TIMEOUT_S, check_seconds
    from vllm_doctor.probes.launch import max_ranks, too_many_ranks
    from vllm_doctor.probes.runner import resolve

    if results_dir is not None and ray_address is not None:
        raise InputError("--ray", "runs the probes; --results collates an earlier run: give one")
    timeout = check_seconds("--timeout", timeout, MAX_TIMEOUT_S)
    teardown_timeout = check_seconds(
        "--teardown-timeout", teardown_timeout, MAX_TEARDOWN_TIMEOUT_S, allow_zero=True
    )
    only = [n for n in names if n] if names else None
    if ray_address is not None and only is None:  # the probes, and the cross-node collectives
        from vllm_doctor.fleet.probe_ray import default_names

        only = default_names()
    specs = resolve(only)  # an unknown name is bad input before anything starts
    started = time.monotonic()
    machine = Facts()
    if results_dir is not None:
        skipped: list[str] = []
        results = load_results_dir(results_dir, skipped=skipped)
        if only:
            results = [r for r in results if r.name in only or r.name == "teardown"]
        if skipped:
            typer.echo(
                f"vllm-doctor: {results_dir}: left out {len(skipped)} line(s) that are not "
                f"probe events (first: {skipped[0]})",
                err=True,
            )
        ranks = max((len(r.ranks) for r in results if r.name != "teardown"), default=0)
        meta = {"tp": ranks, "device": "torchrun", "source": str(results_dir)}
        if skipped:
            meta["skipped_lines"] = skipped[:20]
    elif ray_address is not None:
        line: dict[str, Any] = parse_serve(serve_tokens) if serve_tokens else {}
        if extensions:
            raise InputError(
                "--extension", "is read on this machine: with --ray each node loads its own stack"
            )
        model = model_sizes(model_config, line.get("model"))
        judged = judged_facts(machine, vllm_version, report)  # bad input before the run
        from vllm_doctor.fleet.probe_ray import probe_over_ray

        with Progress([s.name for s in specs]) as progress:
            results, meta = probe_over_ray(
                ray_address or None,
                only,
                tp,
                line,
                device,
                timeout,
                join_timeout,
                teardown_timeout,
                model,
                doctor_from,
                on_update=progress.update,
            )
        meta.update(model=model, timeout_s=timeout, results_at_s=progress.timeline())
        if meta.get("device") == "cpu":
            why = (
                "no GPU in the Ray cluster"
                if meta.pop("device_defaulted", False)
                else "--device cpu"
            )
            meta["cpu_variant"] = dict(cpu_variant(results), why=why)
    else:
        serve = (
            parse_serve(serve_tokens) if serve_tokens else {"model": None, "tp": None, "budget": {}}
        )
        count, gpu_names, topology = gpu_survey()
        defaulted = device is None
        if device is None:  # CUDA_VISIBLE_DEVICES alone is no GPU: NVML or a driver must be there
            device = (
                "cuda" if count and (topology is not None or nvidia_driver_present()) else "cpu"
            )
        if device not in ("cuda", "cpu"):
            raise InputError("--device", f"unknown device {device!r} (cuda or cpu)")
        if device == "cuda" and (count == 0 or (count is None and not nvidia_driver_present())):
            why = (
                "NVML and CUDA_VISIBLE_DEVICES show none"
                if count == 0
                else "no NVIDIA driver is loaded (no /proc/driver/nvidia, no /dev/nvidiactl)"
            )
            raise InputError(
                "--device", f"no GPU is visible: {why}; use --device cpu for the CPU (gloo) run"
            )
        source = "--tp"
        if tp is None and serve["tp"] is not None:
            tp, source = serve["tp"], "serve line --tensor-parallel-size"
        if tp is None:
            tp = count if device == "cuda" and count else 2 if device == "cpu" else 1
        if not isinstance(tp, int) or isinstance(tp, bool) or tp < 1:
            raise InputError(source, f"must be at least 1 (got {tp})")
        limit = max_ranks(device, count if device == "cuda" else None)
        if tp > limit:
            raise InputError(source, too_many_ranks(tp, device, limit))
        if any(s.needs_torch for s in specs):
            require_torch(machine, device)
        model = model_sizes(model_config, serve["model"])
        judged = judged_facts(machine, vllm_version, report)  # bad input before the run
        kernels = kernel_libraries(specs, extensions or [])  # bad --extension before the run
        if device == "cpu" and defaulted:
            untested = [s.name for s in specs if s.needs_cuda and not s.hidden]
            needs = f"; {', '.join(untested)} need a CUDA GPU and do not run" if untested else ""
            typer.echo(
                f"vllm-doctor: no GPU is visible: running the CPU (gloo) variant with small "
                f"shapes{needs} (--device cpu chooses this without the notice)",
                err=True,
            )
        doctor_start_s = process_age()
        info: dict[str, Any] = {}
        with Progress([s.name for s in specs]) as progress:
            results = run_probes(
                only,
                tp,
                device,
                timeout,
                model,
                on_update=progress.update,
                teardown_timeout=teardown_timeout,
                use_cache=use_cache,
                params=dict(
                    serve["budget"],
                    **({"topology": topology} if device == "cuda" and topology else {}),
                    **({"kernels": kernels} if kernels is not None else {}),
                ),
                visible_gpus=count if device == "cuda" else None,
                info=info,
            )
        meta = {
            "tp": tp,
            "device": device,
            "model": model,
            "timeout_s": timeout,
            "doctor_start_s": doctor_start_s,
            "results_at_s": progress.timeline(),
            **info,
        }
        if device == "cuda" and gpu_names:
            meta["gpu"] = ", ".join(f"{n} ×{gpu_names.count(n)}" for n in sorted(set(gpu_names)))
        if device == "cpu":
            meta["cpu_variant"] = dict(
                cpu_variant(results), why="no GPU is visible" if defaulted else "--device cpu"
            )
    if results_dir is not None:
        judged = judged_facts(machine, vllm_version, report)
    join_results(results, judged, "cpu" if meta["device"] == "cpu" else "cuda")
    meta["vllm"] = judged_vllm(judged)
    meta["elapsed_s"] = round(time.monotonic() - started, 3)
    if fmt == "json":
        echo(to_json(results, meta))
    else:
        render_text(results, meta, verbose=verbose)
    return EXIT_FINDINGS if exit_level(results) == "error" else EXIT_OK


def kernel_libraries(specs: list[Any], extensions: list[Path]) -> dict | None:
    """What the kernels probe loads: the installed stack's compiled libraries and the files
    given with --extension (read here, without importing them); None when it does not run."""
    if not any(s.name == "kernels" for s in specs):
        if extensions:
            raise InputError("--extension", "only the kernels probe loads extensions")
        return None
    from vllm_doctor.probes.kernel_inventory import installed_libraries, user_libraries

    given = user_libraries(extensions)
    return {"libraries": installed_libraries() + given}


SERVE_TOKENS = "vllm_doctor.probe.serve_tokens"


def _probe_command_class() -> type:
    """The probe command splits its arguments at ``--`` before click parses them: probe names
    come before it (``probe p2p-nccl tp-softembed``), a ``vllm serve`` line after it."""
    from typer.core import TyperCommand

    class ProbeCommand(TyperCommand):
        def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
            from vllm_doctor.commands.inputs import ray_address_optional

            args = ray_address_optional(args)
            if "--" in args:
                cut = args.index("--")
                ctx.meta[SERVE_TOKENS] = args[cut + 1 :]
                args = args[:cut]
            else:
                ctx.meta[SERVE_TOKENS] = []
            return super().parse_args(ctx, args)

    return ProbeCommand


def probe_names(positional: list[str], only: list[str] | None) -> list[str] | None:
    """The probes named on the command line (positional names and --only), or None for all."""
    for word in positional:
        if word.startswith("-"):
            raise InputError("probe", f"unknown option {word!r} (a serve line goes after --)")
        if word in ("vllm", "serve"):
            raise InputError(
                "probe",
                f"{word!r} is not a probe name; give the serve line after "
                "-- (probe -- vllm serve MODEL ...) or with --serve",
            )
    names = [p.strip() for w in positional for p in w.split(",") if p.strip()]
    return (names + list(split_commas(only) or [])) or None


def register(app: typer.Typer) -> None:
    @app.command(
        "probe",
        cls=_probe_command_class(),
        options_metavar="[OPTIONS] [NAME]... [-- vllm serve ...]",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )
    def _cmd(
        ctx: typer.Context,
        tp: int | None = typer.Option(
            None,
            "--tp",
            help="Ranks (one GPU each). Default: the serve "
            "line's tensor-parallel size, else the visible GPUs.",
        ),
        only: list[str] | None = typer.Option(
            None,
            "--only",
            help="Probes to run (comma-separated); the same as naming them: probe NAME [NAME...].",
        ),
        device: str | None = typer.Option(
            None,
            "--device",
            help="cuda (NCCL) or cpu (gloo, small shapes). Default: cuda when a GPU is visible.",
        ),
        timeout: float = typer.Option(
            120.0, "--timeout", help="Seconds each probe may take (finite, at most a day)."
        ),
        fmt: str = typer.Option("text", "--format", help="text or json"),
        serve: str | None = typer.Option(
            None, "--serve", help="The vllm serve line, quoted (or put it after --)."
        ),
        model_config: Path | None = typer.Option(
            None,
            "--model-config",
            help="The model's config.json or directory (vocab and hidden sizes).",
        ),
        results: Path | None = typer.Option(
            None,
            "--results",
            help="Collate a torchrun run: the directory given to the worker's --out.",
        ),
        teardown_timeout: float = typer.Option(
            2.0,
            "--teardown-timeout",
            help="Seconds a worker waits for destroy_process_group before reporting a hang.",
        ),
        list_: bool = typer.Option(
            False, "--list", help="List the probes and the rules they confirm."
        ),
        no_cache: bool = typer.Option(
            False,
            "--no-cache",
            help="Re-run cached deterministic sub-checks "
            "(the traced torch.compile failure) instead of reusing them.",
        ),
        vllm_version: str | None = typer.Option(
            None,
            "--vllm-version",
            help="Judge the verdicts against this vLLM release (default: the installed one).",
        ),
        report: Path | None = typer.Option(
            None,
            "--report",
            help="Judge the verdicts against the vLLM of a `vllm collect-env` report.",
        ),
        extension: list[Path] | None = typer.Option(
            None,
            "--extension",
            help="A compiled CUDA library the kernels probe also loads on every GPU kind "
            "(.so, .o, .fatbin, .cubin, .ptx; repeatable).",
        ),
        ray: str | None = typer.Option(
            None,
            "--ray",
            flag_value="",
            help="Place the ranks on a running Ray cluster as vLLM's Ray executor places its "
            "workers (one actor per GPU): its address, or none for RAY_ADDRESS, else `auto`.",
        ),
        join_timeout: float | None = typer.Option(
            None,
            "--join-timeout",
            help="Seconds from the first rank's joining the process group for every rank to "
            "join it; a rank that does not is a finding naming it and its node (default: the "
            "start-up limit, max(--timeout, 60)).",
        ),
        doctor_from: str = typer.Option(
            "upload",
            "--doctor-from",
            help="With --ray: upload (Ray's runtime environment ships the doctor to the nodes) "
            "or installed (the nodes' own install).",
        ),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="Every metric, every rank."),
    ) -> int:
        """Confirm a known failure's mechanism on this hardware with small on-GPU experiments.

        Each result is joined with whether the judged vLLM carries the fix."""
        serve_tokens = list(ctx.meta.get(SERVE_TOKENS) or [])
        positional = list(ctx.args)
        from vllm_doctor.probes.registry import PROBE_NAMES

        if ray in PROBE_NAMES:  # `probe --ray collectives`: a probe's name, not an address
            positional, ray = [ray, *positional], ""
        names = probe_names(positional, only)
        if serve and serve_tokens:
            raise InputError(
                "--serve", "give the serve line either with --serve or after --, not both"
            )
        if serve:
            try:
                serve_tokens = shlex.split(serve)
            except ValueError as err:  # unbalanced quotes
                raise InputError("--serve", f"cannot split the serve line: {err}") from None
        code = run_probe_command(
            names,
            tp,
            device,
            timeout,
            fmt,
            serve_tokens,
            model_config,
            results,
            verbose,
            teardown_timeout,
            list_only=list_,
            use_cache=not no_cache,
            vllm_version=vllm_version,
            report=report,
            extensions=list(extension or []),
            ray_address=ray,
            join_timeout=join_timeout,
            doctor_from=doctor_from,
        )
        if code:
            raise typer.Exit(code)
        return code
