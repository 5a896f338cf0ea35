"""The survey of tasks by probing (hardex.report.survey): each task's shares never, always and sometimes solved
and its expected share of mixed groups, per tier and over its pool, and its figure."""

from __future__ import annotations

import polars as pl
import pytest

from hardex.metrics import expected_mixed
from hardex.report.plots import plot_survey
from hardex.report.survey import survey_table


def probe(counts: list[int], tiers: list | None = None, k: int = 8) -> pl.DataFrame:
    df = pl.DataFrame({"id": [str(i) for i in range(len(counts))], "k": [k] * len(counts), "n_correct": counts,
                       "pass_rate": [c / k for c in counts], "greedy_correct": [c > k // 2 for c in counts]})
    return df.with_columns(pl.Series("tier", tiers)) if tiers is not None else df


def test_shares_and_the_expected_mixed_share_per_task_and_tier():
    table = survey_table({("m", "easy"): probe([8, 8, 8, 4]), ("m", "mixed"): probe([0, 0, 3, 5], [0, 0, 2, 2])},
                         {"m": 8})
    # tasks by their pool's expected mixed share, largest first, each tier after the task's whole pool
    assert table.select("task", "tier").rows() == [("mixed", "all"), ("mixed", "0"), ("mixed", "2"), ("easy", "all")]
    mixed = table.row(0, named=True)
    assert (mixed["n"], mixed["never"], mixed["always"], mixed["between"]) == (4, 50.0, 0.0, 50.0)
    assert mixed["pass_rate"] == pytest.approx(100 * 8 / 32)
    assert mixed["expected_mixed"] == pytest.approx(100 * (expected_mixed(3, 8, 8) + expected_mixed(5, 8, 8)) / 4)
    assert mixed["greedy"] == pytest.approx(25.0)
    level2 = table.row(2, named=True)
    assert (level2["n"], level2["never"], level2["between"]) == (2, 0.0, 100.0)
    easy = table.row(3, named=True)
    assert (easy["always"], easy["between"]) == (75.0, 25.0)
    # the group size matters: a group of 2 of an example right half the time mixes less often than one of 8
    assert easy["expected_mixed"] == pytest.approx(25.0)
    assert survey_table({("m", "easy"): probe([8, 8, 8, 4])}, {"m": 2})["expected_mixed"][0] == pytest.approx(
        100 * expected_mixed(4, 8, 2) / 4)


def test_the_survey_figure_is_drawn(tmp_path):
    table = survey_table({("m", "a"): probe([0, 4, 8, 2], [0, 0, 1, 1]), ("m", "b"): probe([0, 0, 0, 1])}, {"m": 8})
    (path,) = plot_survey(table, [tmp_path / "survey.png"])
    assert path.stat().st_size > 10_000
