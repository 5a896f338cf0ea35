"""The pairwise table: every pair of strategies, its p-values adjusted by Holm's method over the pairs of
its model x task, and a verdict (differs, equivalent within the margin, undecided) that one seed never
reaches."""

from __future__ import annotations

import math

import polars as pl
import pytest
from scipy import stats

from hardex import statistics
from hardex.report import tables
from hardex.report.pairwise import pairwise_table
from hardex.report.runs import run_summary
from tests.unit.test_controls import results


def test_holm_multiplies_the_ith_smallest_p_by_the_pairs_left_and_keeps_the_order():
    adjusted = statistics.holm([0.01, 0.04, 0.03, math.nan, 0.005])
    # sorted 0.005, 0.01, 0.03, 0.04 of 4 tested: x4, x3, x2 (0.06), x1 (0.04, raised to 0.06)
    assert adjusted[:3] == pytest.approx([0.03, 0.06, 0.06]) and adjusted[4] == pytest.approx(0.02)
    assert math.isnan(adjusted[3])
    assert statistics.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert statistics.holm([]) == []


def test_paired_t_p_values_of_a_zero_difference_and_of_equivalence():
    p, p_equivalence = statistics.t_test_p([10, 20, 10, 10], margin=5)  # mean 12.5, se 2.5
    assert p == pytest.approx(2 * stats.t.sf(5, 3))
    assert p_equivalence == pytest.approx(stats.t.cdf((12.5 - 5) / 2.5, 3))  # the upper one-sided test decides
    assert statistics.t_test_p([10, 10, 10], margin=20) == (0.0, 0.0)  # no spread: differs, inside the margin
    assert statistics.t_test_p([0, 0, 0], margin=5) == (1.0, 0.0)


def test_bootstrap_p_values_read_the_shares_of_resampled_means():
    means = [-1.0, 1.0, 2.0, 3.0, 6.0]
    assert statistics.bootstrap_p(pl.Series(means).to_numpy(), margin=5) == pytest.approx((0.4, 0.2))


def _pairwise(final, margin=5.0, n_boot=300):
    res = results(final)
    rows = pairwise_table(res, run_summary(res), n_boot=n_boot, margin=margin)
    return {(r["strategy"], r["versus"]): r for r in rows.iter_rows(named=True)}


def test_each_pair_of_strategies_once_in_paper_order_without_control_runs():
    final = {(s, seed): 7 for s in ("full", "hard", "random", "full_format") for seed in range(2)}
    assert set(_pairwise(final)) == {("hard", "random"), ("hard", "full"), ("random", "full")}


def test_a_pair_within_the_margin_is_equivalent_and_one_beyond_it_undecided():
    # hard - random by seed: 0, 10, -10, 0 points (mean 0, se 4.08)
    final = ({("hard", s): r for s, r in enumerate([7, 8, 7, 8])}
             | {("random", s): r for s, r in enumerate([7, 7, 8, 8])})
    wide = _pairwise(final, margin=20)["hard", "random"]
    assert wide["n_seeds"] == 4 and wide["interval"] == "t over 4 seeds" and wide["pairs"] == 1
    assert wide["p_equivalence"] == pytest.approx(stats.t.sf(20 / (10 * math.sqrt(2 / 3) / 2), 3))
    assert wide["p_equivalence_holm"] == wide["p_equivalence"] and wide["verdict"] == "equivalent within ±20"
    assert _pairwise(final, margin=5)["hard", "random"]["verdict"] == "undecided"
    # every seed 10 points apart: differs, and inside a 20-point margin
    same = {("hard", s): 8 for s in range(3)} | {("random", s): 7 for s in range(3)}
    assert _pairwise(same, margin=20)["hard", "random"]["verdict"] == "differs, within ±20"
    assert _pairwise(same, margin=5)["hard", "random"]["verdict"] == "differs"


def test_holm_adjusts_over_the_pairs_of_the_model_and_task():
    by_seed = {"hard": [6, 8, 6, 8], "easy": [8, 6, 8, 6], "random": [8, 8, 8, 8], "full": [9, 10, 9, 9]}
    pairs = _pairwise({(s, seed): r for s, v in by_seed.items() for seed, r in enumerate(v)})
    assert len(pairs) == 6 and {r["pairs"] for r in pairs.values()} == {6}
    lead = pairs["random", "full"]  # -10, -20, -10, -10: t = 5 on 3 degrees of freedom
    assert lead["p"] == pytest.approx(2 * stats.t.sf(5, 3)) and lead["p"] < 0.05
    assert lead["difference_ci_high"] < 0  # an uncorrected interval excludes zero ...
    ps = sorted(r["p"] for r in pairs.values())
    assert lead["p"] == ps[0] and lead["p_holm"] == pytest.approx(max(6 * ps[0], 5 * ps[1]))
    assert lead["p_holm"] > 0.05 and lead["verdict"] == "undecided"  # ... which six pairs do not support


def test_one_seed_is_undecided_whatever_its_bootstrap_says():
    pair = _pairwise({("hard", 0): 10, ("random", 0): 5})["hard", "random"]
    assert pair["interval"] == "bootstrap over 10 examples" and pair["difference"] == pytest.approx(50.0)
    assert pair["difference_ci_low"] > 0 and pair["p_holm"] < 0.05  # every resample of the questions gains
    assert pair["verdict"] == "undecided (one seed)"
    apart = _pairwise({("hard", 0): 10, ("random", 1): 5})["hard", "random"]
    assert apart["n_seeds"] == 0 and apart["verdict"] == "undecided (no shared seed)" and apart["pairs"] == 0


def test_the_report_has_the_pairwise_table_and_its_note_names_the_correction():
    res = results({(s, seed): r for s, v in {"hard": [7, 8], "random": [6, 7]}.items() for seed, r in enumerate(v)})
    probes = pl.DataFrame({"model": ["m"], "task": ["t"], "id": ["p0"], "k": [4], "pass_rate": [0.5]})
    subsets = pl.DataFrame(schema={"id": pl.Utf8, "pass_rate": pl.Float64, "model": pl.Utf8, "task": pl.Utf8,
                                   "strategy": pl.Utf8, "seed": pl.Int64})
    built = tables.build_tables(res, probes, subsets, n_boot=50, margin=3)
    assert "pairwise" in tables.TABLES and "Holm" in tables.TABLES["pairwise"]
    df, note = built["pairwise"]
    assert df.height == 1 and "Holm's method" in note and "±3 points" in note
    assert "Holm's correction" in built["headline"][1]
