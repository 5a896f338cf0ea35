"""The report's headline: which strategy gained how much beyond form, read from intervals, never from
point estimates alone."""

from __future__ import annotations

import polars as pl
import pytest

from hardex.report import tables
from hardex.report.headline import headline_table
from tests.unit.test_controls import results


def difference(res, summary, n_boot):
    """The report's paired difference between two strategies (as tables.build_tables passes it)."""
    gain_of = tables.gains_by_run(summary)
    return lambda m, t, a, b: tables.run_difference(res, gain_of, m, t, a, b, n_boot=n_boot)


def headline(final, n_boot=500):
    res = results(final)
    summary = tables.run_summary(res)
    gains = tables.gain_beyond_controls(tables.gain_table(res, summary=summary, n_boot=n_boot), summary, res,
                                        n_boot=n_boot)
    df, note = headline_table(gains, difference(res, summary, n_boot))
    return {r["strategy"]: r for r in df.rows(named=True)}, note


def test_three_seeds_a_gain_beyond_form_and_a_lead_that_is_shown():
    # base 5 of 10 each seed; full ends 9, 10, 10 (gains 40, 50, 50), its format control 6, 6, 7, random 7, 7, 8
    final = {("full", s): r for s, r in enumerate([9, 10, 10])}
    final |= {("full_format", s): r for s, r in enumerate([6, 6, 7])}
    final |= {("random", s): r for s, r in enumerate([7, 7, 8])}
    rows, note = headline(final)
    assert set(rows) == {"full", "random"}  # the control is read through its strategy, not a row of its own
    full, random = rows["full"], rows["random"]
    assert full["gain"] == pytest.approx(46.67, abs=0.01) and full["interval"] == "t over 3 seeds"
    assert full["control"] == "full_format" and full["beyond_form"] == pytest.approx(33.33, abs=0.01)
    assert full["beyond_form_ci_low"] > 0 and full["verdict"] == "gains beyond form"
    assert full["behind_best"] is None  # it is the best
    assert random["behind_best"] == pytest.approx(23.33, abs=0.01) and random["behind_best_ci_low"] > 0
    assert random["verdict"] == "gains; form not separated (no control run)"
    assert note.startswith("m on t: full gained most, +46.7 [")
    assert "beyond its control full_format (shown)" in note and "it beats every other strategy" in note


def test_one_seed_reads_intervals_over_questions_and_says_not_shown():
    # one seed: full 7 of 10 against base 5 and its control 6: a bootstrap over 10 questions cannot tell
    rows, note = headline({("full", 0): 7, ("full_format", 0): 6, ("hard", 0): 6, ("random", 0): 3})
    full = rows["full"]
    assert full["interval"] == "bootstrap over 10 examples"
    assert full["verdict"] == "gain not shown" and full["gain_ci_low"] <= 0
    assert rows["random"]["verdict"] == "gain not shown"  # -20 on 10 questions, interval reaches zero
    assert "(not shown above zero)" in note and "(not shown)" in note
    assert "which strategy wins is not shown" in note


def test_a_loss_is_called_a_loss():
    rows, _ = headline({("hard", s): 1 for s in range(3)} | {("random", s): r for s, r in enumerate([5, 6, 5])})
    assert rows["hard"]["verdict"] == "loses"


def test_a_strategy_with_a_control_is_read_beyond_it_even_when_another_gained_most():
    rows, note = headline({("random", 0): 9, ("full", 0): 7, ("full_format", 0): 6})
    assert note.startswith("m on t: random gained most, +40.0 [") and "no control run to separate form" in note
    assert " full gained +20.0 [" in note and "+10.0 [" in note and "beyond its control full_format (not shown)." in note
    assert rows["full"]["behind_best"] == pytest.approx(20.0)


def test_one_seed_intervals_do_not_depend_on_the_order_of_the_result_rows():
    """A bootstrap resamples positions: questions must line up in one order however the files list them
    (the default's report once gave [+9.4, +20.4] and, rebuilt from the same files, [+9.6, +20.8])."""
    res = results({("full", 0): 7, ("full_format", 0): 6, ("random", 0): 3})
    shuffled = res.__class__(res.runs.sample(fraction=1.0, shuffle=True, seed=3), res.base.reverse(), res.steps,
                             res.benchmarks)
    for r in (res, shuffled):
        r.runs = r.runs.with_columns(pl.when(pl.col("id").is_in(["q1", "q8"])).then(1 - pl.col("n_correct"))
                                     .otherwise(pl.col("n_correct")).alias("n_correct"))  # unequal questions
    tables_of = []
    for r in (res, shuffled):
        summary = tables.run_summary(r)
        gains = tables.gain_beyond_controls(tables.gain_table(r, summary=summary, n_boot=200), summary, r, n_boot=200)
        tables_of.append((gains, headline_table(gains, difference(r, summary, 200))[0]))
    assert tables_of[0][0].equals(tables_of[1][0]) and tables_of[0][1].equals(tables_of[1][1])
