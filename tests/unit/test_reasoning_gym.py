"""reasoning-gym's tasks as the reasoning_gym family, on the registry's package (offline, its data in the wheel):
what planning refuses, splits disjoint by problem, the task's own verifier as scorer and reward, tiers from the
curriculum or from named settings, mixed pools, and the package's version in the work's identity."""

from __future__ import annotations

import copy
import json
import time

import pytest
from reasoning_gym.factory import create_dataset  # the test extra installs it (pyproject.toml)

from hardex import job
from hardex.config import ConfigError, check_config
from hardex.controls import run_reward
from hardex.overlap import overlap
from hardex.settings import split_spec
from hardex.tasks import get_task, reasoning_gym as rgt
from hardex.tasks.base import DataError

# five tasks of different kinds: integer sums, arithmetic in words, a number theory fact, a word, a probability
SCORED_TASKS = ("chain_sum", "basic_arithmetic", "gcd", "spell_backward", "decimal_arithmetic", "leg_counting")


def rg_config(smoke_config: dict, dataset: dict, **task) -> dict:
    cfg = copy.deepcopy(smoke_config)
    cfg["datasets"]["rg"] = {"family": "reasoning_gym", **dataset}
    cfg["tasks"] = {"rg": {"pool": "rg/pool", "benchmarks": ["rg/test"], "scoring": "flexible", **task}}
    cfg["selection"].update(online_strategies=[], controls={}, allow_unlearnable=["hard", "easy", "random"])
    return cfg


def refused(cfg: dict) -> str:
    with pytest.raises(ConfigError) as e:
        check_config(cfg)
    return str(e.value)


SPLITS = {"pool": {"n": 30, "seed": 1}, "test": {"n": 10, "seed": 2}}


def test_a_good_config_plans_and_its_splits_carry_the_task_and_the_package_version(smoke_config):
    cfg = check_config(rg_config(smoke_config, {"task": "chain_sum", "config": {"max_terms": 3}, "splits": SPLITS}))
    spec = split_spec(cfg, "rg/pool")["spec"]
    assert spec["task"] == "chain_sum" and spec["dataset_config"] == {"max_terms": 3}
    assert spec["rg_version"] == rgt.version() == "0.1.25"


@pytest.mark.parametrize("dataset, expected", [
    ({"task": "chain_summ"}, "datasets.rg.task: 'chain_summ' is no reasoning-gym task; nearest: chain_sum"),
    ({"task": {"chain_sum": 1, "gcdd": 1}}, "datasets.rg.task: 'gcdd' is no reasoning-gym task; nearest: gcd"),
    ({"task": "chain_sum", "config": {"max_term": 3}},
     "datasets.rg.config.max_term: chain_sum has no such field (did you mean max_terms?); its fields: min_terms, "
     "max_terms, min_digits, max_digits, allow_negation"),
    ({"task": "chain_sum", "config": {"max_terms": "three"}},
     "datasets.rg.config.max_terms: 'three' has the wrong type; chain_sum expects int"),
    ({"task": "chain_sum", "config": {"seed": 3}}, "datasets.rg.config.seed: set by hardex (a split's seed and n)"),
    ({"task": "chain_sum", "config": {"min_terms": 5, "max_terms": 2}}, "datasets.rg.config: chain_sum refuses these "
                                                                          "settings (AssertionError"),
    ({"task": {"chain_sum": 1, "gcd": 1}, "config": {"max_terms": 3}},
     "datasets.rg.config: in a mixed pool config is keyed by task; 'max_terms' is not one of its tasks"),
    ({"task": {"chain_sum": 0}}, "datasets.rg.task.chain_sum: weight 0 must be positive"),
])
def test_planning_refuses_an_unknown_task_or_field_in_one_line(smoke_config, dataset, expected):
    assert refused(rg_config(smoke_config, {**dataset, "splits": SPLITS})).startswith(expected)


