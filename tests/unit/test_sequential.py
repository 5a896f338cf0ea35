"""The group-sequential seeds design: its looks and levels, its verdicts, the runs that get more seeds, and
by simulation that its false verdicts stay under alpha over all looks where stopping at the first
significant look does not."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from hardex import sequential, statistics
from hardex.report.pairwise import pair_verdict
from hardex.sequential import Design, LookTest, Verdict, decide, design_of, runs_needing_seeds, spent_alpha

ALPHA, MARGIN, STUDIES = 0.05, 5.0, 4000
DESIGN = Design(first=4, batch=2, max=16)
MONTE_CARLO_SE = math.sqrt(ALPHA * (1 - ALPHA) / STUDIES)


def look_p_values(differences: np.ndarray, design: Design, margin: float = MARGIN) -> tuple[np.ndarray, ...]:
    """(means, p, p_equivalence), each looks x ... , of `t_test_p` at every look, for whole arrays of
    studies at once (differences: ... x seeds); `t_test_p` itself takes 0.2 ms a call."""
    means, ps, equivalence = [], [], []
    for n in design.looks:
        v = differences[..., :n]
        mean, se = v.mean(axis=-1), v.std(axis=-1, ddof=1) / math.sqrt(n)
        means.append(mean)
        ps.append(2 * stats.t.sf(np.abs(mean) / se, n - 1))
        equivalence.append(np.maximum(stats.t.sf((mean + margin) / se, n - 1),
                                      stats.t.cdf((mean - margin) / se, n - 1)))
    return np.array(means), np.array(ps), np.array(equivalence)


def rule_verdicts(differences: np.ndarray, design: Design = DESIGN) -> list[dict]:
    """The library's stopping rule on each simulated study (studies x comparisons x seeds)."""
    means, ps, equivalence = look_p_values(differences, design)
    out = []
    for i in range(differences.shape[0]):
        tests = {c: [LookTest(n, means[k, i, c], ps[k, i, c], equivalence[k, i, c]) for k, n in enumerate(design.looks)]
                 for c in range(differences.shape[1])}
        out.append(sequential.verdicts_from_tests(design, tests, ALPHA, MARGIN))
    return out


def null_family(rng: np.random.Generator, comparisons: int, sd: float = 10.0, true: float = 0.0) -> np.ndarray:
    """Studies x comparisons x seeds: each strategy's run minus one shared reference run (as a study
    compares its strategies), seed noise of sd/sqrt(2) per run, so each difference has sd `sd`."""
    runs = rng.normal(0.0, sd / math.sqrt(2), size=(STUDIES, comparisons + 1, DESIGN.max))
    return runs[:, 1:] - runs[:, :1] + true


def test_the_lookup_p_values_are_those_of_t_test_p():
    differences = np.random.default_rng(1).normal(3.0, 10.0, size=(3, 1, DESIGN.max))
    means, ps, equivalence = look_p_values(differences, DESIGN)
    for k, n in enumerate(DESIGN.looks):
        for i in range(3):
            p, p_equivalence = statistics.t_test_p(differences[i, 0, :n], MARGIN)
            assert (ps[k, i, 0], equivalence[k, i, 0]) == pytest.approx((p, p_equivalence))


@pytest.mark.parametrize("comparisons", [1, 5])
def test_no_difference_is_called_a_difference_more_often_than_alpha_over_all_looks(comparisons):
    differences = null_family(np.random.default_rng(45), comparisons)
    verdicts = rule_verdicts(differences)
    false = np.mean([any(v.verdict.startswith(sequential.DIFFERS) for v in study.values()) for study in verdicts])
    # the naive rule: stop at the first look whose two-sided 95 % t interval excludes zero (p < 0.05)
    naive = (look_p_values(differences, DESIGN)[1] < ALPHA).any(axis=0).any(axis=-1).mean()
    print(f"{comparisons} comparison(s), {STUDIES} studies: sequential rule {false:.4f}, naive rule {naive:.4f}")
    assert false <= ALPHA + 3 * MONTE_CARLO_SE
    assert naive > ALPHA + 3 * MONTE_CARLO_SE


