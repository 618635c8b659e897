"""Probe worker: one process per rank runs every selected probe in sequence.

Run by the doctor's own launcher on one node, or by ``torchrun`` across nodes::

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
        -m vllm_doctor.probes.worker --out /shared/probe-run

It reads the standard ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
``MASTER_PORT`` variables, initialises ``torch.distributed`` (NCCL on GPUs, gloo on CPU) once,
and streams one JSON event per line: a result as soon as each probe finishes, ``done`` when
all results are out, and then ``teardown`` once ``destroy_process_group`` returned (or did not
within the teardown limit, in which case the worker says so and exits anyway).

Isolated sub-checks (a probe's *parts*) run as their own fresh processes (``--part
PROBE:PART``), started at the very beginning of the run (by the doctor's runner, or by rank 0
under torchrun) so that their torch import overlaps the ranks' start-up; each writes its own
events and is killed if it overruns.

Every worker dies with the process that started it: the parent-death signal on Linux and a
watchdog thread on the parent's pid everywhere.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

T0 = time.perf_counter()

# Errors after which the CUDA context or the communicator cannot be trusted: the worker
# reports the probe, then exits so that the runner continues in fresh processes.
_STICKY = (
    "illegal memory access",
    "CUDA error",
    "unspecified launch failure",
    "device-side assert",
    "NCCL error",
    "ncclInternalError",
    "ncclUnhandledCudaError",
    "ncclSystemError",
    "ncclRemoteError",
    "CUBLAS_STATUS_EXECUTION_FAILED",
    "AcceleratorError",
    "Watchdog caught collective operation timeout",
)


class Events:
    """Appends JSON events to a file (line-buffered) or to stdout with a marker prefix."""

    MARK = "VLLM_DOCTOR_EVENT "

    def __init__(self, path: str | None, rank: int, echo: bool):
        self.rank = rank
        self.echo = echo
        # open for the worker's lifetime: every event is appended as it happens
        self.fh = open(path, "a", buffering=1, encoding="utf-8") if path else None  # noqa: SIM115

    def __call__(self, event: dict[str, Any]) -> None:
        event = dict(event, rank=self.rank, t=round(time.perf_counter() - T0, 4))
        line = json.dumps(event, default=str)
        if self.fh is not None:
            self.fh.write(line + "\n")
            self.fh.flush()
        else:
            print(self.MARK + line, flush=True)
        if self.echo:
            _echo(event)


def _echo(event: dict[str, Any]) -> None:
    """Human-readable progress on stdout (it lands in the log; under torchrun it is the output)."""
    ev = event.get("ev")
    prefix = f"[rank {event.get('rank')}]"
    if ev == "init":
        print(
            f"{prefix} init: {event.get('backend') or 'no process group'}"
            f" in {event.get('dist_init_s', 0):.2f}s (torch import {event.get('import_torch_s', 0):.2f}s)",
            flush=True,
        )
    elif ev == "start":
        print(f"{prefix} {event['probe']}: start", flush=True)
    elif ev == "progress":
        print(f"{prefix} {event['probe']}: {event.get('msg')}", flush=True)
    elif ev == "result":
        res = event.get("result", {})
        print(
            f"{prefix} {event['probe']}: {res.get('status')} {res.get('reason', '')}".rstrip(),
            flush=True,
        )
    elif ev in ("done", "teardown", "abort"):
        rest = {k: v for k, v in event.items() if k not in ("ev", "rank", "t")}
        print(f"{prefix} {ev} {json.dumps(rest, default=str)}", flush=True)


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def _load_probe(module: str) -> Any:
    import importlib

    return importlib.import_module(f"vllm_doctor.probes.{module}")


def _is_sticky(text: str) -> bool:
    return any(s in text for s in _STICKY)


def _run_one(fn: Callable[[Any], dict], ctx: Any) -> dict:
    from vllm_doctor.probes._common import err_text, result

    t0 = time.perf_counter()
    try:
        res = fn(ctx)
    except Exception as err:
        traceback.print_exc()
        sys.stderr.flush()
        res = result("error", err_text(err))
        if _is_sticky(f"{type(err).__name__}: {err}"):
            ctx.stop_after = True
            res["notes"] = [
                "the process stopped after this error (its CUDA context or "
                "communicator cannot be trusted); later probes ran in fresh processes"
            ]
    res.setdefault("metrics", {})
    res["duration_s"] = round(time.perf_counter() - t0, 4)
    return res


def die_with_parent(parent: int | None = None) -> int:
    """Make this process end when its parent does: ``PR_SET_PDEATHSIG`` (SIGKILL) on Linux,
    and everywhere a watchdog thread that leaves as soon as the process is re-parented. A worker
    stuck in a CUDA or NCCL call holds no Python lock the kernel's signal needs, so the first
    one also ends a stuck worker. Returns the parent's pid."""
    if parent is None:
        parent = _env_int("VLLM_DOCTOR_PARENT_PID", 0) or os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            libc = ctypes.CDLL(None, use_errno=True)
            pr_set_pdeathsig = 1
            libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no libc prctl: the watchdog stays
            pass
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(EXIT_ORPHANED)

    def watch() -> None:
        while True:
            time.sleep(0.25)
            if os.getppid() != parent:
                os._exit(EXIT_ORPHANED)

    import threading

    threading.Thread(target=watch, name="vllm-doctor-parent-watchdog", daemon=True).start()
    return parent


