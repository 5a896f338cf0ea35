"""The pairwise table: every pair of strategies of a model x task on final in-distribution accuracy, paired
by seed, with Holm-adjusted p's and a verdict ("differs", "equivalent within ±m" or "undecided": `pair_verdict`,
which the headline and the sequential design's looks share).

Conventions: see `hardex.report`.
"""

from __future__ import annotations

import math

import polars as pl

from hardex.report.catch_up import EQUIVALENCE_MARGIN
from hardex.report.headline import DIFFERS, ONE_SEED
from hardex.report.loading import Results
from hardex.report.runs import gains_by_run, run_comparison
from hardex.selection import RunName, strategy_sort_key
from hardex.statistics import holm

PAIRWISE_SCHEMA = {"model": pl.Utf8, "task": pl.Utf8, "strategy": pl.Utf8, "versus": pl.Utf8, "n_seeds": pl.Int64,
                   "interval": pl.Utf8, "difference": pl.Float64, "difference_ci_low": pl.Float64,
                   "difference_ci_high": pl.Float64, "p": pl.Float64, "p_holm": pl.Float64,
                   "p_equivalence": pl.Float64, "p_equivalence_holm": pl.Float64, "pairs": pl.Int64, "verdict": pl.Utf8}


def pair_verdict(row: dict, alpha: float, margin: float) -> str:
    """A pair's finding from its Holm-adjusted p's: "differs" (of a zero difference), "equivalent within
    +-margin" (TOST), both, or "undecided"; never a finding from one seed or without a shared one."""
    if row["n_seeds"] < 2:
        return f"undecided ({ONE_SEED})" if row["n_seeds"] == 1 else "undecided (no shared seed)"
    differs, same = row["p_holm"] < alpha, row["p_equivalence_holm"] < alpha
    within = f"within ±{margin:g}"
    return f"{DIFFERS}, {within}" if differs and same else DIFFERS if differs else \
        f"equivalent {within}" if same else "undecided"


def pairwise_table(res: Results, summary: pl.DataFrame, level: float = 0.95, n_boot: int = 2000, seed: int = 0,
                   margin: float = EQUIVALENCE_MARGIN) -> pl.DataFrame:
    """Every pair of strategies (not control runs; online runs count) of a model x task on final
    in-distribution accuracy, paired by seed (`run_comparison`: strategy minus versus, paper order), with
    p-values adjusted by Holm's method over the family of that model x task's tested pairs (`pairs`), and
    a verdict at alpha = 1 - level (`pair_verdict`): the strategy that gained most is picked from the same
    data, so an uncorrected interval that excludes zero says less than it seems to."""
    gain_of, rows = gains_by_run(summary), []
    for (model, task), cell in summary.group_by(["model", "task"], maintain_order=True):
        names = sorted({s for s in cell["strategy"] if RunName.parse(s).control is None}, key=strategy_sort_key)
        family = []
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                c = run_comparison(res, gain_of, model, task, a, b, level, n_boot, seed, margin) or {"n_seeds": 0}
                family.append({"model": model, "task": task, "strategy": a, "versus": b, "n_seeds": c["n_seeds"],
                               "interval": c.get("interval"), "difference": c.get("difference"),
                               "difference_ci_low": c.get("ci_low"), "difference_ci_high": c.get("ci_high"),
                               "p": c.get("p", math.nan), "p_equivalence": c.get("p_equivalence", math.nan)})
        adjusted = holm([r["p"] for r in family]), holm([r["p_equivalence"] for r in family])
        tested = sum(math.isfinite(r["p"]) for r in family)
        for r, p, p_equivalence in zip(family, *adjusted):
            r |= {"p_holm": p, "p_equivalence_holm": p_equivalence, "pairs": tested}
            r["verdict"] = pair_verdict(r, 1 - level, margin)
        rows += family
    return pl.DataFrame(rows, schema=PAIRWISE_SCHEMA).select(list(PAIRWISE_SCHEMA))


def pairwise_note(level: float, margin: float, n_boot: int) -> str:
    """The pairwise table's note."""
    alpha = f"{1 - level:.3g}"
    return (f"Every pair of strategies of a model x task (control runs left out: they are read against their own "
            f"strategy in Table 1), on final in-distribution accuracy: difference = strategy minus versus in points, "
            f"paired by seed, with its {round(100 * level)} % interval (t over the seeds both ran; with one shared "
            f"seed a paired bootstrap over test questions, {n_boot} resamples). p: two-sided, of a zero difference "
            f"(paired t; with one seed read from the bootstrap); p_equivalence: two one-sided tests that the "
            f"difference lies within ±{margin:g} points (report.equivalence_margin), the larger of their p's. "
            f"p_holm, p_equivalence_holm: adjusted by Holm's method over the family of the model x task's pairs "
            f"(pairs: how many), since the best strategy is picked from the same data. verdict, at alpha = {alpha} "
            f"after Holm's correction: {DIFFERS} (p_holm < alpha), equivalent within ±{margin:g} (p_equivalence_holm "
            f"< alpha), undecided otherwise. With one seed the test questions are resampled and the trained "
            f"checkpoints held fixed: the p's say nothing about training noise, and the verdict is undecided "
            f"({ONE_SEED}).")