def test_the_simulation_fails_a_rule_that_looks_at_full_alpha_every_time(monkeypatch):
    monkeypatch.setattr(sequential, "spent_alpha", lambda design, alpha: [alpha] * len(design.looks))
    verdicts = rule_verdicts(null_family(np.random.default_rng(45), 1))
    false = np.mean([v[0].verdict == sequential.DIFFERS for v in verdicts])
    assert false > ALPHA + 3 * MONTE_CARLO_SE


def test_a_difference_at_the_margin_is_called_equivalent_at_most_alpha_of_the_time():
    verdicts = rule_verdicts(null_family(np.random.default_rng(46), 1, sd=6.0, true=MARGIN))
    false = np.mean([f"within ±{MARGIN:g}" in v[0].verdict for v in verdicts])  # "differs, within" claims it too
    print(f"true difference at the margin, {STUDIES} studies: called equivalent {false:.4f}")
    assert false <= ALPHA + 3 * MONTE_CARLO_SE  # every look at full alpha: 0.124


def test_a_large_difference_is_decided_early_and_a_small_noise_ends_equivalent():
    verdicts = [v[0] for v in rule_verdicts(null_family(np.random.default_rng(47), 1, true=20.0))]
    # two standard deviations: "differs" by the fourth look (10 seeds) in most studies (89 % here)
    assert np.mean([v.verdict == sequential.DIFFERS and v.look <= 4 for v in verdicts]) > 0.8
    assert all(v.final for v in verdicts if v.decided)
    rng = np.random.default_rng(48)
    verdict = decide(DESIGN, {"hard-full": dict(enumerate(rng.normal(0.0, 1.0, 16)))}, ALPHA, MARGIN)["hard-full"]
    assert verdict.verdict == "equivalent within ±5" and verdict.final and verdict.seeds < 16


def test_the_verdict_words_are_pair_verdicts():
    rng = np.random.default_rng(49)
    for true, sd in ((20.0, 10.0), (0.0, 1.0)):
        v = decide(DESIGN, {"c": dict(enumerate(rng.normal(true, sd, 16)))}, ALPHA, MARGIN)["c"]
        row = {"n_seeds": v.seeds, "p_holm": v.p, "p_equivalence_holm": v.p_equivalence}  # Holm of one is the p
        assert v.decided and v.verdict == pair_verdict(row, v.level, MARGIN)


def test_too_few_seeds_stay_undecided_and_the_design_goes_on():
    few = decide(DESIGN, {"c": {0: 1.0, 1: 30.0, 2: -4.0}, "none": {}}, ALPHA, MARGIN)
    assert few["c"] == Verdict("undecided at 3 seeds", 3, 0, False) and few["none"].verdict == "undecided at 0 seeds"
    rng = np.random.default_rng(50)
    noisy = dict(enumerate(rng.normal(0.0, 30.0, 16)))
    at_six = decide(DESIGN, {"c": {s: noisy[s] for s in range(7)}}, ALPHA, MARGIN)["c"]  # seed 6 alone: no look
    assert (at_six.verdict, at_six.look, at_six.final) == ("undecided at 6 seeds", 2, False)
    at_max = decide(DESIGN, {"c": noisy}, ALPHA, MARGIN)["c"]
    assert (at_max.verdict, at_max.look, at_max.final) == ("undecided at 16 seeds", 7, True)