EXIT_ORPHANED = 4


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vllm_doctor.probes.worker",
        description="vllm-doctor probe worker (one per rank)",
    )
    parser.add_argument(
        "--probes", default=None, help="comma-separated probe names (default: every probe)"
    )
    parser.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default=None,
        help="cuda (NCCL) or cpu (gloo); default: cuda when torch sees a GPU",
    )
    parser.add_argument("--events", default=None, help="append JSON events to this file")
    parser.add_argument(
        "--out",
        default=None,
        help="directory for events.rank<R>.jsonl (torchrun; collate with "
        "`vllm-doctor probe --results DIR`)",
    )
    parser.add_argument("--params", default=None, help="JSON parameters (model sizes, ...)")
    parser.add_argument(
        "--parts",
        default=None,
        help="isolated sub-checks rank 0 starts (PROBE:PART,...; default: those of "
        "the selected probes; 'none' for none)",
    )
    parser.add_argument(
        "--parts-prefix", default=None, help="path prefix of the sub-checks' event and log files"
    )
    parser.add_argument(
        "--part",
        default=None,
        help="run one isolated sub-check (PROBE:PART) in this process and exit",
    )
    parser.add_argument(
        "--teardown-timeout",
        type=float,
        default=2.0,
        help="seconds to wait for destroy_process_group before reporting a hang",
    )
    parser.add_argument("--quiet", action="store_true", help="no human-readable lines on stdout")
    args = parser.parse_args(argv)

    die_with_parent()
    from vllm_doctor.probes.registry import BY_NAME, DEFAULT_PROBES

    params: dict[str, Any] = json.loads(args.params) if args.params else {}
    rank = _env_int("RANK", 0)
    world = _env_int("WORLD_SIZE", 1)
    local_rank = _env_int("LOCAL_RANK", rank)
    params.setdefault("tp", world)
    if args.part:
        probe, _, part = args.part.partition(":")
        run_part(probe, part, args.events, params, args.device or "cpu")
    events_path = args.events
    parts_prefix = args.parts_prefix
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        if events_path is None:
            events_path = os.path.join(args.out, f"events.rank{rank}.jsonl")
        if parts_prefix is None:
            parts_prefix = os.path.join(args.out, "events.part-")
    emit = Events(events_path, rank, echo=not args.quiet)
    emit(
        {
            "ev": "hello",
            "pid": os.getpid(),
            "world": world,
            "local_rank": local_rank,
            "host": os.uname().nodename,
        }
    )

    if args.probes:
        names = [n for n in args.probes.split(",") if n]
        unknown = [n for n in names if n not in BY_NAME]
        if unknown:
            emit({"ev": "fatal", "error": f"unknown probes: {', '.join(unknown)}"})
            return 2
        specs = [BY_NAME[n] for n in names]
    else:
        specs = list(DEFAULT_PROBES)

    need_torch = any(s.needs_torch for s in specs)
    init: dict[str, Any] = {}
    # when each start-up step ended, in seconds since the worker started (bench/probes reads
    # them to tell where a run's time goes)
    at: dict[str, float] = {}
    init["at"] = at

    def mark(step: str) -> None:
        at[step] = round(time.perf_counter() - T0, 4)

    device_kind = args.device or "cpu"
    backend = None
    parts: list[Any] = []
    if rank == 0 and args.device is not None:
        # Under torchrun nobody else starts the isolated sub-checks: start them now, so that
        # their torch import runs beside this one.
        parts = _start_parts(args.parts, specs, world, device_kind, parts_prefix, params, emit)
    try:
        if need_torch:
            t = time.perf_counter()
            import torch
            import torch.distributed as dist

            init["import_torch_s"] = round(time.perf_counter() - t, 4)
            mark("torch_imported")
            init["torch"] = torch.__version__
            if args.device is None:
                device_kind = "cuda" if torch.cuda.is_available() else "cpu"
        runnable = [s for s in specs if s.skip_reason(world, device_kind) is None]
        if rank == 0 and args.device is None:
            parts = _start_parts(
                args.parts, runnable, world, device_kind, parts_prefix, params, emit
            )
        from vllm_doctor.probes._common import Ctx, call_in_thread

        ctx = Ctx(
            rank=rank,
            world=world,
            local_rank=local_rank,
            device_kind=device_kind,
            params=params,
            emit=emit,
            init=init,
        )
        init_job = None
        if need_torch:
            if any(s.collective for s in runnable):
                backend = "nccl" if device_kind == "cuda" else "gloo"
                kwargs: dict[str, Any] = {"backend": backend}
                if device_kind == "cuda":
                    kwargs["device_id"] = torch.device("cuda", local_rank)  # eager NCCL init
                from vllm_doctor.probes.rendezvous import store_kwargs

                kwargs.update(store_kwargs(dist, rank, world))  # the store the ranks meet through
                ctx.store = kwargs.get("store")

                def init_pg() -> None:
                    mark("group_started")
                    if (params.get("selftest") or {}).get("never_join_rank") == rank:
                        from vllm_doctor.probes.selftest import never_join

                        never_join(rank)
                    # the runner tells a rank that never joined from those that wait for it
                    emit({"ev": "joining", "backend": backend})
                    if device_kind == "cuda":
                        torch.cuda.set_device(local_rank)  # the current device is per thread
                    dist.init_process_group(**kwargs)
                    if device_kind == "cpu":
                        dist.barrier()
                    mark("group_formed")

                # The rendezvous and the communicator set-up mostly wait: CUDA's start, the
                # probes' local preparation and the probes that need no communicator run
                # meanwhile.
                if (params.get("bench") or {}).get("init_first"):  # bench: no overlap at all
                    init_job = call_in_thread(init_pg)
                    init_job.join(float("inf"))
                else:
                    init_job = call_in_thread(init_pg)
            if device_kind == "cuda":
                t = time.perf_counter()
                torch.cuda.set_device(local_rank)
                torch.cuda.init()
                init["cuda_init_s"] = round(time.perf_counter() - t, 4)
                mark("cuda_ready")
                init["gpu"] = torch.cuda.get_device_name(local_rank)
        ctx.dist_backend = backend
        t = time.perf_counter()
        for spec in runnable:
            prepare = getattr(_load_probe(spec.module), "prepare", None)
            if prepare is None or not spec.needs_torch:
                continue
            ctx.probe = spec.name
            t0 = time.perf_counter()
            try:
                ctx.prepared[spec.name] = prepare(ctx)
            except Exception as err:
                traceback.print_exc()
                ctx.prepared[spec.name] = err
                if _is_sticky(f"{type(err).__name__}: {err}"):
                    raise
            ctx.prepare_s[spec.name] = round(time.perf_counter() - t0, 4)
        init["prepare_s"] = round(time.perf_counter() - t, 4)
        mark("prepared")
    except Exception as err:
        traceback.print_exc()
        emit({"ev": "fatal", "error": f"{type(err).__name__}: {err}"})
        _exit(3, parts)

    # The probes that need no communicator run while the process group is still forming; the
    # ones left when it is ready run after the collective probes, beside its teardown.
    local = [s for s in specs if not s.collective]
    collective = [s for s in specs if s.collective]
    early: list[Any] = []
    if init_job is not None:
        while local and init_job.thread.is_alive():
            spec = local.pop(0)
            early.append(spec)
            _run_spec(spec, ctx, emit, parts)
    try:
        if init_job is not None:
            returned, seconds, failure = init_job.join(float("inf"))
            if failure is not None:
                raise failure
            init["dist_init_s"] = round(seconds, 4)
    except Exception as err:
        traceback.print_exc()
        emit({"ev": "fatal", "error": f"{type(err).__name__}: {err}"})
        _exit(3, parts)
    init["backend"] = backend
    init["device"] = device_kind
    init["ran_while_forming"] = [s.name for s in early]
    emit(dict({"ev": "init"}, **init))

    teardown = None

    def start_teardown():
        emit({"ev": "teardown_start"})

        def destroy() -> None:
            if ctx.hang_teardown == "soft":
                time.sleep(3600)
            if backend is not None:
                import torch.distributed as dist

                dist.destroy_process_group()
            if device_kind == "cuda" and (params.get("bench") or {}).get("release_early"):
                import torch

                torch.cuda.empty_cache()  # less to unmap when the process exits

        return call_in_thread(destroy)

    for spec in collective + local:
        if (
            teardown is None
            and not spec.collective
            and (backend is not None or ctx.hang_teardown == "soft")
        ):
            teardown = start_teardown()
        _run_spec(spec, ctx, emit, parts)
    if teardown is None and (backend is not None or ctx.hang_teardown == "soft"):
        teardown = start_teardown()
    emit({"ev": "done", "dynamo_imported": "torch._dynamo" in sys.modules})
    sys.stdout.flush()
    sys.stderr.flush()

    if ctx.hang_teardown == "hard":
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:  # a teardown that never returns and ignores SIGTERM
            time.sleep(3600)
    if teardown is not None:
        returned, seconds, failure = teardown.join(args.teardown_timeout)
        event: dict[str, Any] = {
            "ev": "teardown",
            "seconds": round(seconds, 4),
            "returned": returned,
            "limit_s": args.teardown_timeout,
        }
        if failure is not None:
            event["error"] = f"{type(failure).__name__}: {failure}"
        emit(event)
    # Without the doctor's runner (torchrun), rank 0 waits for its sub-checks so that their
    # results are in the output directory when the launcher returns.
    _exit(0, parts, wait_s=PART_WAIT_S)
    return 0


