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
def test_splits_are_disjoint_by_problem_whatever_the_seeds(family):
    """Not only the question strings: no problem of one split is in another in other words or order."""
    task = get_task(family)
    keys = {}
    for name in ("pool", "test", "sft"):  # the smallest bucket, test, of one-step items: 55 sums hold 11
        n = min(15, task.capacity({"name": "test", "difficulty": [1, 1]}) // 2)
        df = split(family, name, difficulty=[1, 1], n=n)
        keys[name] = [task.problem_key(q) for q in df["question"]]
        assert None not in keys[name] and len(set(keys[name])) == n  # no problem twice within a split either
    pool, test, sft = (set(k) for k in keys.values())
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
    with pytest.raises(DataError, match="distinct problems"):
        get_task("swaps").load_split({"name": "test", "n": 500, "seed": 1, "difficulty": [0, 0], "people": [3, 3]})


def test_the_canonical_form_of_each_family():
    """One problem in other words or order has one key; another problem, another key (the module docstring)."""
    add, arith, swaps = get_task("addition"), get_task("arith"), get_task("swaps")
    assert add.problem_key("What is 3 + 4?") == add.problem_key("What is 4 + 3?") != add.problem_key("What is 3 + 5?")
    q = "Start with {}. What is the result?".format
    assert arith.problem_key(q("5. Add 3")) == arith.problem_key(q("3. Add 5"))
    assert arith.problem_key(q("5. Add 3. Subtract 2")) == arith.problem_key(q("5. Subtract 2. Add 3"))
    assert arith.problem_key(q("5. Add 3. Double it")) != arith.problem_key(q("5. Double it. Add 3"))  # 16, 13
    assert arith.problem_key(q("5. Add 3. Subtract 2")) != arith.problem_key(q("5. Subtract 3. Add 2"))
    compact = "Alice:red Bob:blue Claire:green. Swaps: Alice-Bob, Claire-Bob. Claire has? (A) red (B) blue (C) green"
    listed_otherwise = "Bob:blue Claire:green Alice:red. Swaps: Bob-Alice, Bob-Claire. Claire has? (A) blue"
    from hardex.tasks.hub_formats import render_bbh

    bbh, _, _ = render_bbh(["Alice", "Bob", "Claire"], ["red present", "blue present", "green present"],
                           [(1, 0), (2, 1)], 2, "present")
    assert swaps.problem_key(compact) == swaps.problem_key(listed_otherwise) == swaps.problem_key(bbh) is not None
    assert swaps.problem_key(compact.replace("Claire has?", "Bob has?")) != swaps.problem_key(compact)
    reordered = compact.replace("Alice-Bob, Claire-Bob", "Claire-Bob, Alice-Bob")
    assert swaps.problem_key(reordered) != swaps.problem_key(compact)
    assert add.problem_key("What is the capital of France?") is None and get_task("gsm8k").problem_key("x") is None


def test_arith_capacity_counts_problems():
    """ARITH_PROBLEMS recounted: the canonical forms make_item's moves reach, level by level (a form's value is
    the same along each of its orders, so extending one order of each form reaches every form)."""
    from hardex.tasks.synthetic import ARITH_PROBLEMS, ArithTask, _arith_form

    level = {_arith_form(v, []): (v, [], v) for v in range(1, 10)}
    for d in range(1, 5):
        level = {_arith_form(start, ops + [m]): (start, ops + [m], value + (m[1] if m[0] != "-" else -m[1])
                                                  if m[0] != "*" else 2 * value)
                 for start, ops, value in level.values() for m in ArithTask.moves(value)}
        assert len(level) == ARITH_PROBLEMS[d]
    assert get_task("addition").distinct_items(1, {}) == 55  # 0..9 in unordered pairs
    assert get_task("swaps").distinct_items(1, {"people": [3, 3]}) == 7 * 6 * 5 * 3 * 3


def test_addition_splits_of_real_model_cpu_hold_no_reversed_twin():
    """experiments/real_model_cpu.yaml's splits: by the question's hash, 10 of its 20 one-digit test sums had
    their reversal in the pool; split by the unordered pair, none has."""
    pool = split("addition", "pool", n=100, difficulty=[1, 2])
    test = split("addition", "test", n=80, seed=2, difficulty=[1, 2])
    reversed_test = {re.sub(r"(\d+) \+ (\d+)", r"\2 + \1", q) for q in test["question"]}
    assert len(set(pool["question"]) | reversed_test) == pool.height + test.height
