"""Pass rates as Beta posteriors (hardex.posterior): the closed form against scipy and Monte Carlo, the
pool's prior against scipy's optimiser, and what a 0 of 8 predicts on a pool like the real model's."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import integrate, optimize, special, stats

from hardex.metrics import expected_mixed
from hardex.posterior import (
    JEFFREYS,
    MIN_FIT_EXAMPLES,
    expected_mixed_posterior,
    fit_prior,
    mixed_share,
    with_posterior,
)

# SmolLM2-135M's probe of 100 sums at K = 8 (docs/results-real-model/pool_pass_rates.md): examples per count
REAL_POOL = {0: 45, 1: 17, 2: 7, 3: 9, 4: 12, 5: 5, 6: 4, 7: 1, 8: 0}


def _real_counts() -> np.ndarray:
    return np.repeat(list(REAL_POOL), list(REAL_POOL.values()))


@pytest.mark.parametrize("a, b, g", [(0.5, 8.5, 8), (1.3, 2.2, 16), (40.0, 3.0, 4), (0.48, 9.97, 8)])
def test_the_closed_form_is_the_integral_and_what_sampling_finds(a, b, g):
    integral = integrate.quad(lambda p: (1 - p**g - (1 - p) ** g) * stats.beta.pdf(p, a, b), 0, 1, limit=200)[0]
    assert expected_mixed_posterior(a, b, g) == pytest.approx(integral, abs=1e-6)
    p = np.random.default_rng(0).beta(a, b, 200_000)
    groups = np.random.default_rng(1).binomial(g, p)  # right answers in a group of g
    assert expected_mixed_posterior(a, b, g) == pytest.approx(np.mean((groups > 0) & (groups < g)), abs=0.005)


def test_the_prior_is_the_beta_binomial_maximum_likelihood_fit():
    c = _real_counts()

    def nll(t):
        a, b = np.exp(t)
        return -np.sum(special.betaln(a + c, b + 8 - c) - special.betaln(a, b))

    a_ref, b_ref = np.exp(optimize.minimize(nll, [0.0, 0.0], method="Nelder-Mead", options={"xatol": 1e-8}).x)
    a, b, method = fit_prior([8] * c.size, c)
    assert method == "empirical_bayes"
    assert (a, b) == (pytest.approx(a_ref, rel=1e-3), pytest.approx(b_ref, rel=1e-3))
    # a large pool drawn from a known Beta gives it back
    rng = np.random.default_rng(3)
    p = rng.beta(2.0, 6.0, 5000)
    a, b, _ = fit_prior([8] * p.size, rng.binomial(8, p))
    assert (a, b) == (pytest.approx(2.0, rel=0.15), pytest.approx(6.0, rel=0.15))


def test_a_small_pool_gets_jeffreys_prior_and_a_pool_that_never_solves_predicts_no_mixing():
    assert fit_prior([8] * (MIN_FIT_EXAMPLES - 1), [0] * (MIN_FIT_EXAMPLES - 1)) == (*JEFFREYS, "jeffreys")
    a, b, _ = fit_prior([8] * 200, [0] * 200)  # 1600 samples, none right: a 0 of 8 here is a 0
    assert expected_mixed_posterior(a, b + 8, 8) < 0.01


def test_on_the_real_models_pool_a_0_of_8_predicts_mixing_where_the_raw_count_predicts_none():
    """The hard subset of docs/results-real-model.md: 0 of 8 in the probe, G = 8. The raw count says its groups
    never mix; the posterior under the pool's prior says a quarter of them do (what the base model gives at
    step 1; training then lifts it: the run measured 59 % over its 16 steps)."""
    probe = pl.DataFrame({"id": [f"e{i}" for i in range(100)], "k": [8] * 100, "n_correct": _real_counts()})
    probe, prior = with_posterior(probe.with_columns(pass_rate=pl.col("n_correct") / 8))
    zeros = probe.filter(pl.col("n_correct") == 0)
    assert prior["method"] == "empirical_bayes"
    assert expected_mixed(0, 8, 8) == 0.0
    assert mixed_share(zeros, 8) == pytest.approx(0.25, abs=0.01)
    assert expected_mixed_posterior(0.5, 8.5, 8) == pytest.approx(0.29, abs=0.01)  # Jeffreys, blind to the pool
    assert zeros["posterior_mean"].to_list() == pytest.approx([prior["a"] / (prior["a"] + prior["b"] + 8)] * 45)


def test_the_posterior_predicts_what_groups_of_the_0_of_8_examples_really_mix():
    """A pool like the real model's (pass rates drawn from the Beta fitted to it, spread low), probed at K = 8:
    for the examples never solved, the posterior's prediction lands within 3 points of the share of
    mixed groups of 8 their true pass rates give, which the raw count puts at 0."""
    rng = np.random.default_rng(7)
    p = rng.beta(0.48, 1.97, 3000)
    c = rng.binomial(8, p)
    probe, _ = with_posterior(pl.DataFrame({"id": [str(i) for i in range(p.size)], "k": [8] * p.size,
                                            "n_correct": c, "pass_rate": c / 8}))
    never = c == 0
    truth = float(np.mean(1 - p[never] ** 8 - (1 - p[never]) ** 8))
    assert truth > 0.2
    assert mixed_share(probe.filter(pl.col("n_correct") == 0), 8) == pytest.approx(truth, abs=0.03)
