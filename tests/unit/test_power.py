"""Intervals over seeds and test questions together, and how many seeds a difference needs
(hardex.statistics, the power table of hardex.report.tables), on simulated designs and on
result frames built by hand."""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import polars as pl
import pytest
from scipy import stats

from hardex import statistics
from hardex.config import ConfigError, check_config
from hardex.report import loading, render, tables
from hardex.report.power import POWER_KINDS, pooled_sd, power_table
from hardex.report.runs import run_summary


def _design(rng, k: int, n: int, seed_sd: float, question_sd: float, noise_sd: float, true: float = 0.1):
    """Seeds x questions of final-minus-base differences: a seed effect, a question effect shared by every
    seed (one test set), and noise of each seed on each question."""
    return (true + rng.normal(0, seed_sd, k)[:, None] + rng.normal(0, question_sd, n)[None, :]
            + rng.normal(0, noise_sd, (k, n)))


@pytest.mark.parametrize("question_sd", [0.0, 0.05])
def test_seeds_and_questions_interval_covers_at_about_the_nominal_rate(question_sd):
    rng = np.random.default_rng(7)
    covered = 0
    for r in range(200):
        d = _design(rng, 5, 100, 0.05, question_sd, 0.2 if question_sd else 0.05)
        lo, hi = statistics.seeds_and_questions_interval(d, 0.95, 200, r)
        covered += lo <= 0.1 <= hi
    # it errs wide (seed x question noise enters both stages) but never far below 95 %
    assert 0.9 <= covered / 200 <= 1.0


def test_seeds_and_questions_interval_is_wider_than_the_t_when_questions_dominate():
    rng = np.random.default_rng(3)
    t_covered = both_covered = 0
    for r in range(200):
        d = _design(rng, 5, 100, 0.01, 0.3, 0.2)
        lo, hi = statistics.seeds_and_questions_interval(d, 0.95, 200, r)
        t_lo, t_hi = statistics.t_interval(d.mean(axis=1), 0.95)
        assert hi - lo > t_hi - t_lo
        t_covered += t_lo <= 0.1 <= t_hi
        both_covered += lo <= 0.1 <= hi
    # the t over seeds treats the questions as fixed: it misses the question effect's share
    assert t_covered / 200 < 0.85 <= both_covered / 200


def test_seeds_and_questions_interval_without_question_effects_is_the_t():
    rng = np.random.default_rng(0)
    d = np.repeat(rng.normal(0.1, 0.05, 6)[:, None], 50, axis=1)  # every question alike within a seed
    lo, hi = statistics.seeds_and_questions_interval(d, 0.95, 4000, 0)
    t_lo, t_hi = statistics.t_interval(d.mean(axis=1), 0.95)
    assert (hi - lo) == pytest.approx(t_hi - t_lo, rel=0.05)
    assert statistics.seeds_and_questions_interval(d[:1], 0.95, 100, 0) == pytest.approx((math.nan, math.nan),
                                                                                          nan_ok=True)


@pytest.mark.parametrize("d,n", [(1.0, 10), (0.5, 34), (0.8, 15), (0.2, 199)])
def test_seeds_needed_matches_the_textbook(d, n):
    # paired t, 80 % power, 5 % two-sided (Cohen's tables; G*Power)
    assert statistics.seeds_needed(3 * d, 3.0) == n
    assert statistics.seeds_needed(-3 * d, 3.0) == n  # the sign does not matter
    assert statistics.paired_t_power(d, n) >= 0.8 > statistics.paired_t_power(d, n - 1)


def test_seeds_needed_caps_tiny_effects():
    assert statistics.seeds_needed(0.01, 1.0, max_seeds=1000) is None
    assert statistics.seeds_needed(0.0, 1.0) is None
    assert statistics.seeds_needed(2.0, 0.0) == 2
    assert statistics.seeds_needed(1.0, 1.0, power=0.9, alpha=0.01) > 10


@pytest.mark.parametrize("d,at_two", [(32.58 / 5.29, 0.506), (31.08 / 3.77, 0.640), (20.0, 0.974)])
def test_power_far_in_the_noncentral_tail_is_a_number_and_2_seeds_are_not_enough(d, at_two):
    """scipy's noncentral t returned NaN for these effect sizes at 2 pairs and the search took it for
    enough: the power table printed 2 seeds for a real run's 32.58 +- 5.29 and 31.08 +- 3.77, whose power
    at 2 seeds is 0.51 and 0.64 (one degree of freedom: t's critical value is 12.7)."""
    assert statistics.paired_t_power(d, 2) == pytest.approx(at_two, abs=0.001)
    assert statistics.seeds_needed(d, 1.0) == (2 if at_two >= 0.8 else 3)
    # an independent check: simulated paired t-tests at 2 pairs
    rng = np.random.default_rng(1)
    x = rng.normal(d, 1.0, (200_000, 2))
    t = x.mean(axis=1) / (x.std(axis=1, ddof=1) / math.sqrt(2))
    assert float((np.abs(t) > stats.t.ppf(0.975, 1)).mean()) == pytest.approx(at_two, abs=0.005)


