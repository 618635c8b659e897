"""The rule base's version names the rule files in force: it changes when a file's bytes do,
also in a process that has judged before (the answer is kept between judgements)."""

from __future__ import annotations

import os
from types import SimpleNamespace

from vllm_doctor.commands.check import rulebase_version


def test_an_edited_rule_file_changes_the_version_in_the_same_process(tmp_path):
    files = {code: tmp_path / f"{code}.yaml" for code in ("AAA001", "BBB002")}
    for code, path in files.items():
        path.write_text(f"code: {code}\nsummary: one\n")
    rules = [SimpleNamespace(code=c, path=p, summary="one") for c, p in files.items()]
    first = rulebase_version(rules)
    assert rulebase_version(list(reversed(rules))) == first  # the order given does not matter
    stat = files["BBB002"].stat()
    files["BBB002"].write_text("code: BBB002\nsummary: two\n")  # same size, new bytes
    os.utime(files["BBB002"], ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same modification time
    second = rulebase_version(rules)
    assert second != first
    files["BBB002"].unlink()  # unreadable: its summary stands for it
    third = rulebase_version(rules)
    assert third not in (first, second)
    assert third == rulebase_version(rules)
