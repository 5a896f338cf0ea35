"""Tables 1 and 2 and the gain curve: per model x task x strategy, over its seeds, the gain over the base
model with its intervals (`gain_table`, `with_seeds_and_questions_interval`), the learnable % of its training
steps (`learnable_table`), and the gain at every checkpoint (`gain_curve`).

Conventions: see `hardex.report`.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from hardex.report.loading import Results
from hardex.report.runs import (
    CELL_KEYS,
    RUN_KEYS,
    base_outcomes,
    in_paper_order,
    mean_accuracy,
    paired_differences,
    question_differences,
    run_summary,
)
from hardex.statistics import bootstrap_mean_interval, seeds_and_questions_interval, t_interval


def gain_table(res: Results, level: float = 0.95, n_boot: int = 2000, seed: int = 0,
               summary: pl.DataFrame | None = None) -> pl.DataFrame:
    """Table 1: per model x task x strategy, base and final accuracy (%), gain (points) and its interval."""
    summary = run_summary(res) if summary is None else summary
    rows = []
    for (model, task, strategy), grp in summary.group_by(CELL_KEYS, maintain_order=True):
        gains = grp["gain"].to_numpy()
        if grp.height > 1:
            lo, hi = t_interval(gains, level)
            method = f"t over {grp.height} seeds"
        else:
            d = paired_differences(res, model, task, strategy, int(grp["seed"][0]))
            lo, hi = (100 * v for v in bootstrap_mean_interval(d, level, n_boot, seed))
            method = f"bootstrap over {d.size} examples"
        rows.append({"model": model, "task": task, "strategy": strategy, "benchmark": grp["benchmark"][0],
                     "n_seeds": grp.height, "final_step": int(grp["final_step"].max()),
                     "base_accuracy": float(grp["base_accuracy"].mean()),
                     "final_accuracy": float(grp["final_accuracy"].mean()), "gain": float(gains.mean()),
                     "gain_ci_low": lo, "gain_ci_high": hi, "interval": method})
    return in_paper_order(pl.DataFrame(rows), CELL_KEYS)


def with_seeds_and_questions_interval(gains: pl.DataFrame, res: Results, summary: pl.DataFrame,
                                      level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> pl.DataFrame:
    """Table 1 with `gain_sq_ci_low`, `gain_sq_ci_high`: the gain's interval over seeds and test questions
    together (`statistics.seeds_and_questions_interval`), beside the t over seeds that treats the test
    questions as fixed. Null with one seed."""
    rows = []
    for (model, task, strategy), grp in summary.group_by(CELL_KEYS, maintain_order=True):
        seeds = sorted(int(s) for s in grp["seed"])
        lo = hi = math.nan
        if len(seeds) > 1:
            d = question_differences(res, model, task, strategy, seeds)
            lo, hi = (100 * v for v in seeds_and_questions_interval(d, level, n_boot, seed))
        rows.append({"model": model, "task": task, "strategy": strategy, "gain_sq_ci_low": lo, "gain_sq_ci_high": hi})
    extra = pl.DataFrame(rows, schema={"model": pl.Utf8, "task": pl.Utf8, "strategy": pl.Utf8,
                                       "gain_sq_ci_low": pl.Float64, "gain_sq_ci_high": pl.Float64})
    return gains.join(extra, on=CELL_KEYS, how="left", maintain_order="left")


def accuracy_gain_note(level: float, n_boot: int) -> str:
    """The accuracy_gain table's note: what its gain and its two intervals mean."""
    pct = f"{round(100 * level)} %"
    return (f"Accuracy in % on each task's first (in-distribution) benchmark; gain in points "
            f"(final checkpoint minus base model). {pct} interval: t over seeds with >1 seed, "
            f"paired bootstrap over test examples ({n_boot} resamples) with one; both treat "
            f"the test questions as fixed. gain_sq CI: {pct} interval over seeds and test "
            f"questions together (two-stage bootstrap, {n_boot} resamples: seeds with "
            f"replacement, then questions, shared by the seeds of a draw; its standard "
            f"error with Student's t over seeds; none with one seed), the one to read when "
            f"asking whether a gain holds beyond this test set; it errs wide.")


def gain_curve(res: Results, level: float = 0.95) -> pl.DataFrame:
    """The gain-by-step curve: per model x task x strategy x checkpoint step, the gain over the base model in
    points on the task's first benchmark (each seed's checkpoint against the base evaluated with its seed),
    mean over seeds with its t-interval. A subset that wins at the last step need not win at an earlier one."""
    rows = []
    for (model, task, strategy, seed), grp in res.runs.group_by(RUN_KEYS, maintain_order=True):
        bench = res.in_distribution(task)
        base = mean_accuracy(base_outcomes(res, model, task, bench, seed))
        for (step,), at in grp.filter((pl.col("benchmark") == bench) & (pl.col("step") > 0)).group_by(["step"]):
            rows.append({"model": model, "task": task, "strategy": strategy, "seed": seed, "step": int(step),
                         "gain": 100 * (mean_accuracy(at) - base)})
    schema = {"model": pl.Utf8, "task": pl.Utf8, "strategy": pl.Utf8, "step": pl.Int64, "n_seeds": pl.Int64,
              "gain": pl.Float64, "gain_ci_low": pl.Float64, "gain_ci_high": pl.Float64}
    if not rows:
        return pl.DataFrame(schema=schema)
    out = []
    for (model, task, strategy, step), g in pl.DataFrame(rows).group_by(CELL_KEYS + ["step"], maintain_order=True):
        gains = g["gain"].to_list()
        low, high = t_interval(gains, level) if len(gains) > 1 else (None, None)
        out.append({"model": model, "task": task, "strategy": strategy, "step": step, "n_seeds": len(gains),
                    "gain": sum(gains) / len(gains), "gain_ci_low": low, "gain_ci_high": high})
    return in_paper_order(pl.DataFrame(out, schema=schema), CELL_KEYS + ["step"])


def gain_curve_note(level: float) -> str:
    """The gain_curve table's note."""
    return (f"The gain over the base model at every checkpoint a run saved (grpo.save_steps), in points on the task's "
            f"first benchmark: each seed's checkpoint minus the base model evaluated with that seed, mean over the "
            f"seeds that reached the step, with its {round(100 * level)} % t-interval over them (none with one seed; "
            f"uncorrected, one per row). The last step of each strategy is Table 1's gain. Read it for whether a "
            f"winner at the last step already led earlier, or is still climbing: a verdict holds at the length it "
            f"was measured at.")


def learnable_table(summary: pl.DataFrame, level: float = 0.95) -> pl.DataFrame:
    """Table 2: learnable % per model x task x strategy (mean over seeds; t-interval with >1 seed)."""
    rows = []
    for (model, task, strategy), grp in summary.group_by(CELL_KEYS, maintain_order=True):
        v = grp["learnable_pct"].to_numpy()
        lo, hi = t_interval(v, level)
        rows.append({"model": model, "task": task, "strategy": strategy, "n_seeds": grp.height,
                     "n_steps": int(grp["n_steps"].max()),
                     "learnable_pct": float(np.nanmean(v)) if v.size else math.nan,
                     "learnable_ci_low": lo, "learnable_ci_high": hi})
    return in_paper_order(pl.DataFrame(rows), CELL_KEYS)


def learnable_note(level: float) -> str:
    """The learnable table's note: what learnable % measures."""
    return ("Learnable % = 100 x mean over training steps of the share of groups whose rewards "
            f"differ (nonzero std). {round(100 * level)} % t-interval over seeds when there are several.")
