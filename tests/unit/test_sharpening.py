"""The sharpening null of the pass_at_k table: its integrals against Monte Carlo and closed forms, and the
table's verdict on counts simulated from a known Beta, under exact sharpening and with new solving."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from hardex.posterior import log_beta
from hardex.report import loading, plots as P
from hardex.report.sharpening import beta_expect, fit_gamma, null_beyond, null_pass_at_k, null_verdict, pass_at_k_table

# the Beta the audit fitted to real_model_cpu's base counts; sharpened as p^0.4
A, B, GAMMA = 0.365, 2.77, 0.4


def _alternating(a: float, b: float, gamma: float, base_k: int, n: int) -> float:
    """E[(1 - p)^K (1 - (1 - p^gamma)^n)] in closed form, by expanding (1 - q)^n: exact for small n only
    (the alternating sum cancels badly for large n), so a check, not the method."""
    return sum((-1) ** (j + 1) * math.comb(n, j) * math.exp(log_beta(a + gamma * j, b + base_k) - log_beta(a, b))
               for j in range(1, n + 1))


@pytest.mark.parametrize("a, b, gamma, base_k, n", [
    (A, B, GAMMA, 16, 4),  # a < 1: the density is singular at 0
    (0.05, 0.3, 0.2, 64, 8),  # both ends singular, gamma small
    (3.0, 0.2, 1.7, 8, 2),  # mass near 1, gamma > 1
    (500.0, 4500.0, 0.5, 32, 4),  # a narrow peak at 0.1
])
def test_the_integral_against_monte_carlo_and_the_closed_form(a, b, gamma, base_k, n):
    p = np.random.default_rng(0).beta(a, b, 2_000_000)
    draws = (1 - p) ** base_k * (1 - (1 - p**gamma) ** n)
    value = null_beyond(a, b, gamma, base_k, n)
    assert abs(value - draws.mean()) < 4 * draws.std() / math.sqrt(p.size) + 1e-6
    assert value == pytest.approx(_alternating(a, b, gamma, base_k, n), rel=1e-6, abs=1e-10)
    k_draws = 1 - (1 - p**gamma) ** 4
    assert abs(null_pass_at_k(a, b, gamma, 4) - k_draws.mean()) < 4 * k_draws.std() / math.sqrt(p.size) + 1e-6
    # gamma reproduces the pass@1 it was fitted to, and pass@1 is E[p^gamma]
    assert fit_gamma(a, b, null_pass_at_k(a, b, gamma, 1)) == pytest.approx(gamma, rel=1e-6)
    assert beta_expect(lambda x: x, a, b) == pytest.approx(a / (a + b), rel=1e-8)


def test_the_audit_numbers_are_what_sharpening_predicts():
    # Beta(0.365, 2.77) sharpened as p^0.4: pass@1 32.5 %, pass@4 66 %, 20.8 % beyond the base's 16 samples
    assert 100 * null_pass_at_k(A, B, GAMMA, 1) == pytest.approx(32.55, abs=0.01)
    assert 100 * null_pass_at_k(A, B, GAMMA, 4) == pytest.approx(66.45, abs=0.01)
    assert 100 * null_beyond(A, B, GAMMA, 16, 4) == pytest.approx(20.81, abs=0.01)
    assert fit_gamma(A, B, 0.0) == math.inf and fit_gamma(A, B, 1.0) == 0.0
    assert null_beyond(A, B, math.inf, 16, 4) == 0.0  # a model that never answers right solves nothing new


def _simulated(seeds, n_questions=400, base_k=64, n=8, new_share=0.0, gamma=GAMMA, questions=0) -> loading.Results:
    """Counts from p ~ Beta(A, B), the trained rate p^gamma; new_share of the questions have base p = 0
    exactly and trained p = 0.6 (solving that no sharpening of the base reaches). The questions (their p) are
    the test set's, drawn once from `questions`; each seed samples the base and its run afresh."""
    base, runs = [], []
    rng = np.random.default_rng(1000 + questions)
    p = rng.beta(A, B, n_questions)
    new = rng.random(n_questions) < new_share
    p[new] = 0.0
    trained = np.where(new, 0.6, p**gamma)
    ids = [f"q{i:03d}" for i in range(n_questions)]
    for seed in seeds:
        rng = np.random.default_rng(seed)
        base.append(pl.DataFrame({"model": "m", "task": "t", "benchmark": "b", "seed": seed, "id": ids,
                                  "tier": None, "n": base_k, "n_correct": rng.binomial(base_k, p)}))
        runs.append(pl.DataFrame({"model": "m", "task": "t", "strategy": "hard", "seed": seed, "step": 4,
                                  "benchmark": "b", "id": ids, "tier": None, "n": n,
                                  "n_correct": rng.binomial(n, trained)}))
    return loading.Results(pl.concat(runs), pl.concat(base), pl.DataFrame(), {"t": ["b"]}, {"b": [1]})


