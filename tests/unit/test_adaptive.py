"""Adaptive probing: the samples an example gets are full probing's first samples, it saves
samples, and its stopping decisions settle correctly on constructed cases."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from hardex.adaptive import (
    adaptive_decisions,
    adaptive_rounds,
    boundary_indices,
    final_rate_interval,
    probe_pool_adaptive,
    rate_interval,
)
from hardex.probing import probe_pool
from hardex.schema import schema_defaults
from hardex.selection import select

CFG = {**schema_defaults("probe", "adaptive"), "strategies": ["hard", "easy"], "enabled": True, "budget": 0.1}


def simulated(n: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    p = rng.beta(0.5, 0.5, size=n)
    return rng.uniform(size=(n, k)) < p[:, None]


def table(taken, correct):
    n = len(taken)
    return pl.DataFrame({"id": [f"e{i}" for i in range(n)], "k": taken, "n_correct": correct,
                         "pass_rate": correct / np.maximum(taken, 1), "greedy_correct": [True, False] * (n // 2)})


@pytest.mark.parametrize("method", ["empirical_bayes", "wilson", "clopper_pearson"])
def test_rounds_take_the_first_samples_and_save(method):
    k, n = 8, 400
    out = simulated(n, k)
    seen = []

    def draw(idx, first, take):
        seen.append((idx.copy(), first, take))
        return out[idx, first : first + take]

    taken, correct, history = adaptive_rounds(n, k, {**CFG, "method": method}, [0.1], draw, log=lambda *a: None)
    # every example's samples are exactly its first `taken` samples, in order, none twice
    per_example = [[] for _ in range(n)]
    for idx, first, take in seen:
        for i in idx:
            assert len(per_example[i]) == first
            per_example[i] += list(range(first, first + take))
    assert all(per_example[i] == list(range(taken[i])) for i in range(n))
    assert (correct == np.array([out[i, : taken[i]].sum() for i in range(n)])).all()
    assert taken.min() >= CFG["min_samples"] and taken.max() <= k
    assert taken.sum() < n * k  # it saves samples
    if method == "empirical_bayes":
        full = table(np.full(n, k), out.sum(1))
        ad = table(taken, correct)
        for s in ("hard", "easy"):
            a, b = set(select(full, s, 0.1, 0)["id"]), set(select(ad, s, 0.1, 0)["id"])
            assert len(a & b) / len(a | b) >= 0.95


def test_intervals():
    lo, hi = rate_interval(5, 10, "wilson", 0.95)
    assert 0.2 < lo < 0.5 < hi < 0.8
    lo_cp, hi_cp = rate_interval(5, 10, "clopper_pearson", 0.95)
    assert lo_cp < lo and hi_cp > hi  # exact interval is wider
    assert rate_interval(0, 4, "clopper_pearson", 0.95)[0] == 0.0
    assert final_rate_interval(3, 8, 8, "wilson", 0.95) == (3 / 8, 3 / 8)  # all samples: no doubt
    lo, hi = final_rate_interval(2, 4, 8, "wilson", 0.95)
    assert 2 / 8 <= lo < hi <= 6 / 8  # within what the 4 remaining samples can do


def test_boundaries_match_selection():
    # hard = the m lowest, easy = the m highest, medium = a window of m around the median
    assert boundary_indices(100, 0.1, ["hard", "easy"]) == [9, 90]
    assert boundary_indices(100, 0.1, ["medium"]) == [45, 54]


def test_decisions_on_constructed_cases():
    """A pool where 25% failed every sample so far, 25% passed every one and the rest sit at 1/2:
    after 4 of 8 samples the middle is settled (it can be neither hard nor easy), the extremes
    are not (their full-8 count decides who is in the 10% at the boundary)."""
    k, n = 8, 200
    taken = np.full(n, 4)
    correct = np.full(n, 2)
    correct[:50] = 0
    correct[50:100] = 4
    for method in ("empirical_bayes", "wilson", "clopper_pearson"):
        settled, cuts = adaptive_decisions(taken, correct, k, {**CFG, "method": method}, [0.1])
        assert settled[100:].all(), method
        assert not settled[:100].any(), method
        assert cuts == [(0.0, 0.0), (1.0, 1.0)], method
    # fewer certain failures than the budget: the boundary may lie above 0, so the middle waits
    correct[:] = 2
    correct[:15] = 0
    settled, cuts = adaptive_decisions(taken, correct, k, CFG, [0.1])
    assert cuts[0][1] >= 2 / 8 and not settled[15:].all()
    # with every sample taken, everything is settled
    settled, _ = adaptive_decisions(np.full(n, k), np.full(n, 3), k, CFG, [0.1])
    assert settled.all()
    # one success puts an example out of a hard set whose boundary is certainly at zero successes
    taken = np.full(n, 8)
    correct = np.full(n, 4)
    correct[:40] = 0  # 20 % of the pool never succeeds: the hard boundary is 0 for sure
    taken[40], correct[40] = 2, 1
    settled, cuts = adaptive_decisions(taken, correct, k, {**CFG, "strategies": ["hard"]}, [0.1])
    assert cuts == [(0.0, 0.0)] and settled[40]
    # ... but not when the easy boundary (4 of 8 here) is also in play: 1 of 2 may end at 4
    settled, cuts = adaptive_decisions(taken, correct, k, CFG, [0.1])
    assert cuts == [(0.0, 0.0), (0.5, 0.5)] and not settled[40]


def test_probe_pool_adaptive_on_the_tiny_model(tmp_path):
    """Real pipeline: adaptive probing's samples equal full probing's samples with the same index,
    and its table keeps the probe-table columns with k = samples taken."""
    from hardex.generation.hf import HFGenerator
    from hardex.models import render_prompt
    from hardex.tasks import get_task
    from tests.support import tiny_model_dir

    task = get_task("arith")
    pool = task.load_split({"name": "pool", "n": 40, "seed": 1, "difficulty": [1, 3]})
    gen = HFGenerator(tiny_model_dir(), device="cpu", dtype="float32", progress=False)
    settings = {"k": 6, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 24, "seed": 3}
    render = lambda text: render_prompt(None, text, False)  # noqa: E731
    full, full_s = probe_pool(pool, task, render, lambda: gen, settings, tmp_path / "full", log=lambda *a: None)
    ad, ad_s = probe_pool_adaptive(pool, task, render, lambda: gen,
                                   {**settings, "adaptive": {**CFG, "budget": 0.2, "min_samples": 2}},
                                   tmp_path / "adaptive", log=lambda *a: None)
    assert ad.columns == full.columns == ["id", "k", "n_correct", "pass_rate", "greedy_correct", "tier", "tokens"]
    for counts, samples in ((ad, ad_s), (full, full_s)):  # an example's tokens: those of its samples
        per_id = samples.group_by("id").agg(pl.col("tokens").sum().alias("sampled"))
        assert counts.join(per_id, on="id")["tokens"].to_list() == counts.join(per_id, on="id")["sampled"].to_list()
        assert (counts["tokens"] >= counts["k"]).all()
    assert ad["id"].to_list() == full["id"].to_list()
    assert ((ad["k"] >= 2) & (ad["k"] <= 6)).all()
    assert ad_s.height == ad["k"].sum()
    joined = ad_s.join(full_s, on=["id", "sample"], suffix="_full")
    assert joined.height == ad_s.height
    assert (joined["completion"] == joined["completion_full"]).mean() >= 0.97
    assert (ad["greedy_correct"] == full["greedy_correct"]).all()
    # resuming replays the saved rounds without a generator
    again, _ = probe_pool_adaptive(pool, task, render, lambda: None,
                                   {**settings, "adaptive": {**CFG, "budget": 0.2, "min_samples": 2}},
                                   tmp_path / "adaptive", log=lambda *a: None)
    assert again.equals(ad)


def test_a_damaged_probe_chunk_is_named_and_probed_again(tmp_path):
    """A chunk cut short once failed every rerun (-f included) without naming the file."""
    from hardex.generation.hf import HFGenerator
    from hardex.models import render_prompt
    from hardex.tasks import get_task
    from tests.support import tiny_model_dir

    task = get_task("swaps")
    pool = task.load_split({"name": "pool", "n": 12, "seed": 1, "difficulty": [0, 2]})
    gen = HFGenerator(tiny_model_dir(), device="cpu", dtype="float32", progress=False)
    settings = {"k": 3, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 16, "seed": 0}
    render = lambda text: render_prompt(None, text, False)  # noqa: E731
    first, _ = probe_pool(pool, task, render, lambda: gen, settings, tmp_path, chunk_size=4, log=lambda *a: None)
    damaged = sorted(tmp_path.glob("chunk00001-*.counts.parquet"))[0]
    with open(damaged, "r+b") as fh:
        fh.truncate(damaged.stat().st_size // 2)
    messages = []
    again, _ = probe_pool(pool, task, render, lambda: gen, settings, tmp_path, chunk_size=4, log=messages.append)
    assert any(str(damaged) in m and "damaged" in m and "probing it again" in m for m in messages), messages
    assert sum(": probed " in m for m in messages) == 1 and sum(": reused " in m for m in messages) == 2
    assert again.equals(first)
