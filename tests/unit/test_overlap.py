"""The data check (hardex.overlap): duplicates, the same problem in other words, near-duplicates, its file."""

from __future__ import annotations

import json
import re
import runpy
from types import SimpleNamespace

import polars as pl
import pytest

from hardex.overlap import NGRAM, OverlapError, check_task, normalized, numbers_signature, overlap
from hardex.report.loading import load_overlaps
from hardex.tasks import get_task
from tests.support import ROOT

ADDITION = get_task("addition").problem_key


def frame(*questions):
    return pl.DataFrame({"question": list(questions)})


def reversed_sum(question):
    return re.sub(r"(\d+) \+ (\d+)", r"\2 + \1", question)


def test_a_reversed_operand_twin_is_the_same_problem_for_the_family_and_a_near_duplicate_for_any_text():
    pool = frame("What is 3 + 4?", "What is 12 + 5?", "What is 6 + 6?")
    test = frame("What is 4 + 3?", "What is 3 * 4?", "What is 5 + 12?", "What is 7 + 7?")
    keyed = overlap(pool, test, key=ADDITION, pool_key=ADDITION)
    assert (keyed["exact"], keyed["same_problem"], keyed["overlap"], keyed["near_duplicates"]) == (0, 2, 2, 0)
    assert keyed["examples"] == ["What is 4 + 3?", "What is 5 + 12?"]
    plain = overlap(pool, test)  # no family: the numbers and the operator still tell 4 + 3 from 3 * 4
    assert (plain["overlap"], plain["same_numbers"], plain["near_duplicates"]) == (0, 2, 2)
    assert plain["near_examples"][0] == {"question": "What is 4 + 3?", "pool_question": "What is 3 + 4?",
                                         "kind": "same_numbers"}
    assert numbers_signature("Add 4 to 3.") == numbers_signature("What is 3 + 4?") != numbers_signature("3 * 4")
    assert numbers_signature("Start with 5. Double it.") is None  # one number says too little
    assert overlap(frame("What is 3 + 4?"), frame("What is 3 * 4?", "what is 3+4"))["normalized"] == 1  # operators kept
    # a minus sign before a bracket or after one is a sign, not punctuation: basic_arithmetic's '-( 3 - 0 )'
    # (-3) was once read as the pool's '3 - 0', '4 - (-8)' as '4 - 8'; brackets alone do not make another problem
    signs = overlap(frame("Calculate 3 - 0.", "Calculate 4 - 8.", "Calculate 4 - -8."),
                    frame("Calculate -( 3 - 0 ).", "Calculate 4 - (-8).", "Calculate ( 4 - -8 ).", "A well-known sum"))
    assert (signs["normalized"], signs["examples"]) == (2, ["Calculate 4 - (-8).", "Calculate ( 4 - -8 )."])
    assert normalized("A well-known e-mail") == "a well known e mail"  # a hyphen joining letters is not a minus


def test_a_reversed_twin_across_real_addition_splits_stops_the_task_and_the_new_splits_have_none():
    task = get_task("addition")
    spec = {"n": 100, "seed": 1, "difficulty": [1, 2]}  # experiments/real_model_cpu.yaml's splits
    pool = task.load_split({"name": "pool", **spec})
    test = task.load_split({"name": "test", **spec, "n": 80, "seed": 2})
    keys = {"addition/pool": ADDITION, "addition/test": ADDITION, "addition/twins": ADDITION}
    clean = check_task("addition", "addition/pool", pool, {"addition/test": test}, 0, keys, allowed_near=0)
    assert {k: clean["benchmarks"]["addition/test"][k] for k in ("overlap", "near_duplicates")} == {
        "overlap": 0, "near_duplicates": 0}
    twins = frame(*(reversed_sum(q) for q in pool["question"][:5]))  # a test set holding reversed pool sums
    assert set(twins["question"]).isdisjoint(pool["question"])
    with pytest.raises(OverlapError, match=r"addition/twins: 5 of 5, 0 exact, 0 after normalizing, 5 the same "
                                           r"problem in other words.*tasks.addition.allow_overlap: 5"):
        check_task("addition", "addition/pool", pool, {"addition/test": test, "addition/twins": twins}, 0, keys)


