"""What a pool or subset gives GRPO to learn (hardex.learnability), on the forms a real model writes."""

from __future__ import annotations

import polars as pl
import pytest

from hardex.io import read_parquet, read_parquet_metadata, write_parquet_atomic
from hardex.learnability import (
    UnlearnableSubsetError,
    check_learnable,
    probe_report,
    sampling_mismatch,
    tie,
    tie_line,
    with_probe_posterior,
)
from hardex.posterior import with_posterior
from hardex.probing import PROVENANCE_KEY, probe_provenance
from hardex.report.pool import subset_pass_rates, ties_note
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
    table = subset_pass_rates(probes, subsets)
    assert table.filter(pl.col("strategy") != "pool")["tied_at"].to_list() == [0.0, 0.0]
    assert table.filter(pl.col("strategy") == "hard")["learnable_examples"].item() == 0
    assert "m/t hard at 0; m/t medium at 0" in ties_note(table)


def _pool(counts: dict[int, int], k: int = 8) -> pl.DataFrame:
    c = [n for n, times in counts.items() for _ in range(times)]
    return pl.DataFrame({"id": [f"e{i}" for i in range(len(c))], "k": [k] * len(c), "n_correct": c,
                         "pass_rate": [x / k for x in c]})


def test_the_refusal_reads_the_posterior_at_grpos_group_size_not_the_raw_count():
    # the real model's pool (docs/results-real-model.md): its hard subset, 0 of 8 each, is not refused
    pool = _pool({0: 45, 1: 17, 2: 7, 3: 9, 4: 12, 5: 5, 6: 4, 7: 1})
    hard = with_probe_posterior(pool.filter(pl.col("n_correct") == 0).head(10).select("id", "pass_rate"), pool)
    line = check_learnable(hard, "hard", allowed=False, group_size=8)
    assert line == ("expected share of mixed groups 0.25 at G=8 from the posterior; 0 of 10 examples have "
                    "0 < pass rate < 1 in the probe")
    # a pool that never solves anything: its zeros are zeros, refused with the number and the key
    none = _pool({0: 100})
    subset = with_probe_posterior(none.head(10).select("id", "pass_rate"), none)
    with pytest.raises(UnlearnableSubsetError, match=r"expected share of mixed groups 0.00 at G=8 from the posterior, "
                                                     r"below 0.05 .*selection.allow_unlearnable: \[hard\]"):
        check_learnable(subset, "hard", allowed=False, group_size=8)
    assert "accepted by selection.allow_unlearnable (hard)" in check_learnable(subset, "hard", True, 8)
    # a subset file from before the posterior columns: the raw rule
    with pytest.raises(UnlearnableSubsetError, match="no learnable example"):
        check_learnable(none.head(10).select("id", "pass_rate"), "hard", allowed=False, group_size=8)


def test_a_probe_that_samples_otherwise_than_grpo_is_said_so_and_nothing_fails():
    grpo = {"temperature": 0.7, "top_p": 1.0, "max_completion_length": 48}
    same = {"temperature": 0.7, "top_p": 1.0, "max_new_tokens": 48}
    assert sampling_mismatch(same, grpo) is None
    assert sampling_mismatch(None, grpo) is None  # a table from before provenance was recorded
    line = sampling_mismatch({**same, "temperature": 1.0, "max_new_tokens": 40}, grpo)
    assert line.startswith("WARNING: the probe did not sample as GRPO does: temperature 1 in the probe vs 0.7 in "
                           "GRPO (probe.temperature, grpo.temperature); max length 40 in the probe vs 48 in GRPO "
                           "(probe.max_new_tokens, grpo.max_completion_length).")


def test_the_probe_table_carries_its_provenance_and_posterior_through_a_file(tmp_path):
    pool, prior = with_posterior(_pool({0: 15, 2: 10}))
    provenance = probe_provenance({"k": 8, "temperature": 1.0, "top_p": 0.95, "max_new_tokens": 40, "seed": 3},
                                  {"model": "abc123", "dtype": "float32", "backend": "hf",
                                   "scorer": ["addition", "flexible"]}, prior)
    path = tmp_path / "probe.parquet"
    write_parquet_atomic(pool, path, metadata={PROVENANCE_KEY: provenance})
    assert read_parquet_metadata(path, PROVENANCE_KEY) == provenance
    assert provenance["model_fingerprint"] == "abc123" and provenance["prior"]["method"] == "empirical_bayes"
    assert read_parquet(path).columns == ["id", "k", "n_correct", "pass_rate", "posterior_a", "posterior_b",
                                          "posterior_mean"]
    plain = tmp_path / "old.parquet"
    write_parquet_atomic(pool, plain)
    assert read_parquet_metadata(plain, PROVENANCE_KEY) is None
    # the select job's subset carries the same provenance to the train job
    assert sampling_mismatch(read_parquet_metadata(path, PROVENANCE_KEY),
                             {"temperature": 1.0, "top_p": 0.95, "max_completion_length": 40}) is None