def test_seeds_needed_never_takes_a_power_that_is_not_a_number_for_enough(monkeypatch):
    true_power = statistics.paired_t_power
    monkeypatch.setattr(statistics, "paired_t_power",
                        lambda d, n, alpha=0.05: math.nan if n < 4 else true_power(d, n, alpha))
    assert statistics.seeds_needed(50.0, 1.0) == 4


@pytest.mark.parametrize("d", [0.3, 0.9, 1.7, 2.6, 4.4, 6.2, 8.2, 15.0])
def test_the_seeds_reported_reach_the_power_and_one_fewer_do_not(d):
    n = statistics.seeds_needed(d, 1.0)
    assert statistics.paired_t_power(d, n) >= 0.8
    assert n == 2 or statistics.paired_t_power(d, n - 1) < 0.8


# ---- the tables, on frames built by hand ---------------------------------------------------------------

N_Q = 10
# correct answers out of N_Q per seed (seeds 0..3); the base model gets 5 right with every seed
FINAL = {"hard": [8, 7, 8, 7], "hard_shuffled": [6, 6, 5, 7], "full": [7, 7, 7, 7], "easy": [5, 6, 5, 6]}


def _results(final: dict[str, list[int]] = FINAL, n_q: int = N_Q) -> loading.Results:
    """Each strategy's runs end with final[strategy][seed] of n_q right; the base gets half right."""
    runs = [{"model": "m", "task": "t", "strategy": strategy, "seed": seed, "step": 4, "benchmark": "t/test",
             "id": f"q{q}", "tier": "1", "n": 1, "n_correct": int(q < correct[seed])}
            for strategy, correct in final.items() for seed in range(len(correct)) for q in range(n_q)]
    base = pl.DataFrame([{"model": "m", "task": "t", "seed": seed, "benchmark": "t/test", "id": f"q{q}", "tier": "1",
                          "n": 1, "n_correct": int(q < n_q // 2)} for seed in range(4) for q in range(n_q)])
    return loading.Results(pl.DataFrame(runs), base, loading.load_steps([]), {"t": ["t/test"]})


def _pool() -> tuple[pl.DataFrame, pl.DataFrame]:
    """A probe table and no subsets, for build_tables."""
    probes = pl.DataFrame({"model": ["m"], "task": ["t"], "id": ["p0"], "k": [4], "pass_rate": [0.5]})
    subsets = pl.DataFrame(schema={"id": pl.Utf8, "pass_rate": pl.Float64, "model": pl.Utf8, "task": pl.Utf8,
                                   "strategy": pl.Utf8, "seed": pl.Int64})
    return probes, subsets


def test_power_table_lists_controls_first_then_gains_then_pairs():
    power = power_table(run_summary(_results()))
    kinds = power["kind"].to_list()
    assert kinds == sorted(kinds, key=POWER_KINDS.index)
    first = power.row(0, named=True)
    assert (first["kind"], first["strategy"], first["versus"]) == ("control", "hard", "hard_shuffled")
    # hard - hard_shuffled by seed: 20, 10, 30, 0 points
    assert first["n_seeds"] == 4 and first["difference"] == pytest.approx(15.0)
    assert first["difference_sd"] == pytest.approx(float(np.std([20, 10, 30, 0], ddof=1)))
    # the spread planned on is pooled over the six comparisons of two runs (4 seeds each: equal weights)
    points = {s: 10 * np.array(v, dtype=float) for s, v in FINAL.items()}
    runs = math.sqrt(np.mean([np.var(points[a] - points[b], ddof=1) for a, b in itertools.combinations(points, 2)]))
    assert first["pooled_sd"] == pytest.approx(runs) and first["effect_size"] == pytest.approx(15 / runs)
    assert first["seeds_needed"] == str(statistics.seeds_needed(15.0, runs))
    gains = power.filter(pl.col("kind") == "base")
    assert gains["versus"].unique().to_list() == ["base"]
    full = gains.filter(pl.col("strategy") == "full").row(0, named=True)
    # full gained 20 points with every seed: its own spread is 0, the gains' pooled spread is not
    gain_sd = math.sqrt(np.mean([np.var(v - 50, ddof=1) for v in points.values()]))
    assert full["difference"] == pytest.approx(20.0) and full["difference_sd"] == 0
    assert full["pooled_sd"] == pytest.approx(gain_sd)
    assert full["seeds_needed"] == str(statistics.seeds_needed(20, gain_sd))
    assert full["seeds_needed"] != "2"
    pairs = power.filter(pl.col("kind") == "pair")
    assert pairs.height == 6 - 1  # four strategies: six pairs, one of them the control
    # easy - full by seed (paper order: easy before full): -20, -10, -20, -10 points
    easy = pairs.filter((pl.col("strategy") == "easy") & (pl.col("versus") == "full"))
    assert easy.height == 1 and easy["difference"][0] == pytest.approx(-15.0)


def test_a_tier_and_its_random_draw_are_a_pair_and_a_run_and_its_controls_are_controls():
    """Named alike is not controlled: tier_low_random is tier_low's random draw, another strategy."""
    final = {"tier_low": [5, 6, 7, 5], "tier_low_random": [4, 6, 5, 5], "hard": [7, 8, 6, 7],
             "hard_random_reward": [5, 5, 5, 5], "hard_online": [6, 8, 7, 7]}
    power = power_table(run_summary(_results(final)))
    kinds = {(r["strategy"], r["versus"]): r["kind"] for r in power.iter_rows(named=True)}
    assert kinds[("tier_low", "tier_low_random")] == "pair"
    assert kinds[("hard", "hard_random_reward")] == "control" and kinds[("hard", "hard_online")] == "control"
    assert sum(k == "control" for k in kinds.values()) == 2


def test_a_comparison_whose_few_seeds_happened_to_agree_is_not_settled_by_them():
    """Two strategies 0, 0, 0, 1 points apart on 100 questions: their own spread (0.5) says 34 seeds tell
    0.25 points from zero; the spread of the other comparisons of the model x task says it is not
    resolvable at this design."""
    final = {"hard": [50, 50, 50, 51], "medium": [50, 50, 50, 50], "random": [40, 80, 45, 75]}
    power = power_table(run_summary(_results(final, n_q=100)), max_seeds=1000)
    pair = power.filter((pl.col("strategy") == "hard") & (pl.col("versus") == "medium")).row(0, named=True)
    assert pair["difference"] == pytest.approx(0.25) and pair["difference_sd"] == pytest.approx(0.5)
    assert statistics.seeds_needed(0.25, 0.5) == 34  # what its own spread said
    assert pair["pooled_sd"] > 10 and pair["seeds_needed"] == ">1000"
    _, note = tables.build_tables(_results(final, n_q=100), *_pool(), n_boot=50)["power"]
    assert "not resolvable at this design, never that the two are the same" in note and "pooled" in note


def test_pooled_sd_weights_each_comparison_by_its_degrees_of_freedom():
    assert pooled_sd([2.0, 4.0, math.nan], [2, 4, 1]) == pytest.approx(math.sqrt((1 * 4 + 3 * 16) / 4))
    assert math.isnan(pooled_sd([math.nan], [1]))


def test_power_table_caps_and_refuses_to_guess():
    tiny = _results({"hard": [6, 5, 6, 5], "random": [5, 6, 5, 6]})
    row = power_table(run_summary(tiny), max_seeds=50)
    pair = row.filter(pl.col("kind") == "pair").row(0, named=True)
    assert pair["difference"] == 0 and pair["seeds_needed"] == ">50"
    one = _results({"hard": [8], "hard_format": [6]})
    rows = power_table(run_summary(one))
    assert set(rows["seeds_needed"]) == {"not estimable"} and set(rows["n_seeds"]) == {1}


def test_report_tables_carry_both_intervals_and_the_power_table(tmp_path):
    res = _results()
    built = tables.build_tables(res, *_pool(), n_boot=300, power={"power": 0.9, "alpha": 0.01, "max_seeds": 40})
    assert set(built) == set(tables.TABLES)
    gains, note = built["accuracy_gain"]
    assert "gain_sq CI" in note and "t over seeds" in note
    hard = gains.filter(pl.col("strategy") == "hard").row(0, named=True)
    assert hard["gain_sq_ci_low"] < hard["gain"] < hard["gain_sq_ci_high"]
    assert hard["gain_ci_low"] < hard["gain"] < hard["gain_ci_high"]
    power, note = built["power"]
    assert "a difference of d points with seed spread s needs n seeds" in note and "0.9" in note
    assert power.height == 4 + 6  # four gains, six pairs
    render.write_table(power, tmp_path / "power", tables.TABLES["power"], note, 2)
    for fmt in render.TABLE_FORMATS:  # every format the report rule declares
        assert (tmp_path / f"power.{fmt}").stat().st_size > 0
    assert "seeds_needed" in (tmp_path / "power.md").read_text()
    assert "gain_sq CI" in render.to_markdown(gains)


@pytest.mark.parametrize("value,message", [
    ({"power": 1.0}, "report.power.power: 1.0 is out of range"),
    ({"alpha": 0}, "report.power.alpha: 0 is out of range"),
    ({"max_seeds": 1}, "report.power.max_seeds: 1 is out of range"),
    ({"power": 0.04, "alpha": 0.05}, "report.power.power: 0.04 is not above report.power.alpha (0.05)"),
])
def test_bad_power_settings_name_the_key(smoke_config, value, message):
    with pytest.raises(ConfigError) as err:
        check_config({**smoke_config, "report": {"power": value}})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_power_settings_have_defaults(smoke_config):
    cfg = check_config(copy.deepcopy(smoke_config))
    assert cfg["report"]["power"] == {"alpha": 0.05, "max_seeds": 1000, "power": 0.8}