def test_a_shared_8_word_run_is_a_near_duplicate_and_template_wording_is_not():
    run = "the farmer sold every one of his brown eggs at"  # 10 words: 3 runs of 8
    pool = frame(f"Yesterday {run} the market. How much did he earn?", "Nothing like it here.",
                 *(f"Story {i}: at the start of the game they are each holding a ball." for i in range(5)))
    test = frame(f"On Sunday {run} noon; how many were left?",  # another wording, no numbers at all
                 "On Sunday the farmer sold every one of his hens.",  # 7 words in common
                 "New story: at the start of the game they are each holding a ball.")  # the pool's template
    found = overlap(pool, test)
    assert (found["overlap"], found["shared_ngram"], found["near_duplicates"]) == (0, 1, 1)
    assert found["near_examples"][0]["kind"] == "shared_ngram" and NGRAM == 8
    with pytest.raises(OverlapError, match=r"1 questions of its benchmarks are near-duplicates.*1 sharing a 8-word "
                                           r"run.*tasks.t.allow_near_duplicates: 1"):
        check_task("t", "d/pool", pool, {"d/test": test}, 0, allowed_near=0)
    assert check_task("t", "d/pool", pool, {"d/test": test}, 0)["allowed_near"] is None  # null: reported only


def test_generated_splits_are_judged_by_their_canonical_form_alone():
    """Arith's template shares numbers and 8-word runs across different problems: its form decides."""
    task = get_task("arith")
    spec = {"n": 300, "seed": 1, "difficulty": [1, 8]}
    pool, test = task.load_split({"name": "pool", **spec}), task.load_split({"name": "test", **spec, "seed": 2})
    key = task.problem_key
    found = overlap(pool, test, key=key, pool_key=key)
    assert (found["overlap"], found["near_duplicates"]) == (0, 0)
    assert overlap(pool, test)["near_duplicates"] > 0  # the text heuristics alone would call many of them twins


def test_the_file_the_check_writes(tmp_path):
    """scripts/check_overlap.py as the rule runs it (no Snakemake): the families' forms, the JSON, the table."""
    pool, test = tmp_path / "pool.parquet", tmp_path / "test.parquet"
    frame("What is 3 + 4?", "What is 1 + 1?").write_parquet(pool)
    frame("What is 4 + 3?", "What is 1 + 1?", "What is 2 + 9?").write_parquet(test)
    out = tmp_path / "results/overlap/addition.json"
    snakemake = SimpleNamespace(
        input=SimpleNamespace(pool=str(pool), benchmarks=[str(test)]), output=[str(out)], log=[],
        wildcards=SimpleNamespace(task="addition"),
        params=SimpleNamespace(pool="addition/pool", benchmarks=["addition/test"], allowed=2, allowed_near=None,
                               families={"addition/pool": "addition", "addition/test": "addition"}))
    runpy.run_path(str(ROOT / "scripts/check_overlap.py"), init_globals={"snakemake": snakemake})
    report = json.loads(out.read_text())
    assert report == {"task": "addition", "pool": "addition/pool", "allowed": 2, "allowed_near": None, "ngram": 8,
                      "benchmarks": {"addition/test": {
                          "n_pool": 2, "n_benchmark": 3, "exact": 1, "normalized": 0, "same_problem": 1,
                          "same_numbers": 0, "shared_ngram": 0, "overlap": 2, "near_duplicates": 0,
                          "examples": ["What is 4 + 3?", "What is 1 + 1?"], "near_examples": []}}}
    table = load_overlaps([out])
    assert table.select("exact", "normalized", "same_problem", "allowed", "near_duplicates", "allowed_near").row(0) == (
        1, 0, 1, 2, 0, None)
