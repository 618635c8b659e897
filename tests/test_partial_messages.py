"""A known message found from part of it (engine/logmatch/): its first sentence, a wrapped
line, a tail another release words differently, a parenthesis another release does not print;
and a rule named through the catalogue message its signature quotes."""

from __future__ import annotations

import pytest

from vllm_doctor.engine.logmatch import Catalogue, compile_signature, scan_log

KV = (
    "ValueError: To serve at least one request with the model's max seq len ({*}), ({*}GiB KV "
    "cache is needed, which is larger than the available KV cache memory ({*}GiB).{*}Try "
    "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
    "engine."
)
FREE = (
    "ValueError: Free memory on device{*}({*}/{*}GiB) on startup is less than desired GPU memory "
    "utilization ({*},{*}GiB). Decrease GPU memory utilization or reduce GPU memory used by "
    "other processes."
)
# two messages whose first sentences are the same, and differ in the second
TWINS = (
    "RuntimeError: The engine could not allocate its cache. Lower --max-num-seqs to fit.",
    "RuntimeError: The engine could not allocate its cache. Raise the memory fraction instead.",
)


def hits(log: str, *keys: str):
    catalogue = Catalogue.build(list(keys))
    scan = scan_log(log, catalogue=catalogue)
    return scan, scan.catalogue_hits()


def test_first_sentence_alone_names_the_message():
    # vllm-project/vllm#49064 as the reporter quoted it
    _, found = hits(
        "ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (969).\n",
        "ValueError: max_num_seqs ({*}) exceeds available Mamba cache blocks ({*}). Each decode "
        "sequence requires one Mamba cache block, so CUDA graph capture cannot proceed.",
    )
    assert [h.complete for h in found] == [False]
    assert found[0].shown.endswith("Mamba cache blocks ({*}).")


def test_a_sentence_cut_in_its_middle_is_not_enough():
    _, found = hits(
        "ValueError: Free memory on device cuda:0 (67.92/121.69 GiB) on startup is less than\n",
        FREE,
    )
    assert found == []


def test_wrapped_line_and_missing_tail():
    _, found = hits(
        "ValueError: Free memory on device cuda:0 (67.92/121.69 GiB) on startup is less than\n"
        "desired GPU memory utilization (0.7, 85.18 GiB).\n",
        FREE,
    )
    assert len(found) == 1 and not found[0].complete


def test_a_parenthesis_another_release_does_not_print_is_stepped_over():
    _, found = hits(
        "ValueError: To serve at least one request with the model's max seq len (180000), 3.05 "
        "GiB KV cache is needed, which is larger than the available KV cache memory (2.17 GiB). "
        "Based on the available memory, the estimated maximum model length is 111456.\n",
        KV,
    )
    assert len(found) == 1 and not found[0].complete
    # the whole message with its parenthesis is complete
    _, whole = hits(
        "ValueError: To serve at least one request with the model's max seq len (180000), (3.05 "
        "GiB KV cache is needed, which is larger than the available KV cache memory (2.17 GiB). "
        "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine.\n",
        KV,
    )
    assert [h.complete for h in whole] == [True]


def test_sentences_of_one_part_must_follow_each_other():
    # the second sentence far from the first is not this message in full
    log = (
        "RuntimeError: The engine could not allocate its cache. Something else happened.\n"
        "Lower --max-num-seqs to fit.\n"
    )
    _, found = hits(log, TWINS[0])
    assert [h.complete for h in found] == [False]


def test_twins_seen_in_part_are_both_possible_and_in_full_only_one():
    _, part = hits("RuntimeError: The engine could not allocate its cache.\n", *TWINS)
    assert {h.key for h in part} == set(TWINS)
    _, full = hits(
        "RuntimeError: The engine could not allocate its cache. Raise the memory fraction "
        "instead.\n",
        *TWINS,
    )
    assert [h.key for h in full] == [TWINS[1]]


@pytest.mark.parametrize(
    ("signature", "quotes"),
    [
        # MEM002's signature quotes the message; spaces around the placeholders put back
        (
            r"Free memory on device (?:\S+ )?\(-?[\d.]+/[\d.]+ GiB\) on startup is less than "
            r"desired GPU memory utilization \([\d.]+, [\d.]+ GiB\)",
            True,
        ),
        # a signature about some values of a placeholder only is not about the message
        (
            r"Free memory on device cuda:7 \(-?[\d.]+/[\d.]+ GiB\) on startup is less than "
            r"desired GPU memory utilization",
            False,
        ),
        (r"on startup is less than desired GPU memory utilization \(0\.95", False),
        # a literal the message does not have
        (r"Free memory on device \S+ is exhausted", False),
        # too short to say which message
        (r"Free[\s\S]*memory", False),
    ],
)
def test_which_signature_quotes_a_message(signature, quotes):
    assert compile_signature(signature).quotes(FREE.partition(": ")[2]) is quotes


def test_a_rule_is_named_through_the_message_only_from_the_part_that_shows_its_quote():
    second = compile_signature(r"Lower --max-num-seqs to fit\.")
    first = compile_signature(r"The engine could not allocate its cache\.")
    scan = scan_log(
        "RuntimeError: The engine could not allocate its cache.\n",
        [first, second],
        Catalogue.build([TWINS[0]]),
    )
    assert scan.message_lines([second]) == []
    lines = scan.message_lines([first])
    assert len(lines) == 1 and "[read as: The engine could not allocate" in lines[0]
    # its own signature matched: the line as it is
    assert scan.rule_lines([first]) == ["RuntimeError: The engine could not allocate its cache."]


def test_unless_part_still_holds():
    sig = compile_signature(r"\A(?![\s\S]*kho=off)The engine could not allocate its cache\.")
    log = "RuntimeError: The engine could not allocate its cache.\n"
    scan = scan_log(log, [sig], Catalogue.build([TWINS[0]]))
    assert scan.message_lines([sig])
    scan = scan_log(log + "booted with kho=off\n", [sig], Catalogue.build([TWINS[0]]))
    assert scan.message_lines([sig]) == []