def _run_spec(spec: Any, ctx: Any, emit: Events, parts: list[Any]) -> None:
    """Run one probe (or report why it skips) and stream its result; leave after a sticky error."""
    from vllm_doctor.probes._common import result

    ctx.probe = spec.name
    emit({"ev": "start", "probe": spec.name})
    reason = spec.skip_reason(ctx.world, ctx.device_kind)
    if reason:
        res = result("skip", reason)
        res["duration_s"] = 0.0
    else:
        module = _load_probe(spec.module)
        fn = getattr(module, "run_" + spec.name.replace("-", "_"), None) or module.run
        res = _run_one(fn, ctx)
        if spec.name in ctx.prepare_s:
            res.setdefault("metrics", {})["prepare_s"] = ctx.prepare_s[spec.name]
    emit({"ev": "result", "probe": spec.name, "result": res})
    if ctx.stop_after:
        emit({"ev": "abort", "after": spec.name})
        _exit(3, parts)


PART_WAIT_S = 300.0


def _exit(code: int, parts: list[Any], wait_s: float = 0.0) -> None:
    """Leave without running destructors (a poisoned CUDA context can abort in them). With
    ``wait_s`` (torchrun), first wait that long for the sub-checks this rank started; those
    still running after it are killed."""
    deadline = time.monotonic() + wait_s
    pending = list(parts)
    while pending and time.monotonic() < deadline:
        pending = [p for p in pending if p.poll() is None]
        if pending:
            time.sleep(0.05)
    import signal

    for p in pending:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def part_command(
    probe: str, part: str, events: str, device_kind: str, params: dict, python: str | None = None
) -> list[str]:
    """The command line of one isolated sub-check's process."""
    from vllm_doctor.child import module_command

    return module_command(
        "vllm_doctor.probes.worker",
        "--part",
        f"{probe}:{part}",
        "--events",
        events,
        "--device",
        device_kind,
        "--params",
        json.dumps(params),
        python=python,
    )


