#!/usr/bin/env python3
"""Judge the calibration corpus (tests/fixtures/calibration/corpus.json) with each model's
real config.json served by the local stand-in of the Hugging Face Hub (tests/hub_server.py),
as tests/test_calibration.py does, and print the error findings by command and by rule.

    python tools/calibration_errors.py            # the doctor on this checkout
    PYTHONPATH=/tmp/other RULES_DIR=/tmp/other/rules python tools/calibration_errors.py

A checkout whose CollectOptions has no ``hub`` field (before it was added) is made to ask the
stand-in the same way: collect_model is called with the cache and the Hub allowed.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def main() -> int:
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(FIXTURES))  # hub_server imports local_http from there, as conftest does
    from hub_server import FakeHub, Repo

    from vllm_doctor.commands.check import judge
    from vllm_doctor.engine.loader import default_rules_dir, load_rules
    from vllm_doctor.errors import InputError
    from vllm_doctor.facts import collect, model_config
    from vllm_doctor.facts.collect import CollectOptions
    from vllm_doctor.facts.hardware import TargetHardware

    fields = CollectOptions.__dataclass_fields__
    if "hub" not in fields:  # an older checkout: force the Hub on for the model config
        original = model_config.collect_model

        def with_hub(*args, **kwargs):
            kwargs.update(use_hf_cache=True, hub=True)
            return original(*args, **kwargs)

        model_config.collect_model = with_hub
        collect.collect_model = with_hub  # in case it was imported by name
    entries = json.loads((FIXTURES / "calibration" / "corpus.json").read_text())["entries"]
    configs = json.loads((FIXTURES / "calibration" / "configs" / "sources.json").read_text())
    repos = {
        model: Repo({name: (FIXTURES / f["file"]).read_bytes() for name, f in files.items()})
        for model, files in configs["models"].items()
    }
    # RULES_DIR: another checkout's rules/ (an editable install maps vllm_doctor.rules to its own)
    rules = load_rules([Path(os.environ.get("RULES_DIR") or default_rules_dir())])
    failures: list[str] = []
    by_rule: Counter[str] = Counter()
    judged = with_config = 0
    with FakeHub(repos) as server, tempfile.TemporaryDirectory() as cache:
        env = {"HF_ENDPOINT": server.url, "HF_HUB_CACHE": cache, "HF_HUB_DISABLE_TELEMETRY": "1"}
        for entry in entries:
            if entry.get("exclude") or entry.get("left_out"):
                continue
            hardware = entry.get("hardware") or {}
            options = CollectOptions(
                serve_tokens=shlex.split(entry["command"]),
                vllm_version=entry["release"],
                probe_machine=False,
                target=(
                    TargetHardware(gpu=hardware.get("gpu"), count=hardware.get("gpus"))
                    if hardware
                    else None
                ),
                environ=env,
                **({"hub": True} if "hub" in fields else {}),
            )
            try:
                doc = judge(options, rules)
            except InputError as err:
                failures.append(f"{entry['release']}: {entry['command']}: bad input: {err}")
                by_rule["exit 2"] += 1
                continue
            judged += 1
            # the stand-in Hub served this model's config.json (the facts name the file read)
            with_config += bool(doc.facts.value("model.config_path"))
            codes = [f.rule.code for f in doc.applies if f.rule.severity == "error"]
            if codes:
                by_rule.update(codes)
                failures.append(f"{entry['release']}: {entry['command']}: {', '.join(codes)}")
    print("\n".join(failures))
    print(
        f"{len(failures)} commands draw errors ({dict(by_rule)}); "
        f"{len(configs['models'])} models served with a real config; "
        f"{with_config} of {judged} commands judged with a real config.json"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
