"""Which subset to train on, predicted from the probe alone, before any training (`recommend.md`).

GRPO learns only from groups whose rewards differ, so the prediction is each candidate subset's learnable
share: the mean chance, over its examples, that a group of G samples of the base model mixes right and wrong
answers, from each example's Beta posterior given its k of K (`expected_learnable_pct_posterior` of the
subset table, `pool.subset_pass_rates`). The subset with the largest share is recommended. Candidates are
the strategies that pick part of the pool (hard, easy, random, ...): not the full pool, which a user who can
afford only part of it cannot train on, and not control runs.

The share predicts the base model's groups; training moves the policy away from it. Whether the rule picks
the subset that wins is a claim to check, and `across_tasks.recommendation_check` checks it family by family
on a study of several tasks (leave one family out).
"""

from __future__ import annotations

import polars as pl

from hardex.learnability import MIN_EXPECTED_MIXED
from hardex.selection import RunName

TITLE = "Which subset to train on, predicted from the probe before any training"
#: strategies that are not a subset a user picks at a budget
NOT_CANDIDATES = ("pool", "full")
#: the subset table's column the recommendation ranks by
PREDICTION = "expected_learnable_pct_posterior"

COLUMNS = {"model": pl.Utf8, "task": pl.Utf8, "rank": pl.Int64, "strategy": pl.Utf8, "n_examples": pl.Int64,
           "mean_pass_rate": pl.Float64, "predicted_learnable_pct": pl.Float64,
           "predicted_learnable_pct_raw": pl.Float64, "tied_at": pl.Float64, "recommended": pl.Utf8, "reason": pl.Utf8}


def candidates(subsets_table: pl.DataFrame) -> pl.DataFrame:
    """The subset table's rows of strategies a user could pick at a budget (see the module's docstring)."""
    keep = [s not in NOT_CANDIDATES and RunName.parse(s).control is None and not RunName.parse(s).online
            for s in subsets_table["strategy"]]
    return subsets_table.filter(pl.Series(keep, dtype=pl.Boolean))


def _no_gradient(rows: list[dict]) -> bool:
    """Whether even the best candidate's groups are predicted to mix less often than learnability's floor."""
    return (rows[0]["predicted_learnable_pct"] or 0.0) < 100 * MIN_EXPECTED_MIXED


def _reason(rows: list[dict]) -> str:
    best, rest = rows[0], rows[1:]
    if _no_gradient(rows):
        return (f"no candidate's GRPO groups are predicted to mix in {100 * MIN_EXPECTED_MIXED:.0f} % of steps at the "
                f"base model (the most: {best['strategy']} {best['predicted_learnable_pct']:.0f} %): none would give "
                "GRPO a gradient, whichever is picked")
    text = (f"its subset's GRPO groups are expected to mix {best['predicted_learnable_pct']:.0f} % of the time "
            f"at the base model")
    if rest:
        text += " against " + ", ".join(f"{r['strategy']} {r['predicted_learnable_pct']:.0f} %" for r in rest)
    if len(rest) and abs(best["predicted_learnable_pct"] - rest[0]["predicted_learnable_pct"]) < 1:
        text += f" (within a point of {rest[0]['strategy']}: the probe does not tell them apart)"
    if best.get("tied_at") is not None:
        text += f"; it is a random draw among examples all at pass rate {best['tied_at']:g}"
    return text


def recommend_table(subsets_table: pl.DataFrame) -> pl.DataFrame:
    """Per model x task, every candidate subset ranked by its predicted learnable share (rank 1 first), the
    recommended one named on every row with its reason. `subsets_table`: `pool.subset_pass_rates` with its
    group sizes (the expected learnable columns)."""
    if PREDICTION not in subsets_table.columns:
        raise ValueError("the subset table has no expected learnable share: build it with the runs' group sizes")
    rows = []
    for (model, task), cell in candidates(subsets_table).group_by(["model", "task"], maintain_order=True):
        ranked = sorted(cell.iter_rows(named=True), key=lambda r: (-(r[PREDICTION] or 0.0), r["strategy"]))
        ranked = [{"strategy": r["strategy"], "n_examples": r["n_examples"], "mean_pass_rate": r["mean_pass_rate"],
                   "predicted_learnable_pct": r[PREDICTION], "predicted_learnable_pct_raw": r["expected_learnable_pct"],
                   "tied_at": r.get("tied_at")} for r in ranked]
        reason, pick = _reason(ranked), "none" if _no_gradient(ranked) else ranked[0]["strategy"]
        rows += [{"model": model, "task": task, "rank": i + 1, **r, "recommended": pick, "reason": reason}
                 for i, r in enumerate(ranked)]
    return pl.DataFrame(rows, schema=COLUMNS)


def recommend_note(table: pl.DataFrame) -> str:
    """The recommendation table's note: one sentence per model x task, then what the columns are."""
    sentences = [f"{r['model']} on {r['task']}: " + (f"train on {r['recommended']}: " if r["recommended"] != "none"
                                                     else "no subset is recommended: ") + f"{r['reason']}."
                 for r in table.filter(pl.col("rank") == 1).iter_rows(named=True)]
    return (" ".join(sentences) + (" " if sentences else "No candidate subset (every strategy is the full pool "
                                                         "or a control). ")
            + "Predicted from the probe alone, before any training. predicted_learnable_pct: the mean chance that "
              "a GRPO group of the run's G samples of the base model mixes right and wrong answers, from each "
              "example's Beta posterior given its k of K under a prior fitted to the pool (hardex.posterior); "
              "predicted_learnable_pct_raw: the same from the raw k of K, which reads low for the hardest and "
              "high for the easiest subsets (they were chosen on those samples). Only groups that mix give GRPO a "
              "gradient, so the subset with the largest share is recommended; it predicts the base model's groups, "
              "and training moves the policy away from them. Candidates: strategies that pick part of the pool "
              "(not the full pool, not controls). On a study of several tasks the across_tasks table's "
              "recommendation check says how often this rule picked the winner.")