def _start_parts(
    requested: str | None,
    specs: list,
    world: int,
    device_kind: str,
    prefix: str | None,
    params: dict,
    emit: Events,
) -> list[Any]:
    """Rank 0 under torchrun: start the isolated sub-checks of the selected probes."""
    import subprocess

    from vllm_doctor.probes.registry import BY_NAME

    if requested == "none" or prefix is None:
        return []
    if requested:
        wanted = [tuple(x.split(":", 1)) for x in requested.split(",") if ":" in x]
    else:
        wanted = [(s.name, p.name) for s in specs for p in s.parts]
    names = {s.name for s in specs if s.skip_reason(world, device_kind) is None}
    started = []
    for probe, part in wanted:
        if probe not in names:
            continue
        pspec = next((p for p in BY_NAME[probe].parts if p.name == part), None)
        if pspec is None:
            continue
        events, log = f"{prefix}{probe}-{part}.jsonl", f"{prefix}{probe}-{part}.log"
        env = dict(
            os.environ, **pspec.env, VLLM_DOCTOR_PARENT_PID=str(os.getpid()), PYTHONUNBUFFERED="1"
        )
        with open(log, "wb") as log_fh:
            popen = subprocess.Popen(
                part_command(probe, part, events, device_kind, params),
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        emit(
            {
                "ev": "forked",
                "probe": probe,
                "part": part,
                "pid": popen.pid,
                "events": events,
                "log": log,
            }
        )
        started.append(popen)
    return started


def run_part(probe: str, part: str, events: str | None, params: dict, device_kind: str) -> None:
    """One isolated sub-check in this fresh process: its environment (say, the caching
    allocator off) was set by whoever started it, before torch is imported here."""
    code = 0
    try:
        from vllm_doctor.probes.registry import BY_NAME

        spec = BY_NAME[probe]
        pspec = next(p for p in spec.parts if p.name == part)
        os.environ.update(pspec.env)  # read by torch when CUDA is first used
        device = device_kind if pspec.needs_cuda else "cpu"
        emit = Events(events, 0, echo=True)
        emit({"ev": "hello", "pid": os.getpid(), "probe": probe, "part": part, "world": 1})
        from vllm_doctor.probes._common import Ctx

        ctx = Ctx(
            rank=0,
            world=1,
            local_rank=_env_int("LOCAL_RANK", 0),
            device_kind=device,
            params=params,
            emit=emit,
            probe=probe,
            part=part,
        )
        t = time.perf_counter()
        if spec.needs_torch:
            import torch  # noqa: F401 - timed here, used by the sub-check
        ctx.init["import_torch_s"] = round(time.perf_counter() - t, 4)
        emit({"ev": "start", "probe": probe, "part": part})
        module = _load_probe(spec.module)
        res = _run_one(getattr(module, "part_" + part), ctx)
        if spec.needs_torch:
            res.setdefault("metrics", {})["import_torch_s"] = ctx.init["import_torch_s"]
        emit({"ev": "result", "probe": probe, "part": part, "result": res})
        emit({"ev": "done"})
    except BaseException:
        traceback.print_exc()
        code = 3
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
