"""tools/differential: the serve lines it puts to vLLM and the doctor, and how a rerun keeps the
answers of lines already asked (no vLLM here: the sides are stand-in scripts)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent / "tools" / "differential"
sys.path.insert(0, str(TOOLS))

import cases  # noqa: E402
import run  # noqa: E402

# a side that answers "accept" for every line it is given, after a header naming itself
STAND_IN = """
import json, sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
rows = [json.loads(line) for line in open(args["--cases"])]
with open(args["--out"], "w") as out:
    out.write(json.dumps({"vllm": "9.9.9"}) + "\\n")
    for row in rows:
        out.write(json.dumps({"id": row["id"], "parse": "accept", "argv0": row["argv"][0]}) + "\\n")
"""


def test_every_json_option_of_a_line_gets_its_own_dotted_form():
    argv = [
        "m",
        "--speculative-config",
        '{"method": "mtp"}',
        "--compilation-config",
        '{"mode": 3}',
    ]
    forms = dict(cases._forms(argv))
    assert forms["dotted:speculative-config"][-2:] == ["--speculative-config.method", '"mtp"']
    assert forms["dotted:compilation-config"][-2:] == ["-cc.mode", "3"]


def test_case_ids_are_unique():
    built = cases.build()
    assert len({c["id"] for c in built}) == len(built)


def test_a_rerun_asks_only_the_new_lines(tmp_path):
    side = tmp_path / "side.py"
    side.write_text(STAND_IN)
    command = [sys.executable, str(side)]
    first = [
        {"id": "a", "argv": ["one"], "config": True},
        {"id": "b", "argv": ["two"], "config": True},
    ]
    target = tmp_path / "vllm.jsonl"
    header, ran = run._side(command, first, target, {}, check=True)
    assert (header, ran) == ({"vllm": "9.9.9"}, 2)

    # "b" is renamed "b2" with the same words; "c" is new; "a" asks for another stage now
    second = [
        {"id": "a", "argv": ["one"], "config": False},
        {"id": "b2", "argv": ["two"], "config": True},
        {"id": "c", "argv": ["three"], "config": True},
    ]
    target.write_text(target.read_text().replace('"argv0": "two"', '"argv0": "kept"'))
    _, earlier = run._earlier(first, target)
    _, ran = run._side(command, second, target, earlier, check=True)
    assert ran == 2
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    assert rows[0] == {"vllm": "9.9.9"}
    assert [(r["id"], r["argv0"]) for r in rows[1:]] == [
        ("a", "one"),
        ("b2", "kept"),
        ("c", "three"),
    ]

    # nothing new: nothing runs, and the file keeps the header of the run that answered
    header, earlier = run._earlier(second, target)
    assert run._side(command, second, target, earlier, header, check=True) == (header, 0)
    assert json.loads(target.read_text().splitlines()[0]) == {"vllm": "9.9.9"}


def test_an_earlier_file_out_of_step_with_its_cases_is_not_reused(tmp_path):
    target = tmp_path / "vllm.jsonl"
    target.write_text(json.dumps({"id": "x", "parse": "accept"}) + "\n")
    assert run._earlier([{"id": "y", "argv": ["m"]}], target) == ({}, {})
