"""Crash-log matching in linear time: the curated rules' signatures and the error catalogue.

One pass over the log finds every literal the matchers need (``text``); only the text around
those hits is looked at again, in windows of bounded size:

* ``text``: the log cleaned (ANSI colour, carriage returns), its literals located, lines
  quoted, the vLLM version it states;
* ``signature``: a curated signature split at its gaps into RE2 parts, chained in order;
* ``catalogue``: every message vLLM and the packages around it raise, found whole or in part
  (its first sentence, a wrapped line, a tail another release words differently);
* ``store``: the shipped catalogue from its compact build;
* ``scan``: one scan of a log for all of them, and a rule named through the catalogue
  message its signature quotes.
"""

from vllm_doctor.engine.logmatch.catalogue import (
    WILDCARD,
    Catalogue,
    CatalogueHit,
    display,
)
from vllm_doctor.engine.logmatch.scan import MAX_MESSAGE_HITS, LogScan, scan_log
from vllm_doctor.engine.logmatch.signature import (
    PART_WINDOW,
    Signature,
    SignatureError,
    SignaturePlan,
    compile_signature,
    signature_plan,
    signature_problem,
    signature_spans,
)
from vllm_doctor.engine.logmatch.store import load_catalogue
from vllm_doctor.engine.logmatch.text import (
    LARGE_LOG,
    MAX_HITS_PER_LITERAL,
    SMALL_LOG,
    clean,
    line_at,
    prefix_index,
    version_in_log,
)

__all__ = [
    "LARGE_LOG",
    "MAX_HITS_PER_LITERAL",
    "MAX_MESSAGE_HITS",
    "PART_WINDOW",
    "SMALL_LOG",
    "WILDCARD",
    "Catalogue",
    "CatalogueHit",
    "LogScan",
    "Signature",
    "SignatureError",
    "SignaturePlan",
    "clean",
    "compile_signature",
    "display",
    "line_at",
    "load_catalogue",
    "prefix_index",
    "scan_log",
    "signature_plan",
    "signature_problem",
    "signature_spans",
    "version_in_log",
]
