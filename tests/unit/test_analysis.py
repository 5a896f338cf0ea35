"""Tables, intervals and the learnable-% regression (hardex.report), on the published data of
paper 1 and on small result files written in the workflow's real layout and schemas."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from hardex import metrics, report, selection, statistics
from hardex.report import loading, reference, render, tables
from hardex.report.breakdowns import base_split_table, ood_table, tier_table
from hardex.report.gains import gain_table, learnable_table
from hardex.report.pool import pool_distribution, subset_pass_rates
from hardex.report.regression import regression_report
from hardex.report.runs import accuracy_curves, run_summary
from tests.support import BENCHMARKS, N_OOD, N_POOL, PASS_K, ROOT, STRATEGIES, ZERO_STD, bench_frames, write_results

SPEC_CSV = ROOT.parent / "shared" / "spec" / "hard_examples_published.csv"

@pytest.fixture
def one_seed(tmp_path) -> dict:
    return write_results(tmp_path, seeds=(0,))


@pytest.fixture
def results(one_seed) -> loading.Results:
    f = one_seed
    return loading.load_results(f["evals"], f["bases"], f["steps"], BENCHMARKS, PASS_K)


def _row(df: pl.DataFrame, **keys) -> dict:
    sub = df.filter(pl.all_horizontal([pl.col(k) == v for k, v in keys.items()]))
    assert sub.height == 1, (keys, sub)
    return sub.row(0, named=True)


# ---- the published data of paper 1 ---------------------------------------------------------------------


def test_regression_on_published_data_gives_the_papers_fit():
    ref = reference.load_reference("hard_examples_published")
    assert ref.height == 32 and ref["model"].n_unique() == 4 and ref["task"].n_unique() == 2
    fit = statistics.regression(ref["learnable_pct"], ref["gain"], n_boot=1000, seed=0)
    assert fit["n"] == 32
    assert round(fit["r2"], 3) == 0.659 and round(fit["r2"], 2) == 0.66
    assert fit["slope"] == pytest.approx(0.93, abs=0.005)
    assert fit["intercept"] == pytest.approx(6.04, abs=0.01)
    for name in ("slope", "intercept", "r2"):
        lo, hi = fit[f"{name}_ci"]
        assert lo < fit[name] < hi
    # the same through the report's path (regression.json's "published" block)
    rep = regression_report(ref, n_boot=200)
    assert round(rep["this_run"]["r2"], 3) == 0.659


def test_published_gains_are_final_minus_base():
    ref = reference.load_reference("hard_examples_published")
    diff = (ref["final_accuracy"] - ref["base_accuracy"] - ref["gain"]).abs()
    assert diff.max() < 0.02  # gain_points agrees with the accuracies to the published rounding


def test_shipped_reference_is_the_spec_copy():
    if not SPEC_CSV.exists():
        pytest.skip("../shared/spec is not beside this checkout")
    shipped = reference.reference_path("hard_examples_published")
    assert shipped.read_text() == SPEC_CSV.read_text()


def test_unknown_reference_names_the_shipped_ones(tmp_path):
    with pytest.raises(report.AnalysisError, match="hard_examples_published"):
        reference.reference_path("no_such_paper")
    with pytest.raises(report.AnalysisError, match="not a file"):
        reference.reference_path(str(tmp_path / "missing.csv"))


# ---- statistics ------------------------------------------------------------------------------------------


def test_t_quantiles_match_tables():
    assert statistics.t_ppf(0.975, 1) == pytest.approx(12.706, abs=1e-3)
    assert statistics.t_ppf(0.975, 10) == pytest.approx(2.228, abs=1e-3)
    assert statistics.t_ppf(0.95, 30) == pytest.approx(1.697, abs=1e-3)
    assert statistics.t_ppf(0.025, 10) == pytest.approx(-2.228, abs=1e-3)
    assert statistics.t_ppf(0.975, 100_000) == pytest.approx(1.960, abs=1e-3)


def test_bootstrap_interval_is_sane():
    rng = np.random.default_rng(1)
    x = rng.normal(2.0, 1.0, 400)
    lo, hi = statistics.bootstrap_mean_interval(x, 0.95, 2000, seed=0)
    assert lo < x.mean() < hi
    assert hi - lo == pytest.approx(2 * 1.96 / 20, rel=0.15)  # ~ normal-theory width
    assert statistics.bootstrap_mean_interval(x, 0.95, 2000, seed=0) == (lo, hi)  # seeded
    narrow = statistics.bootstrap_mean_interval(x, 0.5, 2000, seed=0)
    assert lo < narrow[0] < narrow[1] < hi
    assert statistics.bootstrap_mean_interval(np.full(30, 0.25), 0.95, 200) == (0.25, 0.25)
    # coverage of the true mean over repeated samples is near the nominal level
    hits = sum(lo <= 0 <= hi for lo, hi in (statistics.bootstrap_mean_interval(rng.normal(0, 1, 60), 0.9, 400, s)
                                             for s in range(150)))
    assert 0.8 <= hits / 150 <= 0.97


def test_t_interval_across_seeds():
    lo, hi = statistics.t_interval([1.0, 2.0, 3.0], 0.95)
    half = statistics.t_ppf(0.975, 2) * 1.0 / math.sqrt(3)
    assert (lo, hi) == pytest.approx((2 - half, 2 + half))
    assert all(math.isnan(v) for v in statistics.t_interval([5.0]))


def test_regression_recovers_a_known_line_and_handles_no_spread():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 50, 200)
    y = 3.0 + 0.5 * x + rng.normal(0, 1, 200)
    fit = statistics.regression(x, y, n_boot=300)
    assert fit["slope"] == pytest.approx(0.5, abs=0.02) and fit["intercept"] == pytest.approx(3.0, abs=0.5)
    assert fit["slope_ci"][0] < 0.5 < fit["slope_ci"][1]
    yhat, lo, hi = statistics.confidence_band(fit, [0.0, 25.0, 50.0])
    assert (lo < yhat).all() and (yhat < hi).all() and (hi - lo)[1] < (hi - lo)[0]  # narrowest at the mean
    flat = statistics.regression([10.0, 10.0, 10.0], [1.0, 2.0, 3.0], n_boot=50)
    assert math.isnan(flat["slope"]) and flat["n_boot_used"] == 0
    assert regression_report(pl.DataFrame({"model": ["m"] * 3, "task": ["t"] * 3, "strategy": ["a", "b", "c"],
                                             "seed": [0] * 3, "learnable_pct": [0.0] * 3, "gain": [0.0] * 3}),
                               n_boot=50, strategies=["a", "b", "c"])["this_run"]["slope"] is None  # null, not NaN


def test_regression_points_are_cells_of_the_chosen_strategies_seeds_averaged(tmp_path):
    f = write_results(tmp_path, seeds=(0, 1), seed_shift=0.1)
    summary = run_summary(loading.load_results(f["evals"], f["bases"], f["steps"], BENCHMARKS, PASS_K))
    assert summary.height == 2 * 2 * 5 * 2  # runs: models x tasks x strategies x seeds
    rep = regression_report(summary, n_boot=300)["this_run"]
    # the default is paper 1's four strategies; this tree has three of them (no medium)
    assert rep["strategies"] == ["hard", "medium", "easy", "random"]
    assert rep["n"] == rep["n_cells"] == len(rep["points"]) == 2 * 2 * 3
    assert rep["seeds_per_cell"] == {"min": 2, "max": 2} and "seeds averaged" in rep["points_are"]
    point = next(p for p in rep["points"] if (p["model"], p["task"], p["strategy"]) == ("m1", "t1", "hard"))
    assert point["n_seeds"] == 2 and point["gain"] == pytest.approx(55.0)  # seeds: 50 and 60 points
    assert point["learnable_pct"] == pytest.approx(75.0)
    # the fit and its bootstrap are over the cells, as if each cell were one run
    cells = pl.DataFrame(rep["points"])
    alone = statistics.regression(cells["learnable_pct"], cells["gain"], n_boot=300)
    assert rep["slope"] == pytest.approx(alone["slope"]) and rep["slope_ci"] == pytest.approx(alone["slope_ci"])
    chosen = regression_report(summary, n_boot=50, strategies=["hard", "base_wrong"])["this_run"]
    assert {p["strategy"] for p in chosen["points"]} == {"hard", "base_wrong"} and chosen["n"] == 8


def test_the_regression_on_the_probes_prediction_reads_x_from_before_training(tmp_path):
    """`before_training`: each cell's gain (seeds averaged, as `this_run`) on its subset's learnable % as the probe
    predicted it (the subset table's posterior expectation at the run's G), not on the share measured in training."""
    from hardex.report.pool import subset_pass_rates

    f = write_results(tmp_path, seeds=(0, 1), seed_shift=0.1)
    summary = run_summary(loading.load_results(f["evals"], f["bases"], f["steps"], BENCHMARKS, PASS_K))
    probes, subsets = loading.load_pool(f["probes"], f["subsets"])
    table = subset_pass_rates(probes, subsets, {"m1": 4, "m2": 4})
    rep = regression_report(summary, n_boot=200, strategies=["hard", "easy", "random"], subset_table=table)
    before, during = rep["before_training"], rep["this_run"]
    assert before["x"] == "expected_learnable_pct_posterior" and before["n_cells"] == during["n_cells"] == 12
    expected = {(r["model"], r["task"], r["strategy"]): r["expected_learnable_pct_posterior"]
                for r in table.iter_rows(named=True)}
    for point in before["points"]:
        key = (point["model"], point["task"], point["strategy"])
        assert point["learnable_pct"] == pytest.approx(expected[key])
        same = next(p for p in during["points"] if (p["model"], p["task"], p["strategy"]) == key)
        assert point["gain"] == pytest.approx(same["gain"]) and point["n_seeds"] == same["n_seeds"] == 2
    # hard's subset (pass rates 0 and 0: never solved) is predicted to mix less than it mixed in training (75 %)
    hard = next(p for p in before["points"] if (p["model"], p["task"], p["strategy"]) == ("m1", "t1", "hard"))
    assert hard["learnable_pct"] < 75.0
    cells = pl.DataFrame(before["points"])
    alone = statistics.regression(cells["learnable_pct"], cells["gain"], n_boot=200)
    assert before["slope"] == pytest.approx(alone["slope"])
    assert "before_training" not in regression_report(summary, n_boot=50)  # no subset table, no such fit


# ---- tables from result files --------------------------------------------------------------------------


def test_load_results_reads_keys_from_paths(results):
    assert sorted(results.runs["model"].unique()) == ["m1", "m2"]
    assert set(results.runs["strategy"].unique()) == set(STRATEGIES)
    assert results.in_distribution("t1") == "t1/test" and results.ood("t1") == ["t1/ood"]
    assert results.steps.height == 2 * 2 * 5 * 4
    with pytest.raises(report.AnalysisError, match="not a path of the results layout"):
        loading.load_results(["elsewhere.parquet"], [])


@pytest.mark.parametrize("which", ["evals", "bases"])
def test_a_damaged_result_file_is_named(one_seed, which):
    from hardex.io import DamagedFileError

    f = one_seed
    damaged = Path(f[which][0])
    with open(damaged, "r+b") as fh:
        fh.truncate(damaged.stat().st_size // 2)
    with pytest.raises(DamagedFileError, match=f"{damaged}: damaged or incomplete"):
        loading.load_results(f["evals"], f["bases"], f["steps"], BENCHMARKS, PASS_K)


def test_gain_table_one_seed_uses_paired_bootstrap(results):
    t = gain_table(results, 0.95, 500, seed=0)
    assert t.height == 2 * 2 * 5
    r = _row(t, model="m1", task="t1", strategy="hard")
    assert r["base_accuracy"] == pytest.approx(30.0) and r["final_accuracy"] == pytest.approx(80.0)
    assert r["gain"] == pytest.approx(50.0) and r["final_step"] == 4 and r["n_seeds"] == 1
    assert r["interval"] == "bootstrap over 10 examples"
    assert r["gain_ci_low"] <= 50.0 <= r["gain_ci_high"] and r["gain_ci_high"] - r["gain_ci_low"] > 0
    assert _row(t, model="m2", task="t2", strategy="easy")["gain"] == pytest.approx(-10.0)
    assert t["strategy"].to_list()[:5] == sorted(STRATEGIES, key=selection.strategy_sort_key)  # paper order


def test_gain_table_several_seeds_uses_t_interval(tmp_path):
    f = write_results(tmp_path, seeds=(0, 1), seed_shift=0.1)
    res = loading.load_results(f["evals"], f["bases"], f["steps"], BENCHMARKS, PASS_K)
    r = _row(gain_table(res, 0.95, 200), model="m1", task="t1", strategy="hard")
    assert r["n_seeds"] == 2 and r["interval"] == "t over 2 seeds"
    assert r["gain"] == pytest.approx(55.0)  # seeds: 50 and 60 points
    half = statistics.t_ppf(0.975, 1) * np.std([50.0, 60.0], ddof=1) / math.sqrt(2)
    assert (r["gain_ci_low"], r["gain_ci_high"]) == pytest.approx((55 - half, 55 + half))


def test_runs_table_lists_every_seed_that_the_gain_table_averages(tmp_path):
    f = write_results(tmp_path, seeds=(0, 1), seed_shift=0.1)
    res = loading.load_results(f["evals"], f["bases"], f["steps"], BENCHMARKS, PASS_K)
    probes, subsets = loading.load_pool(f["probes"], f["subsets"])
    built = tables.build_tables(res, probes, subsets, n_boot=50)
    runs, gains = built["runs"][0], built["accuracy_gain"][0]
    hard = runs.filter((pl.col("model") == "m1") & (pl.col("task") == "t1") & (pl.col("strategy") == "hard"))
    assert hard["seed"].to_list() == [0, 1] and hard["gain"].to_list() == pytest.approx([50.0, 60.0])
    assert runs.height == 2 * gains.height  # every cell, seed by seed
    means = runs.group_by("model", "task", "strategy").agg(pl.col("gain").mean().alias("mean"))
    joined = gains.join(means, on=["model", "task", "strategy"])
    assert joined.height == gains.height and joined["gain"].to_list() == pytest.approx(joined["mean"].to_list())


def test_learnable_table_is_training_learnable_pct(results):
    t = learnable_table(run_summary(results))
    for s, z in ZERO_STD.items():
        assert _row(t, model="m1", task="t2", strategy=s)["learnable_pct"] == pytest.approx(100 * (1 - z))


def test_ood_table_uses_unbiased_pass_at_k(results):
    t = ood_table(results)
    assert set(t["benchmark"]) == {"t1/ood"}  # t2 has no OOD benchmark
    r = _row(t, model="m1", strategy="hard")
    # 80 % of 8 OOD examples (6 after rounding 6.4) have 2 of 4 samples right
    k_ok = round(0.8 * N_OOD)
    assert r["pass@1"] == pytest.approx(100 * k_ok * metrics.pass_at_k(4, 2, 1) / N_OOD)
    assert r["pass@4"] == pytest.approx(100 * k_ok / N_OOD)
    assert _row(t, model="m1", strategy="base")["step"] == 0
    assert t.filter(pl.col("model") == "m1")["strategy"][0] == "base"


def test_base_split_table(results, one_seed):
    _, subsets = loading.load_pool(one_seed["probes"], one_seed["subsets"])
    gains = gain_table(results, 0.95, 200)
    t = base_split_table(gains, subsets)
    assert set(t["strategy"]) == {"base_wrong", "base_right"}
    r = _row(t, model="m1", task="t1", strategy="base_wrong")
    assert r["n_train"] == 3 and r["vs_base_right_pct"] == pytest.approx(100 * (0.7 / 0.5 - 1))
    none = base_split_table(gains.filter(pl.col("strategy") == "hard"))
    assert none.height == 0 and "vs_base_right_pct" in none.columns


def test_tier_table_is_wide_per_strategy(results):
    t = tier_table(results)
    assert t.columns[:6] == ["model", "task", "benchmark", "tier", "n_examples", "base"]
    assert t.columns[6:] == sorted(STRATEGIES, key=selection.strategy_sort_key)
    # m1 hard, t1/test: first 8 of 10 correct; tier 1 = examples 0, 3, 6, 9 -> 3 of 4
    r = _row(t, model="m1", task="t1", benchmark="t1/test", tier="1")
    assert r["hard"] == pytest.approx(75.0) and r["n_examples"] == 4
    assert t.filter(pl.col("task") == "t1")["benchmark"][0] == "t1/test"  # in-distribution first


def test_tier_table_counts_each_question_once_whatever_the_seeds():
    # the base model is evaluated once per run seed: 3 seeds x 4 questions of a tier are still 4 questions,
    # and the base accuracy is each question's mean over those evaluations
    def rows(strategy, seed, right):
        return [{"model": "m", "task": "t", "benchmark": "t/test", "strategy": strategy, "seed": seed, "step": 10,
                 "id": f"{tier}-{i}", "tier": tier, "n": 1, "n_correct": int(right(seed, i))}
                for tier in ("1", "2") for i in range(4)]
    runs = pl.DataFrame([r for s in (0, 1, 2) for r in rows("full", s, lambda seed, i: i < 2)])
    base = pl.DataFrame([r for s in (0, 1, 2) for r in rows("base", s, lambda seed, i: i <= seed)]) \
        .drop("strategy", "step")
    t = tier_table(loading.Results(runs, base, loading.load_steps([]), {"t": ["t/test"]}))
    assert t["n_examples"].to_list() == [4, 4]  # not 12
    assert t["base"].to_list() == pytest.approx([50.0, 50.0])  # 1, 2 and 3 of 4 right: 6 of 12
    assert t["full"].to_list() == pytest.approx([50.0, 50.0])


def test_tiers_sort_as_numbers_everywhere():
    from hardex.metrics import accuracy_by_tier
    from hardex.report.catch_up import catch_up_table

    rows = [{"model": "m", "task": "t", "benchmark": "t/test", "strategy": strategy, "seed": 0, "step": 10,
             "id": f"{tier}-{i}", "tier": tier, "n": 1, "n_correct": i % 2}
            for strategy in ("full", "hard") for tier in ("10", "2", "1") for i in range(4)]
    runs = pl.DataFrame(rows)
    assert accuracy_by_tier(runs)["tier"].to_list()[:3] == ["1", "2", "10"]
    res = loading.Results(runs, runs.filter(pl.col("strategy") == "full").drop("strategy", "seed", "step"),
                    loading.load_steps([]), {"t": ["t/test"]})
    assert tier_table(res)["tier"].to_list() == ["1", "2", "10"]
    assert catch_up_table(runs)["tier"].to_list() == ["overall", "1", "2", "10"]


def test_catch_up_table_in_the_report(results, one_seed):
    probes, subsets = loading.load_pool(one_seed["probes"], one_seed["subsets"])
    # the random runs stand in for the run on the full pool
    rename = pl.col("strategy").replace({"random": "full"})
    full = loading.Results(results.runs.with_columns(rename), results.base, results.steps.with_columns(rename),
                     results.benchmarks, results.pass_k)
    catch, note = tables.build_tables(full, probes, subsets, n_boot=50)["catch_up"]
    assert "share_pct" in catch.columns and "match_step" not in catch.columns
    first = catch.filter((pl.col("model") == "m1") & (pl.col("task") == "t1"))
    assert first["strategy"].unique(maintain_order=True).to_list() == ["hard", "easy", "base_wrong", "base_right"]
    hard = first.filter((pl.col("strategy") == "hard") & (pl.col("benchmark") == "t1/test"))
    assert hard["tier"].to_list() == ["overall", "1", "2", "3"]
    r = hard.row(0, named=True)  # final 80 % against 60 %, both after 4 steps
    assert (r["accuracy"], r["full_accuracy"], r["difference"], r["share_pct"]) == pytest.approx((80, 60, 20, 100))
    assert r["interval"] == "one seed: no interval" and r["equivalent"] == "not shown" and "no interval" in note
    assert r["full_gain"] > 0 and "first_crossing_share" in catch.columns and "catch_up_pct" not in catch.columns
    # report.equivalence_margin reaches the table
    assert set(tables.build_tables(full, probes, subsets, n_boot=50, margin=7.5)["catch_up"][0]["margin"]) == {7.5}
    assert "No run on the full pool" in tables.build_tables(results, probes, subsets, n_boot=50)["catch_up"][1]


def test_pool_tables(one_seed):
    probes, subsets = loading.load_pool(one_seed["probes"], one_seed["subsets"])
    dist = pool_distribution(probes)
    d = dist.filter((pl.col("model") == "m1") & (pl.col("task") == "t1"))
    assert d["pass_rate"].to_list() == [0.0, 0.25, 0.5, 0.75, 1.0] and (d["n_examples"] == 4).all()
    assert d["share_pct"].sum() == pytest.approx(100.0)
    s = subset_pass_rates(probes, subsets)
    first = s.filter((pl.col("model") == "m1") & (pl.col("task") == "t1"))
    assert first["strategy"][0] == "pool" and first["n_examples"][0] == N_POOL
    assert _row(s, model="m1", task="t1", strategy="hard")["mean_pass_rate"] == pytest.approx(0.0)
    assert _row(s, model="m1", task="t1", strategy="easy")["mean_pass_rate"] == pytest.approx(1.0)



def test_expected_mixed_is_the_chance_of_a_group_with_a_gradient():
    assert [metrics.expected_mixed(c, 8, 8) for c in (0, 1, 4, 7, 8)] == [0.0, 1.0, 1.0, 1.0, 0.0]  # K = G: mixed probe
    assert metrics.expected_mixed(2, 4, 8) == pytest.approx(1 - 2 * 0.5**8)  # K < G: plug-in p = c / K
    # K >= G: unbiased. Averaged over the binomial outcomes of a K-sample probe it is exactly 1 - p^G - (1-p)^G
    for p, k, g in [(0.3, 10, 8), (0.05, 16, 8), (0.9, 12, 4)]:
        mean = sum(math.comb(k, c) * p**c * (1 - p) ** (k - c) * metrics.expected_mixed(c, k, g) for c in range(k + 1))
        assert mean == pytest.approx(1 - p**g - (1 - p) ** g, abs=1e-12)


def test_subsets_carry_the_learnable_pct_expected_before_training(one_seed, results):
    probes, subsets = loading.load_pool(one_seed["probes"], one_seed["subsets"])  # K = 4, pass rates 0 ... 1
    s = subset_pass_rates(probes, subsets, {"m1": 4, "m2": 8})
    assert _row(s, model="m1", task="t1", strategy="pool")["expected_learnable_pct"] == pytest.approx(60.0)
    assert _row(s, model="m1", task="t1", strategy="hard")["expected_learnable_pct"] == 0.0  # all wrong: no signal
    assert _row(s, model="m1", task="t1", strategy="easy")["expected_learnable_pct"] == 0.0  # all right: none
    mixed = [1 - r**8 - (1 - r) ** 8 for r in (0.0, 0.25, 0.5, 0.75, 1.0)]
    assert _row(s, model="m2", task="t1", strategy="pool")["expected_learnable_pct"] == pytest.approx(20 * sum(mixed))
    learn = tables.build_tables(results, probes, subsets, n_boot=50, group_sizes={"m1": 4, "m2": 8})["learnable"][0]
    assert {"learnable_pct", "expected_learnable_pct"} <= set(learn.columns)
    assert _row(learn, model="m1", task="t1", strategy="hard")["expected_learnable_pct"] == 0.0
    learnable = tables.build_tables(results, probes, subsets, n_boot=50)["learnable"][0]
    assert "expected_learnable_pct" not in learnable.columns

def test_build_and_write_tables_in_every_format(results, one_seed, tmp_path):
    probes, subsets = loading.load_pool(one_seed["probes"], one_seed["subsets"])
    built = tables.build_tables(results, probes, subsets, n_boot=200)
    assert set(built) == set(tables.TABLES)
    out = tmp_path / "tables"
    for name, (df, note, *layout) in built.items():
        written = render.write_table(df, out / name, tables.TABLES[name], note, **(layout or [{}])[0])
        assert sorted(p.suffix for p in written) == [".csv", ".html", ".md", ".tex"]
    md = (out / "accuracy_gain.md").read_text()
    assert md.startswith("## Accuracy gain") and "| gain CI |" in md and "[" in md
    csv = pl.read_csv(out / "accuracy_gain.csv")
    assert csv.height == 20 and {"gain_ci_low", "gain_ci_high"} <= set(csv.columns)
    tex = (out / "accuracy_gain.tex").read_text()
    assert "\\begin{tabular}" in tex and "base\\_wrong" in tex and "\\label{tab:accuracy_gain}" in tex
    html = (out / "learnable.html").read_text()
    assert html.count("<tr>") == 1 + 20 and "<th>learnable_pct</th>" in html


# ---- the published reference beside this run -----------------------------------------------------


def test_reference_merge_maps_names(results):
    ref = reference.load_reference("hard_examples_published")
    names = {"models": {"m1": "Qwen3-4B", "m2": "Phi-4"}, "tasks": {"t1": "gsm8k"}, "strategies": {}}
    gains = reference.with_reference(gain_table(results, n_boot=100), ref,
                             {"gain": "published_gain", "base_accuracy": "published_base_accuracy"}, names)
    r = _row(gains, model="m1", task="t1", strategy="hard")
    assert r["published_gain"] == pytest.approx(34.19) and r["published_base_accuracy"] == pytest.approx(48.45)
    assert _row(gains, model="m2", task="t1", strategy="easy")["published_gain"] == pytest.approx(14.94)
    assert _row(gains, model="m1", task="t2", strategy="hard")["published_gain"] is None  # t2 unmapped
    assert _row(gains, model="m1", task="t1", strategy="base_wrong")["published_gain"] is None
    assert reference.with_reference(gains, None, {"gain": "x"}) is gains
    # a strategy renamed through the mapping
    renamed = reference.with_reference(gain_table(results, n_boot=100), ref, {"gain": "published_gain"},
                               {**names, "strategies": {"random": "medium"}})
    assert _row(renamed, model="m1", task="t1", strategy="random")["published_gain"] == pytest.approx(26.69)


def test_tables_and_regression_with_reference(results, one_seed):
    ref = reference.load_reference("hard_examples_published")
    names = {"models": {"m1": "Qwen3-4B"}, "tasks": {"t1": "gsm8k"}}
    probes, subsets = loading.load_pool(one_seed["probes"], one_seed["subsets"])
    built = tables.build_tables(results, probes, subsets, n_boot=100, ref=ref, names=names)
    gains, note = built["accuracy_gain"]
    assert "published_gain" in gains.columns and "3 of 20 rows matched" in note  # hard, easy, random
    assert "published_learnable_pct" in built["learnable"][0].columns
    rep = regression_report(run_summary(results), n_boot=100, ref=ref, names=names)
    assert rep["this_run"]["n"] == 12 and len(rep["this_run"]["points"]) == 12  # hard, easy, random cells
    assert rep["published"]["n"] == 32 and round(rep["published"]["r2"], 3) == 0.659
    curves = reference.reference_curves(ref)
    q = curves.filter((pl.col("model") == "Qwen3-4B") & (pl.col("task") == "gsm8k") & (pl.col("strategy") == "hard"))
    assert q["step"].to_list() == [0] + list(range(100, 1001, 100))
    # step 1000; final_accuracy is 82.64
    assert q["accuracy"][0] == pytest.approx(48.45) and q["accuracy"][-1] == pytest.approx(82.6)


def test_each_run_is_compared_with_the_base_of_its_own_seed(tmp_path):
    """The base model is evaluated once per run seed, with that seed's evaluation noise: a run's gain is
    its final accuracy minus the base accuracy of the same seed, so intervals over seeds cover the base's
    evaluation noise too (a single base evaluation would shift every seed's gain alike)."""
    f = write_results(tmp_path, seeds=(0, 1))
    for path in f["bases"]:
        task = path.stem
        per_seed = [bench_frames(0, task, acc).with_columns(pl.lit(seed, dtype=pl.Int64).alias("seed"))
                    for seed, acc in ((0, 0.3), (1, 0.5))]
        pl.concat(per_seed).write_parquet(path)
    res = loading.load_results(f["evals"], f["bases"], f["steps"], BENCHMARKS, PASS_K)
    s = run_summary(res).filter((pl.col("model") == "m1") & (pl.col("task") == "t1") & (pl.col("strategy") == "hard"))
    assert s.sort("seed")["base_accuracy"].to_list() == pytest.approx([30.0, 50.0])
    assert s.sort("seed")["gain"].to_list() == pytest.approx([80.0 - 30.0, 90.0 - 50.0])
    curves = accuracy_curves(res).filter((pl.col("model") == "m1") & (pl.col("task") == "t1")
                                           & (pl.col("benchmark") == "t1/test") & (pl.col("step") == 0))
    assert curves.filter(pl.col("strategy") == "base")["accuracy"].to_list() == pytest.approx([0.4])  # both seeds
    assert curves.filter(pl.col("strategy") == "hard").sort("seed")["accuracy"].to_list() == pytest.approx([0.3, 0.5])


def test_table_2_puts_the_posteriors_prediction_beside_the_raw_one(one_seed, results):
    probes, subsets = loading.load_pool(one_seed["probes"], one_seed["subsets"])
    learn = tables.build_tables(results, probes, subsets, n_boot=50, group_sizes={"m1": 4, "m2": 8})["learnable"]
    hard = _row(learn[0], model="m1", task="t1", strategy="hard")
    assert hard["expected_learnable_pct"] == 0.0 and 0 < hard["expected_learnable_pct_posterior"] < 100
    assert "expected_learnable_pct_posterior" in learn[1] and "Beta posterior" in learn[1]
    # the real model's pool (docs/results-real-model.md, K = G = 8): hard is 10 of its 45 examples never solved
    counts = [c for c, n in {0: 45, 1: 17, 2: 7, 3: 9, 4: 12, 5: 5, 6: 4, 7: 1}.items() for _ in range(n)]
    probe = pl.DataFrame({"model": "smol", "task": "addition", "id": [f"e{i}" for i in range(100)], "k": 8,
                          "pass_rate": [c / 8 for c in counts]})
    subset = probe.head(10).select("model", "task", "id", "pass_rate").with_columns(strategy=pl.lit("hard"),
                                                                                    seed=pl.lit(0))
    s = subset_pass_rates(probe, subset, {"smol": 8})
    row = _row(s, model="smol", task="addition", strategy="hard")
    assert row["expected_learnable_pct"] == 0.0
    assert row["expected_learnable_pct_posterior"] == pytest.approx(25.1, abs=0.5)
    pool = _row(s, model="smol", task="addition", strategy="pool")
    assert pool["expected_learnable_pct"] == pytest.approx(55.0)  # the mixed examples at K = G
