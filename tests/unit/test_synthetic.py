"""Synthetic task families: seeded, difficulty knob, disjoint splits, exact BIG-Bench Hard rendering."""

from __future__ import annotations

import re

import pytest

from hardex.tasks import DataError, get_task


def split(family, name, **kw):
    spec = {"name": name, "n": 60, "seed": 1, "difficulty": [1, 4], **kw}
    return get_task(family).load_split(spec)


@pytest.mark.parametrize("family", ["arith", "swaps", "addition"])
def test_seeded_and_deterministic(family):
    assert split(family, "pool").equals(split(family, "pool"))
    assert not split(family, "pool").equals(split(family, "pool", seed=2))


@pytest.mark.parametrize("family", ["arith", "swaps", "addition"])
def test_splits_are_disjoint_whatever_the_seeds(family):
    pool = set(split(family, "pool", difficulty=[1, 1], n=15)["question"])
    test = set(split(family, "test", difficulty=[1, 1], n=15)["question"])
    sft = set(split(family, "sft", difficulty=[1, 1], n=15)["question"])
    assert not pool & test and not pool & sft and not test & sft


@pytest.mark.parametrize("family", ["arith", "swaps", "addition"])
def test_worked_solutions_are_correct_and_tiers_follow_difficulty(family):
    task = get_task(family)
    df = split(family, "sft", difficulty=[2, 5])
    assert set(df["tier"]) <= {2, 3, 4, 5}
    for r in df.iter_rows(named=True):
        assert task.is_correct(r["solution"], r["answer"], task.prompt(r))
        assert not task.is_correct(r["solution"].replace(r["answer"], "(Z)" if family == "swaps" else "999"),
                                   r["answer"], task.prompt(r))


def test_arith_difficulty_is_the_number_of_operations():
    for r in split("arith", "pool", difficulty=[3, 3]).iter_rows(named=True):
        assert len(re.findall(r"Add|Subtract|Double", r["question"])) == 3


def test_addition_tier_is_the_digits_of_each_operand():
    for r in split("addition", "pool", difficulty=[1, 3]).iter_rows(named=True):
        a, b = (int(x) for x in re.fullmatch(r"What is (\d+) \+ (\d+)\?", r["question"]).groups())
        assert len(str(a)) == len(str(b)) == r["tier"] and int(r["answer"]) == a + b


def test_swaps_bbh_style_is_big_bench_wording():
    df = split("swaps", "pool", difficulty=[5, 5], people=[5, 5], style="bbh")
    q = df["question"][0]
    assert q.startswith("Alice, Bob, Claire, Dave, and Eve are playing a game. At the start of the game, "
                        "they are each holding a ball: Alice has a ")
    assert "\nAs the game progresses, pairs of players trade balls. First, " in q
    assert q.count(" swap balls.") == 5 and "Finally, " in q
    assert re.search(r"\nOptions:\n\(A\) \w+ ball\n\(B\)", q)
    assert re.fullmatch(r"\([A-E]\)", df["answer"][0])


def test_too_many_items_for_a_small_space_is_a_clear_error():
    with pytest.raises(DataError, match="distinct items"):
        get_task("swaps").load_split({"name": "test", "n": 500, "seed": 1, "difficulty": [0, 0], "people": [3, 3]})