def test_planning_refuses_what_no_split_of_these_settings_can_hold(smoke_config):
    # the gcd of two numbers up to 6: 21 problems (a pair is a problem in either order), about half in the pool's bucket
    small = {"task": "gcd", "config": {"min_numbers": 2, "max_numbers": 2, "min_value": 1, "max_value": 6},
             "splits": {"pool": {"n": 20, "seed": 1}, "test": {"n": 2, "seed": 2}}}
    assert refused(rg_config(smoke_config, small)).startswith(
        "datasets.rg.splits.pool: reasoning_gym/pool: only ")
    assert ("distinct problems of gcd fall in this split in 3000 draws, 20 asked"
            in refused(rg_config(smoke_config, small)))
    beyond = {"task": "gcd", "splits": {"pool": {"n": 20, "seed": 1, "tiers": [0, 7]}, "test": {"n": 5, "seed": 2}}}
    assert refused(rg_config(smoke_config, beyond)) == (
        "datasets.rg.splits.pool.tiers: level 7 is beyond gcd's curriculum (levels 0-3)")
    unseeded = {"task": "gcd", "splits": {"pool": {"n": 20}, "test": {"n": 5, "seed": 2}}}
    assert refused(rg_config(smoke_config, unseeded)) == (
        "datasets.rg.splits.pool.seed: required for family reasoning_gym")
    assert refused(rg_config(smoke_config, {"splits": SPLITS})).startswith("datasets.rg.task: required for family")


def test_planning_refuses_a_benchmark_that_shares_problems_with_the_pool(smoke_config):
    # two datasets of the same task whose splits are both named pool fall in one bucket: the same problems
    cfg = rg_config(smoke_config, {"task": "gcd", "splits": {"pool": {"n": 20, "seed": 1}}})
    cfg["datasets"]["other"] = {"family": "reasoning_gym", "task": "gcd", "splits": {"pool": {"n": 20, "seed": 1}}}
    cfg["tasks"]["rg"]["benchmarks"] = ["other/pool"]
    assert refused(cfg).startswith("tasks.rg.benchmarks[0]: 20 of other/pool's problems are in the pool rg/pool")
    cfg["tasks"]["rg"]["allow_overlap"] = 20
    check_config(cfg)


def test_planning_says_how_to_install_reasoning_gym_where_it_is_missing(smoke_config, monkeypatch):
    monkeypatch.setattr(rgt, "version", lambda: None)
    assert refused(rg_config(smoke_config, {"task": "gcd", "splits": SPLITS})) == (
        f"datasets.rg.splits.pool: family reasoning_gym needs the reasoning-gym package, which is not installed: "
        f"{rgt.INSTALL}")


def test_task_settings_are_refused_on_other_families(smoke_config):
    cfg = copy.deepcopy(smoke_config)
    cfg["datasets"]["arith"]["splits"]["pool"]["tiers"] = [0, 1]
    assert refused(cfg).startswith("datasets.arith.splits.pool.tiers: a task's settings are for family reasoning_gym")
    cfg = copy.deepcopy(smoke_config)
    cfg["datasets"]["arith"]["task"] = "gcd"
    assert refused(cfg) == "datasets.arith.task: only for family reasoning_gym (here: 'arith')"


def test_splits_are_disjoint_by_problem_whatever_the_wording_and_seed():
    # basic_arithmetic's natural style words one expression in several ways ("What is 5 - 3?", "Solve 5 - 3."): its
    # key is the expression, so the same expression never sits in two splits even where the seeds agree
    config = {"max_terms": 2, "max_digits": 1, "format_style": "natural"}
    made = {s: rgt.generate_split({"name": s, "n": 150, "seed": 7, "task": "basic_arithmetic",
                                   "dataset_config": config}) for s in ("pool", "test", "ood")}
    keys = {s: set(df["problem"]) for s, df in made.items()}
    assert all(len(keys[s]) == made[s].height for s in made)  # no problem twice within a split
    assert not keys["pool"] & keys["test"] and not keys["pool"] & keys["ood"] and not keys["test"] & keys["ood"]
    expressions = {s: {json.loads(a)["metadata"]["expression"].replace(" ", "") for a in df["answer"]}
                   for s, df in made.items()}
    assert not expressions["pool"] & expressions["test"]
    assert len({q.split(" ")[0] for q in made["pool"]["question"]}) > 1  # several wordings were drawn
    again = rgt.generate_split({"name": "pool", "n": 150, "seed": 7, "task": "basic_arithmetic",
                                "dataset_config": config})
    assert again["question"].to_list() == made["pool"]["question"].to_list()  # seeded: the same rows every time
