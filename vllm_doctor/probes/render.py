"""Text and JSON output of probe results, and the live progress view. No torch."""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

from vllm_doctor.probes.registry import BY_NAME, HARDWARE
from vllm_doctor.probes.result import ERROR, FAIL, PASS, SKIP, TIMEOUT, WARN, ProbeResult
from vllm_doctor.probes.verdict import LEVELS, worst_level

JSON_SCHEMA_VERSION = 1
MARKS = {PASS: "[✓]", WARN: "[!]", FAIL: "[✗]", ERROR: "[✗]", TIMEOUT: "[✗]", SKIP: "[-]"}
STYLES = {
    PASS: "green",
    WARN: "yellow",
    FAIL: "red",
    ERROR: "red",
    TIMEOUT: "red",
    SKIP: "dim",
    "mechanism shown": "yellow",
}
# the joined verdicts' levels (probes.verdict)
LEVEL_MARKS = {"error": "[✗]", "warning": "[!]", "info": "[i]", "pass": "[✓]", "skip": "[-]"}
LEVEL_STYLES = {"error": "red", "warning": "yellow", "info": "cyan", "pass": "green", "skip": "dim"}
LEVEL_WORDS = {
    "error": "error",
    "warning": "warning",
    "info": "info",
    "pass": "pass",
    "skip": "could not run",
}

# The numbers shown under each probe in text output (all of them are in JSON and with -v).
HEADLINE: dict[str, tuple[str, ...]] = {
    "p2p-nccl": (
        "link_class",
        "allreduce_busbw_gbps",
        "allgather_busbw_gbps",
        "expected_min_busbw_gbps",
        "nccl_init_s",
        "teardown_destroy_process_group_s",
    ),
    "tp-softembed": (
        "vocab_size",
        "hidden_size",
        "bug_eager",
        "fix_allgather_rel_err",
        "fix_slice_allreduce_rel_err",
        "fix_allgather_extra_gib_per_rank",
        "allgather_busbw_gbps",
    ),
    "cudagraph-replay": (
        "stable_replays_identical",
        "nccl_graph_replays_identical",
        "stable_replay_s",
        "stable_eager_s",
    ),
    "pp-handoff": (
        "guard",
        "int32_bytes_as_int64_wrong_ids",
        "bfloat16_ids_wrong",
        "fix_cast_int64_exact",
    ),
    "padded-batch": (),
    "fp8-scaled-mm-3d": (
        "compute_capability",
        "narrow_by_output_shape0",
        "narrow_by_tokens_rel_err_vs_dequantised",
        "fp8_tflops_4096",
        "bf16_tflops_4096",
    ),
    "teardown": ("destroy_process_group_s", "max_import_torch_s", "max_dist_init_s"),
}
PART_HEADLINE = {
    "compile": ("error", "cached"),  # a reused result says when and under which torch it was made
    "transient": ("outcome", "after_free", "after_reuse", "replay_error", "capture_error"),
}


def mark_and_style(result: ProbeResult) -> tuple[str, str]:
    """The mark and colour of a result: its worst joined verdict's; without verdicts, a shown
    mechanism is a warning even when every check passed, never a green tick."""
    if result.verdicts:
        level = worst_level([v["level"] for v in result.verdicts])
        return LEVEL_MARKS[level], LEVEL_STYLES[level]
    if result.reproduced and result.status in (PASS, WARN):
        return MARKS[WARN], STYLES[WARN]
    return MARKS.get(result.status, "[?]"), STYLES.get(result.status, "")


def cpu_variant(results: list[ProbeResult]) -> dict[str, Any]:
    """What a CPU run does not test: the probes that need a GPU, and what replaces the GPU part
    of the others (from the registry's checks)."""
    specs = [BY_NAME[r.name] for r in results if r.name in BY_NAME and not BY_NAME[r.name].hidden]
    return {
        "gloo": True,
        "not_run": [s.name for s in specs if s.needs_cuda],
        "replaced": {
            s.name: [f"{c.what}: {c.cpu}" for c in s.checks if c.depends == HARDWARE and c.cpu]
            for s in specs
            if not s.needs_cuda and any(c.depends == HARDWARE and c.cpu for c in s.checks)
        },
    }


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) < 1e-3 or abs(value) >= 1e5:
            return f"{value:.3g}"
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_fmt(v)}" for k, v in value.items())
    return str(value)


def summary_counts(results: list[ProbeResult]) -> dict[str, int]:
    counts = dict.fromkeys((PASS, WARN, FAIL, ERROR, TIMEOUT, SKIP), 0)
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    return counts


def verdict_counts(results: list[ProbeResult]) -> dict[str, int]:
    """Joined verdicts per level (one per rule a probe covers)."""
    counts = dict.fromkeys(LEVELS, 0)
    for r in results:
        for v in r.verdicts:
            counts[v["level"]] = counts.get(v["level"], 0) + 1
    return counts