def test_exact_sharpening_is_not_separated_from_the_null():
    table = pass_at_k_table(_simulated([0]), n_boot=100)
    base, hard = (table.filter(pl.col("strategy") == s).row(0, named=True) for s in ("base", "hard"))
    assert hard["gamma"] == pytest.approx(GAMMA, abs=0.05)
    assert (hard["base_a"], hard["base_b"]) == (pytest.approx(A, abs=0.08), pytest.approx(B, abs=0.8))
    # plenty of questions beyond the base's 64 samples, and the null predicts them
    assert hard["beyond_base_pct"] > 10
    assert hard["beyond_sharpening_ci_low"] < 0 < hard["beyond_sharpening_ci_high"]
    assert hard["interval"] == "bootstrap over 400 questions (one seed)"
    assert hard["verdict"] == "not separated from sharpening (one seed)"
    # the null's pass@1 is the observed one by construction; its pass@8 is near the observed
    assert hard["null_pass@1"] == pytest.approx(hard["pass@1"])
    assert hard["null_pass@8"] == pytest.approx(hard["pass@8"], abs=4)
    assert hard["null_pass@16"] is None and hard["pass@16"] is None  # beyond the checkpoint's 8 samples
    # on the base row, the fitted Beta's own pass@k against the observed: the fit's check
    assert base["null_pass@64"] == pytest.approx(base["pass@64"], abs=3) and base["verdict"] is None
    # several seeds: a t-interval over the per-seed differences
    three = pass_at_k_table(_simulated([1, 2, 3])).filter(pl.col("strategy") == "hard").row(0, named=True)
    assert three["interval"] == "t over 3 seeds" and three["verdict"] == "not separated from sharpening"


def test_new_solving_beyond_what_sharpening_reaches():
    # a quarter of the questions never solvable by the base (p = 0), solved at 0.6 after training, the
    # others sharpened as p^0.7
    hard = pass_at_k_table(_simulated([0], new_share=0.25, gamma=0.7), n_boot=100).filter(
        pl.col("strategy") == "hard").row(0, named=True)
    assert hard["beyond_sharpening"] > 3 and hard["beyond_sharpening_ci_low"] > 1
    assert hard["verdict"] == "beyond sharpening (one seed)"
    assert hard["beyond_sharpening"] == pytest.approx(hard["beyond_base_pct"] - hard["predicted_beyond_base_pct"])
    three = pass_at_k_table(_simulated([1, 2, 3], new_share=0.25, gamma=0.7)).filter(
        pl.col("strategy") == "hard").row(0, named=True)
    assert three["verdict"] == "beyond sharpening"


def test_the_null_pools_every_seeds_base_samples_and_separates_what_one_seeds_eight_cannot():
    # the map's shape: 100 test questions, 8 base samples a seed over 8 seeds, 2 samples a checkpoint; 15 % of
    # the questions newly solvable. With each seed's own 8 base samples (the null before pooling) this draw
    # read "not separated" (difference +2.3, interval from -1.5); pooled over the 64 it is beyond sharpening
    new = pass_at_k_table(_simulated(range(8), n_questions=100, base_k=8, n=2, new_share=0.15, gamma=0.7))
    base, hard = (new.filter(pl.col("strategy") == s).row(0, named=True) for s in ("base", "hard"))
    assert base["n_samples"] == base["base_samples"] == hard["base_samples"] == 64
    assert hard["verdict"] == "beyond sharpening" and hard["beyond_sharpening_ci_low"] > 2
    # and exact sharpening of the same shape stays not separated, in each of four test sets
    for questions in range(4):
        null = pass_at_k_table(_simulated(range(8), n_questions=100, base_k=8, n=2, gamma=0.7, questions=questions))
        assert null.filter(pl.col("strategy") == "hard")["verdict"].to_list() == ["not separated from sharpening"]


def test_no_null_without_a_base_sample_spread():
    # one base sample per question fixes the Beta's mean only; fewer than 20 questions are not fitted
    assert pass_at_k_table(_simulated([0], base_k=1))["verdict"].null_count() == 2
    assert pass_at_k_table(_simulated([0], n_questions=19))["gamma"].null_count() == 2


def test_the_verdict_in_words():
    assert null_verdict(0.5, 2.0, 3) == "beyond sharpening"
    assert null_verdict(-2.0, -0.5, 1) == "below sharpening (one seed)"
    assert null_verdict(-1.0, 1.0, 2) == "not separated from sharpening"
    assert null_verdict(math.nan, math.nan, 2) is None and null_verdict(None, None, 1) is None


def test_the_figure_draws_each_strategy_s_null(tmp_path, monkeypatch):
    table = pass_at_k_table(_simulated([1, 2], n_questions=60, base_k=16, n=4))
    csv = tmp_path / "pass_at_k.csv"
    table.write_csv(csv)
    figures, real_save = [], P.save_figure
    monkeypatch.setattr(P.drawing, "save_figure",
                        lambda fig, paths, st: figures.append(fig) or real_save(fig, paths, st))
    paths = P.plot_pass_at_k(pl.read_csv(csv), [tmp_path / "pass_at_k.png"], {"dpi": 60})
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the base, the trained curve and its null: dashed, in the trained curve's colour, up to its 4 samples
    lines = {line.get_label(): line for line in figures[0].axes[0].get_lines()}
    assert list(lines) == ["base model", "hard (final)", "_hard null"]
    null, final = lines["_hard null"], lines["hard (final)"]
    assert list(null.get_xdata()) == [1, 2, 4] and null.get_linestyle() == "--"
    assert null.get_color() == final.get_color() and final.get_linestyle() == "-"
    legend = [t.get_text() for t in figures[0].legends[0].get_texts()]
    assert legend[-1].startswith("sharpening null")