def test_bracketed_twins_of_one_expression_share_a_split_and_pass_the_data_check():
    # basic_arithmetic writes '( 4 - -8 )' beside '4 - -8' and '-( 6 + -6 )' beside '-6 + -6'; the overlap check's
    # normalized text drops brackets, so twins in different splits stopped every test split of level 0 it was given
    meta = lambda e: {"expression": e}  # noqa: E731
    key = lambda e: rgt.problem_key("basic_arithmetic", f"Calculate {e}.", meta(e))  # noqa: E731
    assert key("( 4 - -8 )") == key("4 - -8") != key("4 - 8")
    spec = lambda name, n, seed: {"name": name, "n": n, "seed": seed, "task": "basic_arithmetic", "tiers": [0]}  # noqa: E731
    pool = rgt.generate_split(spec("pool", 100, 1))
    for seed in (2, 3):
        test = rgt.generate_split(spec("test", 50, seed))
        assert overlap(pool, test)["overlap"] == 0, seed


@pytest.mark.parametrize("task", SCORED_TASKS)
def test_the_score_is_the_tasks_own_verdict_on_right_and_wrong_answers(task):
    scorer = get_task("reasoning_gym", "flexible")
    rows = rgt.generate_split({"name": "test", "n": 12, "seed": 3, "task": task}).to_dicts()
    wrong_answers = ["\\boxed{}", "\\boxed{banana}", "\\boxed{-12345}", "I do not know."]
    for row in rows:
        entry = rgt.entry_of(row["answer"])
        own = create_dataset(task, **entry["config"], seed=0, size=1)
        gold = str(entry["answer"])
        assert scorer.score(f"So the answer is \\boxed{{{gold}}}.", row["answer"]) == own.score_answer(gold, entry) == 1
        assert scorer.is_correct(f"\\boxed{{{gold}}}", row["answer"])
        for wrong in wrong_answers:
            extracted = scorer.answer(wrong, row["answer"])
            assert scorer.score(wrong, row["answer"]) == pytest.approx(own.score_answer(extracted, entry))
            assert not scorer.is_correct(wrong, row["answer"])


def test_partial_credit_is_the_reward_and_only_a_full_score_a_pass():
    # spell_backward's verifier pays each letter of the right word's beginning: a word one letter short scores (n-1)/n
    scorer = get_task("reasoning_gym", "lenient")
    row = rgt.generate_split({"name": "test", "n": 1, "seed": 3, "task": "spell_backward"}).row(0, named=True)
    gold = row["gold"]
    partial = f"\\boxed{{{gold[:-1]}}}"
    entry = rgt.entry_of(row["answer"])
    own = create_dataset("spell_backward", **entry["config"], seed=0, size=1).score_answer(gold[:-1], entry)
    assert 0 < own < 1
    assert scorer.score(partial, row["answer"]) == pytest.approx(own)
    assert not scorer.is_correct(partial, row["answer"])
    reward = run_reward(None, scorer, scale=2.0)
    assert reward(partial, row["answer"], "") == pytest.approx(2 * own)
    assert reward(f"\\boxed{{{gold}}}", row["answer"], "") == 2.0


def test_flexible_scoring_reads_an_unboxed_number_only_where_the_answer_is_one():
    scorer = get_task("reasoning_gym", "flexible")
    number = rgt.generate_split({"name": "test", "n": 1, "seed": 3, "task": "gcd"}).row(0, named=True)
    assert scorer.is_correct(f"The greatest common divisor is {number['gold']}.", number["answer"])
    assert not get_task("reasoning_gym", "lenient").is_correct(f"It is {number['gold']}.", number["answer"])
    word = rgt.generate_split({"name": "test", "n": 1, "seed": 3, "task": "spell_backward"}).row(0, named=True)
    assert scorer.answer(f"It is {word['gold']}", word["answer"]) is None


def test_curriculum_levels_become_tiers_with_each_levels_settings():
    df = rgt.generate_split({"name": "pool", "n": 30, "seed": 1, "task": "chain_sum", "tiers": [0, 3]})
    assert df["tier"].to_list() == [0] * 15 + [3] * 15  # n shared evenly, levels kept as numbers
    terms = {tier: {json.loads(a)["metadata"]["num_terms"] for a in part["answer"]}
             for (tier,), part in df.group_by(["tier"])}
    levels = rgt._level_fields("chain_sum", 0), rgt._level_fields("chain_sum", 3)
    for tier, fields in zip((0, 3), levels):
        assert all(fields["min_terms"] <= t <= fields["max_terms"] for t in terms[tier])
    assert max(terms[0]) < min(terms[3])