def to_json(results: list[ProbeResult], meta: dict[str, Any]) -> str:
    out = []
    for r in results:
        data = r.to_dict()
        spec = BY_NAME.get(r.name)
        if spec is not None and spec.checks:
            data["checks"] = [
                {"what": c.what, "depends_on": c.depends, "on_cpu": c.cpu} for c in spec.checks
            ]
        out.append(data)
    return json.dumps(
        {
            "schema_version": JSON_SCHEMA_VERSION,
            **meta,
            "summary": summary_counts(results),
            "verdicts": verdict_counts(results),
            "results": out,
        },
        indent=2,
        default=str,
    )


def _head(meta: dict[str, Any]) -> list[str]:
    head = f"vllm-doctor probe: {meta.get('tp')} rank(s) on {meta.get('device')}"
    if meta.get("gpu"):
        head += f" ({meta['gpu']})"
    if meta.get("model"):
        head += f", model sizes {meta['model']}"
    lines = [head]
    ray = meta.get("ray")
    if isinstance(ray, dict):  # probe --ray: where vLLM's placement put each rank
        lines.append(
            f"Ray cluster at {ray.get('address')}; ranks placed as vLLM's Ray executor places its workers:"
        )
        for node in ray.get("placement") or []:
            gpus = f", GPUs {node['gpus']}" if node.get("gpus") else ""
            ranks = ", ".join(map(str, node.get("ranks") or []))
            lines.append(f"  node {node.get('node')} ({node.get('host')}): ranks {ranks}{gpus}")
        if ray.get("master"):
            lines.append(f"  the ranks meet at rank 0's node, {ray['master']}")
        lines.extend(f"  note: {note}" for note in ray.get("notes") or [])
    judged = meta.get("vllm")
    if isinstance(judged, dict):
        lines.append(f"judged against: {judged.get('said')}")
    cpu = meta.get("cpu_variant")
    if isinstance(cpu, dict):
        line = (
            f"CPU variant ({cpu.get('why')}): the probes run on the CPU over gloo with small shapes"
        )
        if cpu.get("not_run"):
            line += f"; not run: {', '.join(cpu['not_run'])} (they need a CUDA GPU)"
        lines.append(line)
        if cpu.get("replaced"):
            lines.append(
                "  the GPU parts of the others are replaced (each probe's 'measured' lines "
                "say by what); their hardware findings do not speak for a GPU"
            )
    return lines


def render_text(
    results: list[ProbeResult],
    meta: dict[str, Any],
    verbose: bool = False,
    file: TextIO | None = None,
) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = Console(file=file or sys.stdout, highlight=False, soft_wrap=True)
    for line in _head(meta):
        console.print(escape(line))
    for r in results:
        mark, style = mark_and_style(r)
        spec = BY_NAME.get(r.name)
        title = spec.title if spec is not None else "worker process-group teardown"
        figures = r.figures()
        said = r.verdict() if (r.reproduced or figures) and not r.verdicts else r.status
        console.print(
            f"[{style}]{escape(mark)} {r.name}[/{style}] ({r.duration_s:.2f}s) — {escape(title)}"
        )
        for v in r.verdicts:
            lv = v["level"]
            word = f" {lv}" if lv != "skip" else ""  # a skip's text says "could not run"
            console.print(
                f"      [{LEVEL_STYLES[lv]}]{escape(LEVEL_MARKS[lv])} {v['rule']}{word}: "
                f"{escape(v['text'])}[/{LEVEL_STYLES[lv]}]"
            )
            if v.get("workaround"):
                console.print(f"          {escape(v['workaround'])}")
            if verbose and v.get("release"):
                console.print(f"          release: {escape(v['release'])}")
        if r.status != SKIP or not r.verdicts:
            console.print(
                f"      probe {escape(said)}" + (f": {escape(r.reason)}" if r.reason else "")
            )
        for f in figures:  # a measuring probe: each figure with what it measured
            amount = ""
            if isinstance(f.get("bytes"), int):  # under a GiB in MiB, where small terms read well
                size = f["bytes"] / 2**30
                amount = f" {size:.3g} GiB" if abs(size) >= 1 else f" {f['bytes'] / 2**20:.4g} MiB"
            whose = f" (rank {f['rank']})" if "rank" in f else ""
            tag = escape(f"[{f.get('depends')}]")
            console.print(
                f"      {tag} {escape(str(f['name']))}{whose}:{amount} — "
                f"{escape(str(f.get('what', '')))}"
            )
        if spec is not None and r.status != SKIP and not figures:
            for c in spec.checks:
                where = c.depends
                if meta.get("device") == "cpu" and c.cpu:
                    where += f"; on the CPU: {c.cpu}"
                console.print(f"      measured {escape(f'[{where}]')}: {escape(c.what)}")
        rules = []
        if r.rules_confirmed:
            rules.append("mechanism present: " + ", ".join(r.rules_confirmed))
        if r.rules_refuted:
            rules.append("mechanism absent: " + ", ".join(r.rules_refuted))
        if rules and not r.verdicts:
            console.print(f"      rules: {'; '.join(rules)}")
        keys = (
            list(r.metrics) if verbose else [k for k in HEADLINE.get(r.name, ()) if k in r.metrics]
        )
        for key in keys:
            value = r.metrics[key]
            if isinstance(value, dict) and "figures" in value:  # shown above, figure by figure
                value = {k: v for k, v in value.items() if k != "figures"}
            if (
                key in PART_HEADLINE
                or key == "figures"
                or (isinstance(value, (list, dict)) and not verbose and key != "guard")
            ):
                continue
            console.print(f"      {escape(key)}: {escape(_fmt(value))}")
        for part, pkeys in PART_HEADLINE.items():
            pm = r.metrics.get(part)
            if isinstance(pm, dict):
                shown = [(k, pm[k]) for k in (list(pm) if verbose else pkeys) if k in pm]
                console.print(f"      {part} (isolated child): {escape(str(pm.get('status')))}")
                for k, v in shown:
                    console.print(f"        {escape(k)}: {escape(_fmt(v))}")
        if r.name == "padded-batch" and not verbose:
            for case in r.metrics.get("block_table", [])[:1]:
                console.print(f"      block table unsliced: {escape(str(case.get('unsliced')))}")
                console.print(f"      kernel: {escape(str(case.get('kernel')))}")
            idx = r.metrics.get("indexer") or {}
            if idx:
                console.print(
                    f"      indexer write-back by padded count: {escape(str(idx.get('writeback_padded')))}"
                )
        if verbose or len({x.get("status") for x in r.ranks}) > 1:
            for rank in r.ranks:
                if "rank" in rank:
                    console.print(
                        f"      rank {rank['rank']}: {rank.get('status')} "
                        f"{escape(str(rank.get('reason', ''))[:200])}"
                    )
        for note in r.notes:
            console.print(f"      note: {escape(note)}")
        if r.log_tail and (verbose or r.status in (ERROR, TIMEOUT, FAIL)):
            console.print("      last lines:")
            for line in r.log_tail[-12:]:
                console.print(f"        {escape(line)}")
    counts = verdict_counts(results)
    parts = [f"{counts[lv]} {LEVEL_WORDS[lv]}" for lv in LEVELS if counts[lv]]
    errors = [v["rule"] for r in results for v in r.verdicts if v["level"] == "error"]
    if errors:
        parts[0] += f" ({', '.join(errors)})"
    probes = summary_counts(results)
    ran = ", ".join(f"{n} {s}" for s, n in probes.items() if n)
    console.print(
        f"Summary: {', '.join(parts) or 'no rule verdict'} (one verdict per rule); "
        f"probes: {ran or 'none ran'}; {meta.get('elapsed_s', 0):.1f}s"
    )


