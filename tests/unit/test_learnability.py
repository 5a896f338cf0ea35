"""What a pool or subset gives GRPO to learn (hardex.learnability), on the forms a real model writes."""

from __future__ import annotations

import polars as pl
import pytest

from hardex.learnability import UnlearnableSubsetError, check_learnable, probe_report, tie, tie_line
from hardex.report import tables
from hardex.tasks import get_task


def _probe(rates: list[float], k: int = 4) -> pl.DataFrame:
    return pl.DataFrame({"id": [f"e{i}" for i in range(len(rates))], "k": [k] * len(rates),
                         "n_correct": [round(r * k) for r in rates], "pass_rate": rates})


# what SmolLM2-135M-Instruct wrote when asked for \boxed{} (probe samples of "What is a + b?")
SMOL_COMPLETIONS = ["1 + 5 = 6", "8 + 6 = 14, so the final answer is 14.", "7 + 5 = \\boxed{} 20",
                    "The answer to your question is \\boxed{}.", "27 + 46 = 101."]


def test_a_pool_that_teaches_nothing_is_said_so_with_what_the_completions_look_like():
    task = get_task("addition", "lenient")
    pool = pl.DataFrame({"id": ["e0", "e1", "e2", "e3", "e4"], "answer": ["6", "14", "12", "3", "73"]})
    counts = _probe([0.0] * 5, k=1)
    samples = pl.DataFrame({"id": pool["id"], "sample": [0] * 5, "completion": SMOL_COMPLETIONS,
                            "correct": [False] * 5, "tokens": [5] * 5})
    lines = probe_report(counts, samples, pool, task)
    assert lines[0].startswith("learnable: 0 of 5 pool examples (0.0 %)")
    assert any(line.startswith("WARNING: 0.0 % of the pool is learnable") for line in lines)
    # an empty box (the instruction echoed) is no answer: none of the five answers in a box
    assert any("in the form this task scores (scoring 'lenient'): 0 of 5; right: 0 of 5" in line for line in lines)
    assert any("scoring: flexible" in line for line in lines)
    assert any("1 + 5 = 6" in line for line in lines)
    # a pool with mixed examples gets its share and no warning
    assert len(probe_report(_probe([0.0, 0.5, 1.0]), samples, pool, task)) == 1


def test_a_subset_without_a_learnable_example_is_refused_unless_accepted_by_name():
    with pytest.raises(UnlearnableSubsetError, match=r"selection.allow_unlearnable: \[hard\]"):
        check_learnable(_probe([0.0, 0.0, 1.0]), "hard", allowed=False)
    assert "accepted" in check_learnable(_probe([0.0, 0.0]), "hard", allowed=True)
    assert check_learnable(_probe([0.0, 0.25]), "hard", allowed=False).startswith("1 of 2 examples")


def test_strategies_that_collapse_into_one_tie_are_named():
    probe = _probe([0.0] * 6 + [0.5, 1.0])
    hard = probe.head(2)
    assert tie(hard, probe) == (0.0, 6)
    assert "tie at pass rate 0 with 4 more" in tie_line("hard", hard, probe)
    assert tie(probe.tail(2), probe) is None  # two pass rates: ranked, not a tie
    assert tie(probe.slice(6, 1), probe) is None  # the only example at 0.5: nothing else to draw
    subsets = pl.concat([hard.with_columns(pl.lit(s).alias("strategy")) for s in ("hard", "medium")])
    cell = dict(model="m", task="t")
    subsets = subsets.with_columns(**{k: pl.lit(v) for k, v in cell.items()}, seed=pl.lit(0))
    probes = probe.with_columns(**{k: pl.lit(v) for k, v in cell.items()})
    table = tables.subset_pass_rates(probes, subsets)
    assert table.filter(pl.col("strategy") != "pool")["tied_at"].to_list() == [0.0, 0.0]
    assert table.filter(pl.col("strategy") == "hard")["learnable_examples"].item() == 0
    assert "m/t hard at 0; m/t medium at 0" in tables.ties_note(table)
