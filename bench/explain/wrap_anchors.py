"""CPU time of reading one 400 KB crash log (the train split's logs of bench/reports2026,
repeated; the test split's are never read), to compare catalogue builds:
`python bench/explain/wrap_anchors.py`."""

import json
import time
from pathlib import Path

from vllm_doctor.engine.loader import load_rules
from vllm_doctor.engine.logmatch.store import load_catalogue
from vllm_doctor.engine.logreport import analyse_log

CORPUS = Path("bench/reports2026")
train = json.loads((CORPUS / "split.json").read_text())["train"]
logs = "".join(
    path.read_text(errors="replace")
    for path in (CORPUS / "reports" / report / "log.txt" for report in sorted(train))
    if path.exists()
)
text = (logs * 8)[:400_000]
rules = load_rules(None)
load_catalogue()
analyse_log(text[:1000], rules)
start = time.process_time()
for _ in range(3):
    analyse_log(text, rules)
print("cpu s per 400KB log:", round((time.process_time() - start) / 3, 3))