def test_named_tiers_take_their_settings_over_the_splits():
    spec = {"name": "pool", "n": 20, "seed": 1, "task": "chain_sum", "dataset_config": {"max_digits": 1},
            "tiers": {"two": {"min_terms": 2, "max_terms": 2}, "five": {"min_terms": 5, "max_terms": 5}}}
    df = rgt.generate_split(spec)
    for tier, terms in (("two", 2), ("five", 5)):
        part = df.filter(df["tier"] == tier)
        assert part.height == 10
        assert {json.loads(a)["metadata"]["num_terms"] for a in part["answer"]} == {terms}
        assert {json.loads(a)["config"]["max_digits"] for a in part["answer"]} == {1}


def test_a_mixed_pool_keeps_each_examples_task_and_scores_it_by_its_own_verifier():
    spec = {"name": "pool", "n": 30, "seed": 1, "task": {"gcd": 2, "spell_backward": 1},
            "dataset_config": {"spell_backward": {"max_word_len": 5}}}
    df = rgt.generate_split(spec)
    assert df["rg_task"].value_counts().sort("rg_task").rows() == [("gcd", 20), ("spell_backward", 10)]
    assert df["tier"].to_list() == df["rg_task"].to_list()  # the per-tier tables read per task
    assert all(len(w) <= 5 for w in df.filter(df["rg_task"] == "spell_backward")["gold"])
    scorer = get_task("reasoning_gym", "flexible")
    assert all(scorer.is_correct(f"\\boxed{{{g}}}", a) for g, a in zip(df["gold"], df["answer"]))
    # each row is scored against its own task: a gcd answer is not a word's
    word = df.filter(df["rg_task"] == "spell_backward").row(0, named=True)
    assert not scorer.is_correct("\\boxed{1}", word["answer"])
    tiered = rgt.generate_split({**spec, "tiers": [0, 1]})
    assert set(tiered["tier"]) == {"gcd/0", "gcd/1", "spell_backward/0", "spell_backward/1"}


def test_a_generator_that_does_not_return_is_stopped_with_a_reason(monkeypatch):
    class Stuck:
        config = create_dataset("gcd", seed=0, size=1).config

        def __getitem__(self, idx):
            time.sleep(30)

    monkeypatch.setattr(rgt, "ITEM_SECONDS", 0.2)
    start = time.perf_counter()
    with pytest.raises(DataError, match="reasoning-gym's gcd generator did not return an item within 0.2 s"):
        rgt.draw(Stuck(), "gcd", 0)
    assert time.perf_counter() - start < 5


def test_the_packages_version_is_part_of_the_scorers_identity(monkeypatch, tmp_path):
    monkeypatch.setattr(job, "model_fingerprint", lambda path: "fingerprint")
    model = {"path": str(tmp_path), "dtype": "float32"}
    task = get_task("reasoning_gym", "flexible")
    assert job.work_identity(model, task)["scorer"] == ["reasoning_gym", "flexible", "0.1.25"]
    monkeypatch.setattr(rgt, "version", lambda: "0.2.0")
    assert job.work_identity(model, task)["scorer"] == ["reasoning_gym", "flexible", "0.2.0"]
    # other families' identities stay as they were, so their stored work is still theirs
    assert job.work_identity(model, get_task("addition", "flexible"))["scorer"] == ["addition", "flexible"]


def test_a_task_whose_entries_do_not_survive_storage_is_refused_at_planning(smoke_config):
    # arc_agi's metadata holds tuples its verifier compares as tuples: scored from JSON, its own answer would fail
    cfg = rg_config(smoke_config, {"task": "arc_agi",
                                   "splits": {"pool": {"n": 4, "seed": 1}, "test": {"n": 2, "seed": 2}}})
    assert refused(cfg) == ("datasets.rg.splits.pool: reasoning-gym's arc_agi: its verifier scores the entry stored as "
                            "JSON otherwise than the one it generated (its metadata holds what JSON does not keep), so "
                            "hardex cannot score this task")


def test_a_built_model_cannot_warm_start_on_a_reasoning_gym_split(smoke_config):
    cfg = rg_config(smoke_config, {"task": "gcd", "splits": {**SPLITS, "sft": {"n": 10, "seed": 4}}})
    cfg["models"]["tiny"]["build"]["sft_from"] = ["rg/sft"]
    assert refused(cfg) == ("models.tiny.build.sft_from[0]: 'rg/sft' is a reasoning_gym split, whose rows carry no "
                            "worked solution to warm-start on; name a split of arith, swaps, addition")