def test_a_look_waits_for_every_open_comparison_and_a_decided_one_does_not_hold_it_up():
    rng = np.random.default_rng(51)
    clear, noisy = dict(enumerate(rng.normal(0.0, 0.1, 16))), dict(enumerate(rng.normal(0.0, 30.0, 16)))
    verdicts = decide(DESIGN, {"clear": {s: clear[s] for s in range(4)}, "noisy": {s: noisy[s] for s in range(10)},
                               "lagging": {s: noisy[s] for s in range(6)}}, ALPHA, MARGIN)
    assert verdicts["clear"].verdict == "equivalent within ±5" and verdicts["clear"].look == 1  # no seeds after 4
    assert verdicts["noisy"].verdict == "undecided at 6 seeds"  # look 3 waits for "lagging"'s seeds 6 and 7


def test_a_decided_verdict_that_changes_is_an_error():
    rng = np.random.default_rng(52)
    differences = dict(enumerate(rng.normal(20.0, 1.0, 16)))
    before = decide(DESIGN, {"c": differences}, ALPHA, MARGIN)
    assert decide(DESIGN, {"c": differences}, ALPHA, MARGIN, history=before) == before
    with pytest.raises(ValueError, match="comparison c: decided 'differs'"):
        decide(DESIGN, {"c": {s: 0.1 * (-1) ** s for s in differences}}, ALPHA, MARGIN, history=before)
    with pytest.raises(ValueError, match="now 'undecided at 0 seeds'"):
        decide(DESIGN, {"c": {s: d for s, d in differences.items() if s != 0}}, ALPHA, MARGIN, history=before)


def test_decided_comparisons_release_their_runs_and_the_base_model_never_needs_seeds():
    comparisons = {"hard-full": ("hard", "full"), "hard-base": ("hard", "base"), "random-full": ("random", "full"),
                   "easy-random": ("easy", "random")}
    verdicts = {"hard-full": Verdict("differs", 6, 2, True), "hard-base": Verdict("undecided at 6 seeds", 6, 2, False),
                "random-full": Verdict("undecided at 16 seeds", 16, 7, True)}  # easy-random: no verdict yet
    assert runs_needing_seeds(verdicts, comparisons) == {"hard", "easy", "random"}
    decided = {"hard-base": Verdict("equivalent within ±5", 4, 1, True)}
    assert runs_needing_seeds(decided, {"hard-base": ("hard", "base")}) == set()


def test_designs_are_read_from_the_seeds_mapping_and_a_list_stays_fixed():
    assert design_of([0, 1, 2]) is None
    design = design_of({"first": 4, "batch": 3, "max": 12})
    assert design.looks == [4, 7, 10, 12] and design.seeds_at(2) == list(range(7))
    assert Design(4, 2, 4).looks == [4] and Design(4, 2, 16).looks == [4, 6, 8, 10, 12, 14, 16]
    for bad, key in (({"first": 1, "batch": 2, "max": 8}, "first"), ({"first": 4, "batch": 0, "max": 8}, "batch"),
                     ({"first": 4, "batch": 2}, "max"), ({"first": 4, "batch": 2, "max": 3}, "max"),
                     ({"first": 4.5, "batch": 2, "max": 8}, "first"),
                     ({"first": 4, "batch": 2, "max": 8, "min": 2}, "min")):
        with pytest.raises(ValueError, match=rf"^seeds\.{key}:"):
            design_of(bad)


def test_the_spent_levels_are_positive_sum_to_alpha_and_keep_most_for_the_last_look():
    levels = spent_alpha(DESIGN, ALPHA)
    assert all(level > 0 for level in levels) and sum(levels) == pytest.approx(ALPHA)
    # Haybittle-Peto: 0.001 at each of the six interim looks, the rest (0.044) at the last
    assert levels[:-1] == [sequential.INTERIM_ALPHA] * 6 and levels[-1] == pytest.approx(ALPHA - 0.006)
    # so many looks that 0.001 each would take over half of alpha: the interim levels shrink
    many = spent_alpha(Design(2, 1, 60), ALPHA)
    assert sum(many[:-1]) == pytest.approx(ALPHA / 2) and many[-1] == pytest.approx(ALPHA / 2)
    assert spent_alpha(Design(4, 2, 4), ALPHA) == pytest.approx([ALPHA])