class Progress:
    """Live view on a terminal (rich), plain lines otherwise; fed by the runner's on_update."""

    def __init__(self, names: list[str], stream: TextIO | None = None, live: bool | None = None):
        self.stream = stream or sys.stderr
        self.names = list(names)
        self.state: dict[str, dict[str, Any]] = {
            n: {"status": "waiting", "msg": "", "t0": None} for n in names
        }
        self.live_enabled = self.stream.isatty() if live is None else live
        self._live: Any = None  # rich's Live, imported when a terminal shows it
        self.t0 = time.monotonic()

    def __enter__(self) -> Progress:
        if self.live_enabled:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(
                self._table(),
                console=Console(file=self.stream),
                refresh_per_second=8,
                transient=True,
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def timeline(self) -> dict[str, float]:
        """Seconds from the start of the run to each probe's result."""
        return {n: st["finished_at"] for n, st in self.state.items() if "finished_at" in st}

    def _table(self):
        from rich.spinner import Spinner
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None, pad_edge=False, show_header=False)
        now = time.monotonic()
        for name in self.names:
            st = self.state[name]
            status = st["status"]
            if status == "running":
                label: Any = Spinner("dots", text=Text(" running", style="cyan"))
            else:
                label = Text(status, style=STYLES.get(status, "dim"))
            took = st.get("took")
            if took is None and st["t0"] is not None:
                took = now - st["t0"]
            table.add_row(
                name, label, f"{took:.1f}s" if took is not None else "", Text(st["msg"][:90])
            )
        return table

    def update(self, name: str, state: str, info: Any) -> None:
        st = self.state.setdefault(name, {"status": "waiting", "msg": "", "t0": None})
        if name not in self.names:
            self.names.append(name)
        if state == "start":
            st.update(status="running", t0=time.monotonic())
        elif state == "progress":
            st["msg"] = str(info)
        elif state == "result":
            st.update(
                status="mechanism shown"
                if info.reproduced and info.status == PASS
                else info.status,
                msg=info.reason,
                took=info.duration_s,
                finished_at=round(time.monotonic() - self.t0, 3),
            )
            if not self.live_enabled:
                said = info.verdict() if info.reproduced else info.status
                print(
                    f"probe {name}: {said} ({time.monotonic() - self.t0:.1f}s since start)",
                    file=self.stream,
                    flush=True,
                )
        if self._live is not None:
            self._live.update(self._table())
