"""`vllm-doctor fleet`: every node of a multi-node deployment judged alone and against the others.

    vllm-doctor fleet --ray [ADDRESS] [OPTIONS] [-- vllm serve MODEL ...]
    vllm-doctor fleet --facts DIR|FILE|- [--manifest FILE] [OPTIONS] [-- vllm serve MODEL ...]
    vllm-doctor fleet --k8s-job NAMESPACE/WORKLOAD --manifest FILE [--k8s-kind job|daemonset]

Exit codes as `check`: 0 nothing at or above --fail-on, 1 findings at or above it (a node that
did not answer is one), 2 bad input (and `--ray` without Ray installed), 3 a collector crashed on
a node. Ray is imported only for `--ray`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from vllm_doctor.commands import inputs
from vllm_doctor.errors import EXIT_FINDINGS, EXIT_OK, InputError, say
from vllm_doctor.report import FAIL_ON, FORMATS

DEFAULT_DEADLINE_S = 60.0


def run_fleet(
    ray_address: str | None = None,
    facts_from: str | None = None,
    serve_argv: list[str] | None = None,
    manifest: str | None = None,
    fmt: str = "text",
    fail_on: str = "error",
    strict: bool = False,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    deadline_s: float = DEFAULT_DEADLINE_S,
    doctor_from: str = "upload",
    head: str | None = None,
    verbose: bool = False,
    output: Path | None = None,
) -> int:
    started = time.perf_counter()
    if fmt not in FORMATS:
        raise InputError("--format", f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    if fail_on not in FAIL_ON:
        raise InputError("--fail-on", f"unknown level {fail_on!r} (one of {', '.join(FAIL_ON)})")
    if (ray_address is None) == (facts_from is None):
        raise InputError("fleet", "give one of --ray [ADDRESS] and --facts DIR|FILE|-")
    if not deadline_s > 0:
        raise InputError("--deadline", "must be a number of seconds above 0")
    if output is not None:
        from vllm_doctor.report.output import check_output_path

        check_output_path(output)
    argv = _serve_argv(serve_argv)
    ruled: dict[str, Any] = {}

    def load() -> None:
        """The rules and the judge, read while the nodes collect (--ray: nothing that needs
        no answer delays the tasks' submission) or before the documents are read."""
        if not ruled:
            from vllm_doctor.engine.loader import default_rules_dir, load_rules, select_rules
            from vllm_doctor.fleet.judge import NodeJudge, split_rules

            ruled["loaded"] = load_rules([default_rules_dir()])
            ruled["rules"] = select_rules(ruled["loaded"], select, ignore)
            node_rules = split_rules(ruled["rules"])[0]
            ruled["judge"] = NodeJudge(node_rules, ruled["loaded"], fail_on, strict)
            import vllm_doctor.fleet.report  # noqa: F401  (read now, used last)

    timings: dict[str, float] = {}
    run = None
    if ray_address is not None:
        from vllm_doctor.fleet.ray_engine import collect_over_ray

        def judge_early(node: Any, nodes: list[Any]) -> None:
            if manifest is None:  # a manifest's declared facts arrive after every answer
                ruled["judge"].speculate(node, nodes, head)

        run = collect_over_ray(
            ray_address or None,
            argv,
            deadline_s,
            doctor_from,
            meanwhile=load,
            on_answer=judge_early,
        )
        nodes, how = run.nodes, f"Ray cluster at {run.address}; the doctor ran there from {run.how}"
        timings.update(connect_s=run.connect_s, collect_s=run.collect_s)
    else:
        from vllm_doctor.fleet.documents import read_documents

        assert facts_from is not None
        nodes = read_documents(facts_from)
        how = f"facts documents from {'standard input' if facts_from == '-' else facts_from}"
        if argv:
            _with_line(nodes, argv)
    try:
        notes: list[str] = []
        if manifest:
            from vllm_doctor.fleet.declared import compare_with_manifest

            notes, declared_words = compare_with_manifest(manifest, nodes)
            if argv is None and declared_words:
                argv = declared_words
                if facts_from is not None:
                    _with_line(nodes, argv)
        from vllm_doctor.fleet.judge import judge_fleet

        load()
        judged = time.perf_counter()
        result = judge_fleet(
            nodes, argv, ruled["rules"], ruled["loaded"], fail_on, strict, head, how, ruled["judge"]
        )
        result.judged = ruled["judge"].judged
        result.fleet.notes.extend(notes)
        timings["judge_s"] = time.perf_counter() - judged
        timings["total_s"] = time.perf_counter() - started
        result.timings = timings
        for doc in result.docs:
            doc.duration_s = timings["total_s"]
        from vllm_doctor.fleet.report import render, summary_lines
        from vllm_doctor.report.output import write_report

        write_report(render(result, fmt, verbose, to_file=output is not None), output)
        crashes = result.crashes()
        if crashes:
            more = f" (and {len(crashes) - 1} more)" if len(crashes) > 1 else ""
            say(f"could not finish: on node {crashes[0]}{more}: the fleet's report is incomplete")
            from vllm_doctor.errors import EXIT_INTERNAL

            return EXIT_INTERNAL
        for line in summary_lines(result):
            say(line)
        return EXIT_FINDINGS if result.failing() else EXIT_OK
    finally:
        if run is not None:
            run.disconnected()  # the driver left Ray while the nodes were judged


def _serve_argv(tokens: list[str] | None) -> list[str] | None:
    if not tokens:
        return None
    if tokens[0].startswith("-"):
        raise InputError(
            "fleet",
            f"unknown option {tokens[0]}; the serve line goes last: "
            "vllm-doctor fleet [OPTIONS] -- vllm serve MODEL ...",
        )
    from vllm_doctor.serveline.parser import parse_serve_argv

    parse_serve_argv(list(tokens))  # a bad line is bad input before any node is asked
    return list(tokens)


def _with_line(nodes: list, argv: list[str]) -> None:
    """Documents collected without this serve line are judged with it."""
    from vllm_doctor.facts.collect import with_serve_line

    for node in nodes:
        if node.facts is not None:
            node.facts = with_serve_line(node.facts, argv)


def _fleet_command_class() -> type:
    from typer.core import TyperCommand

    class FleetCommand(TyperCommand):
        def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
            return super().parse_args(ctx, inputs.ray_address_optional(args))

    return FleetCommand


def register(app: typer.Typer) -> None:
    @app.command(
        "fleet",
        cls=_fleet_command_class(),
        context_settings={"allow_extra_args": True, "ignore_unknown_options": False},
    )
    def fleet_cmd(
        ctx: typer.Context,
        ray: str | None = typer.Option(
            None,
            "--ray",
            flag_value="",
            help="Check every node of a running Ray cluster: its address, or none for "
            "RAY_ADDRESS, else `auto`.",
        ),
        facts_from: str | None = typer.Option(
            None,
            "--facts",
            help="Judge the `vllm-doctor facts --format json` documents of the nodes: a folder "
            "(one per file), a file or - (several, as `kubectl logs --prefix` prints them).",
        ),
        k8s_job: str | None = typer.Option(
            None,
            "--k8s-job",
            help="Print a Kubernetes Job (or --k8s-kind daemonset) that runs `vllm-doctor facts "
            "--format json` once on every pod/node of NAMESPACE/WORKLOAD (read from --manifest).",
        ),
        k8s_kind: str = typer.Option("job", "--k8s-kind", help="job (default) or daemonset."),
        image: str | None = typer.Option(
            None,
            "--image",
            help="With --k8s-job: the image the Job runs (default: the workload's own, which "
            "must hold the doctor: this repository's Dockerfile builds it).",
        ),
        manifest: str | None = inputs.MANIFEST,
        deadline: float = typer.Option(
            DEFAULT_DEADLINE_S,
            "--deadline",
            help="Seconds the nodes have to answer (--ray); a node that does not is a finding.",
        ),
        doctor_from: str = typer.Option(
            "upload",
            "--doctor-from",
            help="How the doctor reaches the Ray nodes: upload (Ray's runtime environment "
            "ships it) or installed (the nodes' own install).",
        ),
        head: str | None = typer.Option(
            None,
            "--head",
            help="The node where `vllm serve` runs (node id, IP, host or document name); "
            "default the Ray head, or the first document.",
        ),
        fmt: str = typer.Option("text", "--format", "-f", help=f"{', '.join(FORMATS)}."),
        fail_on: str = typer.Option("error", "--fail-on", help="error, warning, info, never."),
        strict: bool = typer.Option(False, "--strict", help="Undecided rules fail the run too."),
        select: list[str] | None = typer.Option(
            None, "--select", help="Only these prefixes.", autocompletion=inputs.complete_rule_codes
        ),
        ignore: list[str] | None = typer.Option(
            None, "--ignore", help="Skip these prefixes.", autocompletion=inputs.complete_rule_codes
        ),
        verbose: bool = inputs.VERBOSE,
        output: Path | None = typer.Option(None, "--output", "-o", help="Write the report here."),
    ) -> None:
        """Check every node of a Ray cluster or a Kubernetes workload, alone and against each other.

        The serve line goes last, after `--`: vllm-doctor fleet --ray -- vllm serve MODEL -tp 16
        """
        tokens = list(ctx.args)
        if k8s_job is not None:
            from vllm_doctor.fleet.k8s import print_manifest

            if tokens:
                raise InputError("--k8s-job", "takes the serve line from the workload's manifest")
            raise typer.Exit(print_manifest(k8s_job, manifest, k8s_kind, image, output))
        raise typer.Exit(
            run_fleet(
                ray_address=ray,
                facts_from=facts_from,
                serve_argv=tokens,
                manifest=manifest,
                fmt=fmt,
                fail_on=fail_on,
                strict=strict,
                select=inputs.split_commas(select),
                ignore=inputs.split_commas(ignore),
                deadline_s=deadline,
                doctor_from=doctor_from,
                head=head,
                verbose=verbose,
                output=output,
            )
        )
