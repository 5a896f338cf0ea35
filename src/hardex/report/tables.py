"""The report's tables and the learnable-% regression, from the frames of `report.loading`.

Conventions: see `hardex.report`. Every table is a function of plain frames, so a notebook can
recompute what the report shows.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import polars as pl

from hardex.learnability import tie
from hardex.metrics import accuracy_by_tier, expected_mixed, learnable_pct, sort_tiers, summarize
from hardex.posterior import expected_mixed_posterior, with_posterior
from hardex.report import AnalysisError
from hardex.report.across_tasks import across_tasks_table, contrast_meta_analysis, recommendation_check
from hardex.report.recommend import recommend_table
from hardex.report.by_difficulty import gain_by_difficulty, gain_by_difficulty_note
from hardex.report.dynamics import dynamics_note, dynamics_table
from hardex.report.catch_up import EQUIVALENCE_MARGIN, NO_GAIN, catch_up_table
from hardex.report.headline import COMPACT, DIFFERS, ONE_SEED, answer_lines, headline_table, interval_sign
from hardex.report.reference import with_reference
from hardex.report.loading import METRICS, Results, load_overlaps
from hardex.report.sharpening import pass_at_k_note, pass_at_k_table
from hardex.report.statistics import bootstrap_mean_interval, bootstrap_means, percentile_interval, regression
from hardex.report.statistics import bootstrap_p, holm, t_interval, t_test_p  # pairwise verdicts
from hardex.report.statistics import seeds_and_questions_interval, seeds_needed  # intervals over questions, power
from hardex.selection import (BASE_SPLIT_STRATEGIES, BOUNDARY_STRATEGIES, BUDGET_STRATEGIES, CONTROLS,
                              FILTER_STRATEGIES, RunName, strategy_sort_key)

RUN_KEYS = ["model", "task", "strategy", "seed"]
CELL_KEYS = ["model", "task", "strategy"]


_LEADING = {"pool": -2, "base": -1}  # rows that are not strategies come first


def _order(df: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """Sort rows by keys, strategies in paper order ("pool" and "base" rows first)."""
    if df.height == 0:
        return df
    cols = []
    for k in keys:
        if k == "strategy":
            order = {s: _LEADING.get(s, strategy_sort_key(s)[0]) for s in df["strategy"].unique()}
            df = df.with_columns(pl.col("strategy").replace_strict(order, default=99).alias("_s_order"))
            cols += ["_s_order", "strategy"]
        else:
            cols.append(k)
    return df.sort(cols, nulls_last=True).drop("_s_order", strict=False)


def _acc(df: pl.DataFrame) -> float:
    return float((df["n_correct"] / df["n"]).mean()) if df.height else math.nan


def accuracy_curves(res: Results) -> pl.DataFrame:
    """Accuracy (and pass@k) per model x task x strategy x seed x benchmark x step; step 0 = base.

    The base model appears as its own rows with strategy "base" and a null seed, and as step 0 of
    every run's curve.
    """
    rows = []
    for (model, task, bench), grp in res.base.group_by(["model", "task", "benchmark"], maintain_order=True):
        ks = res.pass_k.get(bench, [1])
        for r in summarize(grp.with_columns(pl.lit(0).alias("step")), ks).iter_rows(named=True):
            rows.append({"model": model, "task": task, "strategy": "base", "seed": None, "benchmark": bench, **r})
        for strategy, seed in res.runs.filter((pl.col("model") == model) & (pl.col("task") == task)) \
                .select("strategy", "seed").unique().iter_rows():
            own = base_outcomes(res, model, task, bench, seed).with_columns(pl.lit(0).alias("step"))
            for r in summarize(own, ks).iter_rows(named=True):
                rows.append({"model": model, "task": task, "strategy": strategy, "seed": seed, "benchmark": bench, **r})
    for (model, task, strategy, seed, bench), grp in res.runs.group_by(
            ["model", "task", "strategy", "seed", "benchmark"], maintain_order=True):
        trained = grp.filter(pl.col("step") > 0)
        if trained.height == 0:  # a run without checkpoints has only its base point
            continue
        s = summarize(trained, res.pass_k.get(bench, [1]))
        for r in s.iter_rows(named=True):
            rows.append({"model": model, "task": task, "strategy": strategy, "seed": seed, "benchmark": bench, **r})
    df = pl.DataFrame(rows, infer_schema_length=None)
    return _order(df, ["model", "task", "strategy", "seed", "benchmark", "step"])


def base_outcomes(res: Results, model: str, task: str, bench: str, seed: int | None = None) -> pl.DataFrame:
    """The base model's outcomes on a benchmark: evaluated with run seed `seed`'s evaluation noise when
    there is such an evaluation (a run's gain is then paired with its own base), else every seed's."""
    base = res.base.filter((pl.col("model") == model) & (pl.col("task") == task) & (pl.col("benchmark") == bench))
    own = base.filter(pl.col("seed") == seed) if seed is not None else base.clear()
    return own if own.height else base


def run_summary(res: Results) -> pl.DataFrame:
    """One row per run: in-distribution base and final accuracy (%), gain (points), learnable %."""
    rows = []
    for (model, task, strategy, seed), grp in res.runs.group_by(RUN_KEYS, maintain_order=True):
        bench = res.in_distribution(task)
        run = grp.filter(pl.col("benchmark") == bench)
        base = base_outcomes(res, model, task, bench, seed)
        if run.height == 0 or base.height == 0:
            raise AnalysisError(f"{model}/{task}/{strategy}/seed{seed}: no outcomes on {bench} (run or base)")
        final_step = int(run["step"].max())
        steps = res.steps.filter((pl.col("model") == model) & (pl.col("task") == task)
                                 & (pl.col("strategy") == strategy) & (pl.col("seed") == seed))
        base_acc, final_acc = _acc(base), _acc(run.filter(pl.col("step") == final_step))
        rows.append({"model": model, "task": task, "strategy": strategy, "seed": seed, "benchmark": bench,
                     "final_step": final_step, "base_accuracy": 100 * base_acc, "final_accuracy": 100 * final_acc,
                     "gain": 100 * (final_acc - base_acc), "learnable_pct": learnable_pct(steps) if steps.height else math.nan,
                     "n_steps": steps.height})
    return _order(pl.DataFrame(rows), RUN_KEYS)


def gain_curve(res: Results, level: float = 0.95) -> pl.DataFrame:
    """The gain-by-step curve: per model x task x strategy x checkpoint step, the gain over the base model in
    points on the task's first benchmark (each seed's checkpoint against the base evaluated with its seed),
    mean over seeds with its t-interval. A subset that wins at the last step need not win at an earlier one."""
    rows = []
    for (model, task, strategy, seed), grp in res.runs.group_by(RUN_KEYS, maintain_order=True):
        bench = res.in_distribution(task)
        base = _acc(base_outcomes(res, model, task, bench, seed))
        for (step,), at in grp.filter((pl.col("benchmark") == bench) & (pl.col("step") > 0)).group_by(["step"]):
            rows.append({"model": model, "task": task, "strategy": strategy, "seed": seed, "step": int(step),
                         "gain": 100 * (_acc(at) - base)})
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
    return _order(pl.DataFrame(out, schema=schema), CELL_KEYS + ["step"])


def gain_curve_note(level: float) -> str:
    """The gain_curve table's note."""
    return (f"The gain over the base model at every checkpoint a run saved (grpo.save_steps), in points on the task's "
            f"first benchmark: each seed's checkpoint minus the base model evaluated with that seed, mean over the "
            f"seeds that reached the step, with its {round(100 * level)} % t-interval over them (none with one seed; "
            f"uncorrected, one per row). The last step of each strategy is Table 1's gain. Read it for whether a "
            f"winner at the last step already led earlier, or is still climbing: a verdict holds at the length it "
            f"was measured at.")


def paired_differences(res: Results, model: str, task: str, strategy: str, seed: int) -> np.ndarray:
    """Per test example: final-checkpoint correct share minus the base model's (in-distribution)."""
    bench = res.in_distribution(task)
    run = res.runs.filter((pl.col("model") == model) & (pl.col("task") == task) & (pl.col("strategy") == strategy)
                          & (pl.col("seed") == seed) & (pl.col("benchmark") == bench))
    run = run.filter(pl.col("step") == run["step"].max())
    base = base_outcomes(res, model, task, bench, seed).group_by("id").agg((pl.col("n_correct") / pl.col("n")).mean()
                                                                           .alias("b"))
    # sorted by id: a bootstrap resamples positions, so the order must not depend on the join's (it may not)
    j = run.select("id", (pl.col("n_correct") / pl.col("n")).alias("f")).join(base, on="id", how="inner").sort("id")
    return (j["f"] - j["b"]).to_numpy()


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
    return _order(pl.DataFrame(rows), CELL_KEYS)


def _final_shares(res: Results, model: str, task: str, strategy: str, seed: int) -> pl.DataFrame:
    """id, f: a run's final-checkpoint correct share per in-distribution test question."""
    run = res.runs.filter((pl.col("model") == model) & (pl.col("task") == task) & (pl.col("strategy") == strategy)
                          & (pl.col("seed") == seed) & (pl.col("benchmark") == res.in_distribution(task)))
    run = run.filter(pl.col("step") == run["step"].max())
    return run.select("id", (pl.col("n_correct") / pl.col("n")).alias("f"))


def run_comparison(res: Results, gain_of: dict, model: str, task: str, a: str, b: str, level: float = 0.95,
                   n_boot: int = 2000, seed: int = 0, margin: float = EQUIVALENCE_MARGIN) -> dict[str, Any] | None:
    """Run strategy a's gain minus b's, paired by seed, with its interval and p-values: over the seeds both
    ran (at least 2), the mean, its t-interval and the paired t-test's p (`statistics.t_test_p`); with one
    shared seed, the paired bootstrap over test questions of the two runs' final correct shares (both beside
    the same base, which cancels): its percentile interval and p's (`statistics.bootstrap_p`), which hold
    the trained checkpoints fixed and so say nothing about training noise. p: of a zero difference (two-sided);
    p_equivalence: two one-sided tests that it lies within +- `margin` points. None without a shared seed.
    `gain_of`: (model, task, strategy, seed) -> gain, from run_summary."""
    seeds = sorted(sd for (m, t, s, sd) in gain_of if (m, t, s) == (model, task, a) and (model, task, b, sd) in gain_of)
    if not seeds:
        return None
    d = np.array([gain_of[model, task, a, sd] - gain_of[model, task, b, sd] for sd in seeds])
    if len(seeds) > 1:
        (lo, hi), (p, p_equivalence) = t_interval(d, level), t_test_p(d, margin)
        how = f"t over {len(seeds)} seeds"
    else:
        pair = _final_shares(res, model, task, a, seeds[0]).join(
            _final_shares(res, model, task, b, seeds[0]), on="id", suffix="_b").sort("id")  # as paired_differences
        means = 100 * bootstrap_means((pair["f"] - pair["f_b"]).to_numpy(), n_boot, seed)  # in points
        (lo, hi), (p, p_equivalence) = percentile_interval(means, level), bootstrap_p(means, margin)
        how = f"bootstrap over {pair.height} examples"
    return {"n_seeds": len(seeds), "interval": how, "difference": float(d.mean()), "ci_low": lo, "ci_high": hi,
            "p": p, "p_equivalence": p_equivalence}


def run_difference(res: Results, gain_of: dict, model: str, task: str, a: str, b: str, level: float = 0.95,
                   n_boot: int = 2000, seed: int = 0) -> tuple[float | None, float | None, float | None]:
    """Run strategy a's gain minus b's, paired by seed, with its interval (`run_comparison`);
    (None, None, None) without a shared seed."""
    c = run_comparison(res, gain_of, model, task, a, b, level, n_boot, seed)
    return (None, None, None) if c is None else (c["difference"], c["ci_low"], c["ci_high"])


def gains_by_run(summary: pl.DataFrame) -> dict:
    """(model, task, strategy, seed) -> gain, for run_difference."""
    return {(m, t, s, sd): g for m, t, s, sd, g in summary.select(*RUN_KEYS, "gain").iter_rows()}


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


def gain_beyond_controls(gains: pl.DataFrame, summary: pl.DataFrame, res: Results, level: float = 0.95,
                         n_boot: int = 2000, seed: int = 0) -> pl.DataFrame:
    """Table 1's columns beyond_<control> (with _ci_low, _ci_high), one set per control that ran
    (`selection.controls`, hardex.controls): a strategy's gain minus the gain of its control run
    <strategy>_<control> (same subset, another reward), paired by seed (run_difference), and
    learnable_<control>: the control run's learnable % (mean over its seeds), beside `learnable_pct`, the
    row's own: a control whose groups never mix never trained, and a gain beyond it says nothing. Null for
    control rows, online runs, strategies whose control did not run or shares no seed with them. Without
    any control run the table is returned unchanged."""
    ran = {RunName.parse(s).control for s in summary["strategy"].unique()}
    present = [c for c in CONTROLS if c in ran]
    if not present or gains.height == 0:
        return gains
    gain_of = gains_by_run(summary)
    learnable = {(m, t, s): v for m, t, s, v in summary.group_by(CELL_KEYS).agg(
        pl.col("learnable_pct").fill_nan(None).mean()).iter_rows()}  # null where no run recorded its steps
    columns: dict[str, list] = {"learnable_pct": [learnable.get(k) for k in gains.select(CELL_KEYS).iter_rows()]}
    runs = [RunName.parse(s) for s in gains["strategy"]]
    for control in present:
        mean, low, high, control_learnable = [], [], [], []
        for (model, task, strategy), run in zip(gains.select(CELL_KEYS).iter_rows(), runs):
            # a control run and an online run have no control run of their own
            versus = str(RunName(run.strategy, control=control)) if not run.online and not run.control else None
            d, lo, hi = (run_difference(res, gain_of, model, task, strategy, versus, level, n_boot, seed) if versus
                         else (None,) * 3)
            mean.append(d)
            low.append(lo)
            high.append(hi)
            control_learnable.append(learnable.get((model, task, versus)) if d is not None else None)
        columns |= {f"beyond_{control}": mean, f"beyond_{control}_ci_low": low, f"beyond_{control}_ci_high": high,
                    f"learnable_{control}": control_learnable}
    return gains.with_columns([pl.Series(name, values, dtype=pl.Float64) for name, values in columns.items()])


def beyond_controls_note(gains: pl.DataFrame, pct: str) -> str:
    """What Table 1's beyond_<control> columns mean, for its note ("" without them)."""
    controls = [c.removeprefix("beyond_") for c in gains.columns if c.startswith("beyond_") and "_ci_" not in c]
    if not controls:
        return ""
    return (f" Control runs (<strategy>_<control>, hardex.controls: shuffled is rewarded against another example's "
            f"reference answer, format for where and how an answer is written, the random reward at random at the "
            f"true reward's rate) train on their strategy's subset; their own gain is what form, or any reward at "
            f"all, buys. {', '.join(f'beyond_{c}' for c in controls)}: the strategy's gain minus its control's, "
            f"paired by seed (mean over the seeds both ran, {pct} t-interval over them; with one shared seed a "
            f"paired bootstrap over test questions): the gain the skill bought beyond it; each is its own "
            f"question, uncorrected for the others. learnable_pct: the run's learnable % (as in Table 2); "
            f"{', '.join(f'learnable_{c}' for c in controls)}: its control's, to read beside it: a control whose "
            f"groups seldom mixed barely trained, and beating it shows little. Empty where that control did not "
            f"run.")


def learnable_table(summary: pl.DataFrame, level: float = 0.95) -> pl.DataFrame:
    """Table 2: learnable % per model x task x strategy (mean over seeds; t-interval with >1 seed)."""
    rows = []
    for (model, task, strategy), grp in summary.group_by(CELL_KEYS, maintain_order=True):
        v = grp["learnable_pct"].to_numpy()
        lo, hi = t_interval(v, level)
        rows.append({"model": model, "task": task, "strategy": strategy, "n_seeds": grp.height,
                     "n_steps": int(grp["n_steps"].max()), "learnable_pct": float(np.nanmean(v)) if v.size else math.nan,
                     "learnable_ci_low": lo, "learnable_ci_high": hi})
    return _order(pl.DataFrame(rows), CELL_KEYS)


def ood_table(res: Results, curves: pl.DataFrame | None = None) -> pl.DataFrame:
    """Table 4: pass@k of the base model and each strategy's final checkpoint on every OOD benchmark.

    Values are in percent, averaged over seeds; a task with one benchmark has no OOD rows.
    """
    curves = accuracy_curves(res) if curves is None else curves
    rows = []
    for task, benches in res.benchmarks.items():
        for bench in benches[1:]:
            ks = res.pass_k.get(bench, [1])
            sub = curves.filter((pl.col("task") == task) & (pl.col("benchmark") == bench))
            if sub.height == 0:
                continue
            base = sub.filter(pl.col("strategy") == "base")
            runs = sub.filter(pl.col("strategy") != "base")
            finals = runs.join(runs.group_by(RUN_KEYS).agg(pl.col("step").max().alias("_last")), on=RUN_KEYS) \
                .filter(pl.col("step") == pl.col("_last"))
            for part, strategy_col in ((base, None), (finals, "strategy")):
                keys = ["model"] + ([strategy_col] if strategy_col else [])
                for key, grp in part.group_by(keys, maintain_order=True):
                    row = {"model": key[0], "task": task, "benchmark": bench,
                           "strategy": key[1] if strategy_col else "base",
                           "n_seeds": grp["seed"].n_unique() if strategy_col else 0,
                           "step": int(grp["step"].max()), "n_examples": int(grp["n_examples"].max())}
                    for k in ks:
                        col = f"pass@{k}"
                        vals = grp[col].drop_nulls() if col in grp.columns else pl.Series([], dtype=pl.Float64)
                        row[col] = 100 * float(vals.mean()) if vals.len() else math.nan
                    rows.append(row)
    if not rows:
        return pl.DataFrame(schema={"model": pl.Utf8, "task": pl.Utf8, "benchmark": pl.Utf8, "strategy": pl.Utf8,
                                    "n_seeds": pl.Int64, "step": pl.Int64, "n_examples": pl.Int64})
    df = pl.DataFrame(rows, infer_schema_length=None).with_columns(_bench_index(res))
    return _order(df, ["model", "task", "_bench", "benchmark", "strategy"]).drop("_bench")


def base_split_table(gains: pl.DataFrame, subsets: pl.DataFrame | None = None) -> pl.DataFrame:
    """base_wrong vs base_right vs matched_random vs full (those present), from the gain table.

    `vs_base_right_pct` is the relative difference of final accuracy to base_right's, the
    paper's "+14.3 % relative" comparison.
    """
    sub = gains.filter(pl.col("strategy").is_in(list(BASE_SPLIT_STRATEGIES)))
    cols = ["model", "task", "strategy", "n_seeds", "base_accuracy", "final_accuracy", "gain",
            "gain_ci_low", "gain_ci_high"]
    if sub.height == 0:
        return pl.DataFrame(schema={c: gains.schema[c] for c in cols} | {"n_train": pl.Int64, "vs_base_right_pct": pl.Float64})
    sub = sub.select(cols)
    if subsets is not None and subsets.height:
        sizes = subsets.group_by([*CELL_KEYS, "seed"]).agg(pl.len().alias("n_train")) \
            .group_by(CELL_KEYS).agg(pl.col("n_train").mean().round().cast(pl.Int64))  # per run, seeds alike
        sub = sub.join(sizes, on=CELL_KEYS, how="left")
    else:
        sub = sub.with_columns(pl.lit(None, dtype=pl.Int64).alias("n_train"))
    right = sub.filter(pl.col("strategy") == "base_right").select("model", "task",
                                                                  pl.col("final_accuracy").alias("_right"))
    sub = sub.join(right, on=["model", "task"], how="left").with_columns(
        (100 * (pl.col("final_accuracy") / pl.col("_right") - 1)).alias("vs_base_right_pct")).drop("_right")
    return _order(sub, CELL_KEYS)


def _bench_index(res: Results) -> pl.Expr:
    """Position of a row's benchmark in its task's list (in-distribution first), for sorting."""
    order = {b: i for benches in res.benchmarks.values() for i, b in enumerate(benches)}
    return pl.col("benchmark").replace_strict(order, default=len(order), return_dtype=pl.Int64).alias("_bench")


def base_per_question(base: pl.DataFrame) -> pl.DataFrame:
    """The base model's outcomes with one row per question: the base is evaluated once per run seed, so
    each question's accuracy is averaged over those evaluations (n = 1, n_correct that fraction) and a
    tier of 20 questions counts 20 examples however many seeds there are."""
    keys = [c for c in ("model", "task", "benchmark", "id", "tier") if c in base.columns]
    return base.group_by(keys, maintain_order=True).agg(
        (pl.col("n_correct") / pl.col("n")).mean().alias("n_correct")).with_columns(pl.lit(1).alias("n"))


def tier_table(res: Results) -> pl.DataFrame:
    """Accuracy (%) per difficulty tier: the base model and each strategy's final checkpoint.

    One row per model x task x benchmark x tier, one column per strategy (mean over seeds), so
    the stratified view reads across; benchmarks without tiers are absent. n_examples: the tier's
    questions, each counted once (the base model's evaluations of every seed averaged per question).
    """
    key = ["model", "task", "benchmark"]
    parts = []
    for (model, task, bench), grp in base_per_question(res.base).group_by(key, maintain_order=True):
        t = accuracy_by_tier(grp.with_columns(pl.lit(0).alias("step")))
        parts.append(t.select(pl.lit(model).alias("model"), pl.lit(task).alias("task"), pl.lit(bench).alias("benchmark"),
                              "tier", "n_examples", pl.lit("base").alias("strategy"), "accuracy"))
    for (model, task, strategy, bench), grp in res.runs.group_by(["model", "task", "strategy", "benchmark"],
                                                                  maintain_order=True):
        last = grp.join(grp.group_by("seed").agg(pl.col("step").max().alias("_last")), on="seed") \
            .filter(pl.col("step") == pl.col("_last"))
        t = pl.concat([accuracy_by_tier(g) for _, g in last.group_by("seed")])
        t = t.group_by("tier").agg(pl.col("accuracy").mean(), pl.col("n_examples").max())
        parts.append(t.select(pl.lit(model).alias("model"), pl.lit(task).alias("task"), pl.lit(bench).alias("benchmark"),
                              "tier", "n_examples", pl.lit(strategy).alias("strategy"), "accuracy"))
    long = pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame()
    if long.height == 0:
        return pl.DataFrame(schema={"model": pl.Utf8, "task": pl.Utf8, "benchmark": pl.Utf8, "tier": pl.Utf8,
                                    "n_examples": pl.Int64, "base": pl.Float64})
    strategies = sorted(set(long["strategy"]) - {"base"}, key=strategy_sort_key)
    wide = long.with_columns(pl.col("accuracy") * 100).pivot(
        on="strategy", index=key + ["tier"], values="accuracy", aggregate_function="first")
    n = long.filter(pl.col("strategy") == "base").select(key + ["tier", "n_examples"])
    wide = wide.join(n, on=key + ["tier"], how="left")
    wide = wide.select(key + ["tier", "n_examples"] + [c for c in ["base", *strategies] if c in wide.columns])
    return sort_tiers(wide.with_columns(_bench_index(res)), before=["model", "task", "_bench"]).drop("_bench")


def pool_distribution(probes: pl.DataFrame) -> pl.DataFrame:
    """The pool's pass-rate distribution: examples per pass-rate value (j / K) per model x task."""
    return (probes.group_by(["model", "task", "pass_rate"]).agg(pl.len().cast(pl.Int64).alias("n_examples"))
            .with_columns((100 * pl.col("n_examples") / pl.col("n_examples").sum().over(["model", "task"]))
                          .alias("share_pct"))
            .sort(["model", "task", "pass_rate"]))


def with_expected_mixed(probes: pl.DataFrame, subsets: pl.DataFrame, group_sizes: dict[str, int]
                        ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Probe and subset rows with `expected_mixed` for each example, for the group size G of its
    model's GRPO runs (`group_sizes`: model -> G): from the raw count (`metrics.expected_mixed`), and as
    `expected_mixed_posterior` from the example's Beta posterior under a prior fitted to its pool
    (`posterior.expected_mixed_posterior`; each model x task's probe is one pool)."""
    def add(df: pl.DataFrame) -> pl.DataFrame:
        rows = zip(df["model"], df["pass_rate"], df["k"])
        values = [expected_mixed(round(rate * k), k, group_sizes[m]) for m, rate, k in rows]
        return df.with_columns(pl.Series("expected_mixed", values, dtype=pl.Float64))

    def add_posterior(pool: pl.DataFrame) -> pl.DataFrame:
        pool = with_posterior(pool.with_columns(n_correct=(pl.col("pass_rate") * pl.col("k")).round().cast(pl.Int64))
                              )[0]
        group_size = group_sizes[pool["model"][0]]
        values = [expected_mixed_posterior(a, b, group_size) for a, b in zip(pool["posterior_a"], pool["posterior_b"])]
        return pool.select(*keep, pl.Series("expected_mixed_posterior", values, dtype=pl.Float64))

    probes = add(probes)
    keep = probes.columns
    if probes.height:
        probes = pl.concat([add_posterior(pool) for _, pool in probes.group_by(["model", "task"], maintain_order=True)])
    else:
        probes = probes.with_columns(pl.lit(None, dtype=pl.Float64).alias("expected_mixed_posterior"))
    subsets = subsets.join(probes.select("model", "task", "id", "k", "expected_mixed", "expected_mixed_posterior"),
                           on=["model", "task", "id"], how="left")
    return probes, subsets


def subset_pass_rates(probes: pl.DataFrame, subsets: pl.DataFrame,
                      group_sizes: dict[str, int] | None = None) -> pl.DataFrame:
    """Size and pass-rate summary of the pool ("pool" rows) and of each selected subset; with
    `group_sizes`, also the learnable % expected before any training (mean of `expected_mixed`)."""
    cols = ["model", "task", "strategy", "seed", "pass_rate"]
    if group_sizes is not None:
        probes, subsets = with_expected_mixed(probes, subsets, group_sizes)
        cols += ["expected_mixed", "expected_mixed_posterior"]
    pool = probes.with_columns(pl.lit("pool").alias("strategy"), pl.lit(0, dtype=pl.Int64).alias("seed"))
    both = pl.concat([pool.select(cols), subsets.select(cols)], how="vertical_relaxed")
    # one subset per run seed: sizes per seed, pass rates over every seed's draw
    aggs = [(pl.len() / pl.col("seed").n_unique()).round().cast(pl.Int64).alias("n_examples"),
            pl.col("pass_rate").mean().alias("mean_pass_rate"),
            pl.col("pass_rate").median().alias("median_pass_rate"), pl.col("pass_rate").min().alias("min_pass_rate"),
            pl.col("pass_rate").max().alias("max_pass_rate")]
    if group_sizes is not None:
        aggs += [(100 * pl.col("expected_mixed").mean()).alias("expected_learnable_pct"),
                 (100 * pl.col("expected_mixed_posterior").mean()).alias("expected_learnable_pct_posterior")]
    aggs.append((pl.col("pass_rate").is_between(0, 1, closed="none").sum() / pl.col("seed").n_unique())
                .alias("learnable_examples"))
    table = both.group_by(CELL_KEYS).agg(aggs).join(subset_ties(probes, subsets), on=CELL_KEYS, how="left")
    return _order(table, CELL_KEYS)


def subset_ties(probes: pl.DataFrame, subsets: pl.DataFrame) -> pl.DataFrame:
    """Per model x task x strategy, `tied_at`: the pass rate every seed's subset was drawn from when each
    is a random draw inside one tie of pass rates larger than itself (`learnability.tie`), else null.
    Two strategies tied at the same rate trained on the same kind of examples."""
    rows = []
    for (model, task, strategy), grp in subsets.group_by(CELL_KEYS):
        probe = probes.filter((pl.col("model") == model) & (pl.col("task") == task))
        found = {tie(seed_rows, probe) for _, seed_rows in grp.group_by("seed")}
        rate = next(iter(found))[0] if len(found) == 1 and None not in found else None
        rows.append({"model": model, "task": task, "strategy": strategy, "tied_at": rate})
    return pl.DataFrame(rows, schema={"model": pl.Utf8, "task": pl.Utf8, "strategy": pl.Utf8, "tied_at": pl.Float64})


def ties_note(subsets_table: pl.DataFrame) -> str:
    """The table note's sentence naming strategies whose subsets collapsed into one tie, or ''."""
    tied = subsets_table.filter(pl.col("tied_at").is_not_null())
    if tied.height == 0:
        return ""
    parts = [f"{r['model']}/{r['task']} {r['strategy']} at {r['tied_at']:g}" for r in tied.iter_rows(named=True)]
    return (" tied_at: the subset is a seeded random draw among pool examples that all share this pass rate, "
            "so the ranking chose nothing and strategies tied at the same rate train on the same kind of "
            "examples: " + "; ".join(parts) + ".")


def rollout_budget(gains: pl.DataFrame, steps: pl.DataFrame, probes: pl.DataFrame) -> pl.DataFrame:
    """What each model x task x strategy cost in generated completions (rollouts) and tokens, beside its
    gain, so that offline selection and online filtering compare at equal compute.

    probe: the probe samples that chose the subset, charged in full to every strategy that reads pass
    rates (their subsets all come from one probe of the whole pool); none for random, full, the tier
    strategies and the base-model splits (those read one greedy answer per example, not counted).
    train: completions trained on; discarded: completions of groups online filtering dropped. Means
    over seeds. Tokens where a step did not record them (TRL's own generate) are its mean completion
    length times its rollouts.
    """
    if steps.height == 0 or "rollouts_generated" not in steps.columns:
        return pl.DataFrame()
    steps = steps.with_columns(
        pl.col("rollouts_discarded").fill_null(0),
        pl.col("tokens_generated").fill_null((pl.col("completion_length") * pl.col("rollouts_generated")).round()),
        pl.col("filter_capped").fill_null(False),  # recorded with the rollout counts (STEP_COLUMNS)
    )
    runs = steps.group_by(RUN_KEYS).agg(
        (pl.col("rollouts_generated") - pl.col("rollouts_discarded")).sum().alias("train_rollouts"),
        pl.col("rollouts_discarded").sum().alias("discarded_rollouts"),
        pl.col("tokens_generated").sum().alias("generated_tokens"),
        pl.col("filter_capped").sum().alias("capped_steps"),
    )
    if "tokens" not in probes.columns:
        probes = probes.with_columns(pl.lit(None, dtype=pl.Int64).alias("tokens"))
    probe_cost = probes.group_by("model", "task").agg(pl.col("k").sum().alias("pool_probe_rollouts"),
                                                      pl.col("tokens").sum().alias("pool_probe_tokens"))
    reads_probe = [s for s in runs["strategy"].unique()
                   if RunName.parse(s).strategy in BOUNDARY_STRATEGIES + FILTER_STRATEGIES]
    cells = runs.group_by(CELL_KEYS).agg(pl.col("train_rollouts", "discarded_rollouts", "generated_tokens",
                                                "capped_steps").mean())
    cells = cells.join(probe_cost, on=["model", "task"], how="left").with_columns(
        pl.when(pl.col("strategy").is_in(reads_probe)).then(pl.col("pool_probe_rollouts")).otherwise(0)
        .alias("probe_rollouts"),
        pl.when(pl.col("strategy").is_in(reads_probe)).then(pl.col("pool_probe_tokens")).otherwise(0)
        .alias("probe_tokens"),
    ).with_columns(
        (pl.col("probe_rollouts") + pl.col("train_rollouts") + pl.col("discarded_rollouts")).alias("total_rollouts"),
        (pl.col("probe_tokens") + pl.col("generated_tokens")).alias("total_tokens"),
    ).with_columns((100 * pl.col("probe_rollouts") / pl.col("total_rollouts")).alias("probe_share_pct"))
    out = cells.join(gains.select(*CELL_KEYS, "n_seeds", "gain", "gain_ci_low", "gain_ci_high"), on=CELL_KEYS,
                     how="left")
    return _order(out.select(*CELL_KEYS, "n_seeds", "probe_rollouts", "train_rollouts", "discarded_rollouts",
                             "total_rollouts", "probe_share_pct", "probe_tokens", "generated_tokens", "total_tokens",
                             "capped_steps", "gain", "gain_ci_low", "gain_ci_high"), CELL_KEYS)


def regression_cells(summary: pl.DataFrame, strategies: Sequence[str] | None = None) -> pl.DataFrame:
    """The regression's points: one per model x task x strategy (of `strategies`; all when None),
    gain and learnable % each averaged over the cell's seeds, `n_seeds` the seeds averaged.

    Seeds of a cell share a subset and a base evaluation, so they are not independent points: a fit
    over seeds would count them as such and give intervals that are too narrow.
    """
    pts = summary.filter(pl.col("learnable_pct").is_not_nan() & pl.col("gain").is_not_nan())
    if strategies is not None:
        pts = pts.filter(pl.col("strategy").is_in(list(strategies)))
    cells = pts.group_by(CELL_KEYS).agg(pl.len().cast(pl.Int64).alias("n_seeds"), pl.col("learnable_pct").mean(),
                                        pl.col("gain").mean())
    return _order(cells, CELL_KEYS)


def _cell_fit(cells: pl.DataFrame, strategies: Sequence[str], level: float, n_boot: int, seed: int) -> dict[str, Any]:
    fit = regression(cells["learnable_pct"].to_numpy(), cells["gain"].to_numpy(), level, n_boot, seed)
    seeds = cells["n_seeds"]
    return {**fit, "x": "learnable_pct", "y": "gain",
            "points_are": "one per model x task x strategy (cell), seeds averaged; the bootstrap resamples cells",
            "strategies": list(strategies), "n_cells": cells.height,
            "seeds_per_cell": {"min": seeds.min(), "max": seeds.max()} if cells.height else None,
            "points": cells.to_dicts()}


def regression_report(summary: pl.DataFrame, level: float = 0.95, n_boot: int = 2000, seed: int = 0,
                      ref: pl.DataFrame | None = None, names: dict | None = None,
                      strategies: Sequence[str] = BUDGET_STRATEGIES) -> dict[str, Any]:
    """Gain on learnable % over the cells of `strategies` (`regression_cells`: seeds averaged, the
    bootstrap resampling cells), with its points; and the same fit on every published run when a
    reference is given (one run per cell: the paper's 32 points)."""
    cells = regression_cells(summary, strategies)
    out: dict[str, Any] = {"this_run": _cell_fit(cells, strategies, level, n_boot, seed)}
    if ref is not None and {"learnable_pct", "gain"} <= set(ref.columns):
        published = regression_cells(ref)
        out["published"] = _cell_fit(published, sorted(set(published["strategy"]), key=strategy_sort_key),
                                     level, n_boot, seed)
    return _json_safe(out)


def _json_safe(obj: Any) -> Any:
    """NaN and infinities become null (JSON has neither)."""
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def question_differences(res: Results, model: str, task: str, strategy: str, seeds: Sequence[int]) -> np.ndarray:
    """Seeds x test questions (in-distribution): each seed's final-checkpoint correct share minus its own
    base model's (as `paired_differences`), questions aligned by id (NaN where a seed lacks one), for the
    two-stage bootstrap."""
    bench = res.in_distribution(task)
    parts = []
    for i, s in enumerate(seeds):
        run = res.runs.filter((pl.col("model") == model) & (pl.col("task") == task) & (pl.col("strategy") == strategy)
                              & (pl.col("seed") == s) & (pl.col("benchmark") == bench))
        run = run.filter(pl.col("step") == run["step"].max())
        base = base_outcomes(res, model, task, bench, s).group_by("id").agg((pl.col("n_correct") / pl.col("n"))
                                                                            .mean().alias("b"))
        parts.append(run.select(pl.col("id").cast(pl.Utf8), (pl.col("n_correct") / pl.col("n")).alias("f"))
                     .join(base.with_columns(pl.col("id").cast(pl.Utf8)), on="id", how="inner")
                     .select("id", (pl.col("f") - pl.col("b")).alias("d"), pl.lit(str(i)).alias("_seed")))
    wide = pl.concat(parts).pivot(on="_seed", index="id", values="d", aggregate_function="first").sort("id")
    return wide.select([pl.col(str(i)) if str(i) in wide.columns else pl.lit(None, dtype=pl.Float64).alias(str(i))
                        for i in range(len(seeds))]).to_numpy().T.astype(float)


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


POWER_KINDS = ("control", "base", "pair")  # the power table's row order within a model x task


def pooled_sd(sds: Sequence[float], seeds: Sequence[int]) -> float:
    """The standard deviation pooled over comparisons, each weighted by its degrees of freedom (seeds - 1):
    sqrt(sum (n_i - 1) s_i^2 / sum (n_i - 1)) over those with at least 2 seeds; NaN without any."""
    pairs = [(n - 1, sd) for sd, n in zip(sds, seeds) if n > 1 and math.isfinite(sd)]
    df = sum(d for d, _ in pairs)
    return math.sqrt(sum(d * sd**2 for d, sd in pairs) / df) if df else math.nan


def _controls(strategy: str, run: str) -> bool:
    """Whether `run` is a control or the online run of `strategy` (by RunName, not by prefix: tier_low_random is
    tier_low's random draw, another strategy)."""
    parsed = RunName.parse(run)
    return (parsed.control is not None or parsed.online) and parsed.strategy == strategy


def power_table(summary: pl.DataFrame, power: float = 0.8, alpha: float = 0.05, max_seeds: int = 1000) -> pl.DataFrame:
    """How many seeds a comparison needs: per model x task, every pair of strategies (final in-distribution
    accuracy, paired by seed) and every strategy against the base model (its gain, against zero).

    kind: "control" for a strategy against its control or its online run (`RunName`), listed first; "base" for the gain; "pair" for the rest. difference: mean over the
    seeds both ran of strategy minus versus (points); difference_sd: its standard deviation over those
    seeds. The spread the power analysis uses is `pooled_sd`, pooled over the model x task's comparisons
    of the same sort (two runs against each other, kinds control and pair; or a gain, kind base), each
    weighted by its degrees of freedom (`pooled_sd`): a standard deviation from 3 or 4 seeds is too rough
    to plan on alone, and a comparison whose seeds happened to agree would otherwise read as settled in 2
    seeds. effect_size = difference / pooled_sd; seeds_needed: the fewest seeds at which a paired t-test
    at two-sided level `alpha` tells that difference from zero with probability `power`
    (`statistics.seeds_needed`), ">max_seeds" beyond it (not resolvable at this design, which does not
    make the two the same), "not estimable" with one seed.
    """
    rows = []
    for (model, task), cell in summary.group_by(["model", "task"], maintain_order=True):
        by_strategy = {s: dict(zip(g["seed"], g["final_accuracy"]))
                       for (s,), g in cell.group_by(["strategy"], maintain_order=True)}
        gains = {s: dict(zip(g["seed"], g["gain"])) for (s,), g in cell.group_by(["strategy"], maintain_order=True)}
        names = sorted(by_strategy, key=strategy_sort_key)
        comparisons = []
        for i, a in enumerate(names):
            comparisons.append((a, "base", "base", gains[a]))
            for b in names[i + 1:]:
                first, second = (b, a) if _controls(b, a) else (a, b)
                kind = "control" if _controls(first, second) else "pair"
                mine, other = by_strategy[first], by_strategy[second]
                comparisons.append((first, second, kind, {s: mine[s] - other[s] for s in mine if s in other}))
        own = []
        for strategy, versus, kind, diffs in comparisons:
            v = np.array(list(diffs.values()), dtype=float)
            own.append({"model": model, "task": task, "kind": kind, "strategy": strategy, "versus": versus,
                        "n_seeds": int(v.size), "difference": float(v.mean()) if v.size else math.nan,
                        "difference_sd": float(v.std(ddof=1)) if v.size > 1 else math.nan})
        pooled = {sort: pooled_sd([r["difference_sd"] for r in own if (r["kind"] == "base") == sort],
                                  [r["n_seeds"] for r in own if (r["kind"] == "base") == sort]) for sort in (False, True)}
        for r in own:
            sd = pooled[r["kind"] == "base"]
            if r["n_seeds"] < 2:
                needed = "not estimable"
            else:
                n = seeds_needed(r["difference"], sd, power, alpha, max_seeds)
                needed = str(n) if n is not None else f">{max_seeds}"
            rows.append(r | {"pooled_sd": sd if r["n_seeds"] > 1 else math.nan,
                             "effect_size": r["difference"] / sd if r["n_seeds"] > 1 and sd > 0 else math.nan,
                             "seeds_needed": needed})
    schema = {"model": pl.Utf8, "task": pl.Utf8, "kind": pl.Utf8, "strategy": pl.Utf8, "versus": pl.Utf8,
              "n_seeds": pl.Int64, "difference": pl.Float64, "difference_sd": pl.Float64, "pooled_sd": pl.Float64,
              "effect_size": pl.Float64, "seeds_needed": pl.Utf8}
    df = pl.DataFrame(rows, schema=schema)
    if df.height == 0:
        return df
    kinds = {k: i for i, k in enumerate(POWER_KINDS)}
    versus_order = {s: -1 if s == "base" else strategy_sort_key(s)[0] for s in df["versus"].unique()}
    df = df.with_columns(pl.col("kind").replace_strict(kinds, return_dtype=pl.Int64).alias("_kind"),
                         pl.col("versus").replace_strict(versus_order, return_dtype=pl.Int64).alias("_versus"))
    return _order(df, ["model", "task", "_kind", "strategy", "_versus", "versus"]).drop("_kind", "_versus")


def power_note(power: float, alpha: float, max_seeds: int) -> str:
    """The power table's note: how to read it before renting GPUs."""
    return (f"How many seeds tell a difference from zero: per model x task, each strategy against its control "
            f"(kind control: a run named <strategy>_<suffix>, its _online run included), against the base model "
            f"(kind base: its gain) and against every other strategy (kind pair). difference: final in-distribution "
            f"accuracy of strategy minus versus, in points, mean over the seeds both ran, paired by seed; "
            f"difference_sd: its standard deviation over those seeds. pooled_sd: the spread the power analysis "
            f"uses, the standard deviations of the model x task's comparisons pooled, each weighted by its degrees "
            f"of freedom (seeds - 1), separately for runs against runs (kinds control and pair) and for gains "
            f"(kind base): one comparison's spread from a few seeds is too rough to plan on. effect_size: "
            f"difference / pooled_sd. seeds_needed: the fewest seeds at which a paired t-test at two-sided level "
            f"{alpha:g} finds a true difference of that size with probability {power:g} (exact power; report.power); "
            f"not estimable with one seed. Read a row as: a difference of d points with seed spread s needs n seeds. "
            f"A large n, or >{max_seeds}, means the difference is not resolvable at this design, never that the "
            f"two are the same: the pairwise table's equivalence test says whether they are. d is an estimate "
            f"from the seeds run, and a small observed d makes a large n: treat n as an order of magnitude, and a "
            f"small n from few seeds as a reason to run a few more, not as a verdict. It is about this test set "
            f"(the seeds' spread includes evaluation noise; the questions stay fixed).")


TABLES = {
    "headline": "Headline: which strategy gained how much beyond form",
    "accuracy_gain": "Accuracy gain over the base model (Table 1)",
    "runs": "Every run, seed by seed: base and final accuracy, gain and learnable %",
    "gain_curve": "Gain over the base model at every checkpoint: the gain-by-step curve of each strategy",
    "training_dynamics": "Training dynamics: reward, mixed groups, completion length, truncation and KL at every step",
    "pairwise": "Every pair of strategies: which differ and which are equivalent, after Holm's correction",
    "learnable": "Learnable % of training steps (Table 2)",
    "ood_pass_at_k": "Out-of-distribution pass@k (Table 4)",
    "base_split": "Base-wrong vs base-right vs size-matched random vs full pool",
    "tier_accuracy": "Accuracy per difficulty tier, base model and final checkpoint",
    "gain_by_difficulty": "Gain by difficulty: accuracy per bin of the base model's own pass rate on each test question",
    "pool_pass_rates": "Pass-rate distribution of the training pool",
    "subset_pass_rates": "Pass rates of each selected subset",
    "catch_up": "Share of the full-pool run's steps, and whether final accuracy is equivalent to that run's (paper 2's catch-up)",
    "data_overlap": "Pool against benchmarks: questions in both",
    "rollout_budget": "Rollouts and tokens generated per strategy, probing included, against its gain",
    "rescored": "Base and final accuracy rescored by every scorer of the task: form against skill",
    "pass_at_k": "pass@k of the base model at large k against each strategy's final checkpoint: sharpening against new solving",
    "power": "Seeds needed to tell each difference between strategies from zero (paired t, power analysis)",
    "across_tasks": "Every task side by side: each pool's pass-rate profile and each strategy's gain with its verdict",
    "hard_vs_easy": "Hard minus easy on every task, pooled over the tasks (random effects)",
    "recommend_check": "The probe's recommendation checked leaving one task out, beside always hard and always random",
}


def build_tables(res: Results, probes: pl.DataFrame, subsets: pl.DataFrame, level: float = 0.95,
                 n_boot: int = 2000, seed: int = 0, ref: pl.DataFrame | None = None,
                 names: dict | None = None, group_sizes: dict[str, int] | None = None,
                 overlaps: pl.DataFrame | None = None,
                 margin: float = EQUIVALENCE_MARGIN, rescored: tuple[pl.DataFrame, str] | None = None,
                 power: dict[str, Any] | None = None, metrics: Sequence[str] = ("sampled",)
                 ) -> dict[str, tuple[pl.DataFrame, str]]:
    """Every table of the report as {name: (frame, note)}; published columns added when `ref` is given; the
    headline's entry has a third element, how it is written (`render.write_table`'s columns and footnote: its
    note is the answer, its footnote the full reading and the definitions); the learnable % expected from the probe beside the measured one when `group_sizes` (model -> G) is;
    `margin`: report.equivalence_margin, in points, of the catch-up and pairwise tables' equivalence tests;
    `rescored`: the `rescored` table and its note (it reads the completions and the benchmarks' data);
    `power` is the config's report.power (power, alpha, max_seeds) for the power table; `metrics`
    (report.metrics, `loading.METRICS`): the verdict tables (headline, accuracy_gain, runs, gain_curve, pairwise, power)
    hold one block of rows per metric, column `metric`; the other tables read the first."""
    pct = f"{round(100 * level)} %"
    power = {"power": 0.8, "alpha": 0.05, "max_seeds": 1000} | (power or {})
    verdicts = {m: metric_verdicts(res.in_metric(m), level, n_boot, seed, margin, power) for m in metrics}
    summary, gains = verdicts[metrics[0]]["runs"], verdicts[metrics[0]]["gains"]
    learn = learnable_table(summary, level)
    ood = ood_table(res)
    split = base_split_table(gains, subsets)
    tiers = tier_table(res)
    pool = pool_distribution(probes)
    subs = subset_pass_rates(probes, subsets, group_sizes)
    budget = rollout_budget(gains, res.steps, probes)
    tost_pct, alpha = f"{round(100 * max(0.0, 1 - 2 * (1 - level)))} %", f"{1 - level:.3g}"
    catch = catch_up_table(res.runs, level, base=res.base, margin=margin).with_row_index("_row")
    catch = _order(catch, ["model", "task", "strategy", "_row"]).drop("_row")  # strategies in paper order, rows kept
    no_verdict = (" Rows with a single seed on a side have no interval, so equivalence is not shown: run several "
                  "seeds to tell a match from noise." if catch["difference_ci_low"].is_nan().any() else "")
    expected_note = ""
    if group_sizes is not None:
        learn = learn.join(subs.select(*CELL_KEYS, "expected_learnable_pct", "expected_learnable_pct_posterior"),
                           on=CELL_KEYS, how="left")
        expected_note = (" expected_learnable_pct: predicted before training from the probe, the mean chance "
                         "that a group of G samples of the base model mixes right and wrong answers, from each "
                         "example's raw k of K; the subsets were chosen on those same samples, so it reads low "
                         "for the hardest and high for the easiest (0 for examples never solved). "
                         "expected_learnable_pct_posterior: the same from each example's Beta posterior given "
                         "its k of K under a prior fitted to the pool's counts (hardex.posterior), which corrects "
                         "part of that selection bias, not all of it (on a pool the model sometimes solves, 0 "
                         "of K is not never): compare both with learnable_pct. Both predict the base model's groups; training moves the policy away from it, "
                         "so the measured learnable % drifts from them as it learns.")
    gains_out = with_reference(by_metric(verdicts, "gains"), ref, {"base_accuracy": "published_base_accuracy",
                                            "final_accuracy": "published_final_accuracy",
                                            "gain": "published_gain"}, names)
    learn_out = with_reference(learn, ref, {"learnable_pct": "published_learnable_pct"}, names)
    ref_note = ""
    if ref is not None:
        matched = gains_out["published_gain"].is_not_null().sum()
        ref_note = (f" Published columns: the reference run with the same model, task and strategy "
                    f"(names mapped by report.reference_names); {matched} of {gains_out.height} rows matched.")
    metric_note = metrics_note(metrics)
    headline_all, pairwise_all = by_metric(verdicts, "headline"), by_metric(verdicts, "pairwise")
    contrast, contrast_note = contrast_meta_analysis(pairwise_all, probes, metrics, level=level)
    check, check_note = (recommendation_check(headline_all, pairwise_all, recommend_table(subs), metrics, level=level)
                         if group_sizes is not None else
                         (pl.DataFrame(schema={"model": pl.Utf8, "task": pl.Utf8}),
                          "Not checked: the report was built without the runs' group sizes."))
    # the answer first (the first metric's, and where another metric disagrees), then the compact table, then
    # the full reading and what the columns mean
    answer = "\n\n".join([*answer_lines(verdicts[metrics[0]]["headline"][0], metrics[0]),
                           *metric_disagreements(verdicts)])
    headline_layout = {"columns": COMPACT, "footnote": metric_note + " " + verdicts[metrics[0]]["headline"][1]}
    return {
        "headline": (headline_all, answer, headline_layout),
        "accuracy_gain": (gains_out, f"Accuracy in % on each task's first (in-distribution) benchmark; gain in points "
                                     f"(final checkpoint minus base model). {pct} interval: t over seeds with >1 seed, "
                                     f"paired bootstrap over test examples ({n_boot} resamples) with one; both treat "
                                     f"the test questions as fixed. gain_sq CI: {pct} interval over seeds and test "
                                     f"questions together (two-stage bootstrap, {n_boot} resamples: seeds with "
                                     f"replacement, then questions, shared by the seeds of a draw; its standard "
                                     f"error with Student's t over seeds; none with one seed), the one to read when "
                                     f"asking whether a gain holds beyond this test set; it errs wide."
                                     + beyond_controls_note(gains_out, pct) + ref_note + " " + metric_note),
        "runs": (by_metric(verdicts, "runs"), "One row per run (model, task, strategy, seed), as accuracy_gain and learnable average "
                          "them: accuracy in % on the task's first benchmark, the base model's evaluated with the "
                          "run's own seed; gain in points (final checkpoint minus base); learnable_pct over its "
                          "n_steps training steps. Read it for the spread behind a mean: one seed that barely "
                          "trained moves a 4-seed mean by a quarter of its shortfall."),
        "gain_curve": (by_metric(verdicts, "gain_curve"), gain_curve_note(level) + " " + metric_note),
        "training_dynamics": (dynamics_table(res.steps, subs if group_sizes is not None else None), dynamics_note()),
        "pairwise": (by_metric(verdicts, "pairwise"), pairwise_note(level, margin, n_boot) + " " + metric_note),
        "learnable": (learn_out, "Learnable % = 100 x mean over training steps of the share of groups whose rewards "
                                 f"differ (nonzero std). {pct} t-interval over seeds when there are several."
                                 + expected_note + ref_note),
        "ood_pass_at_k": (ood, "pass@k in % (unbiased estimator) on every benchmark after a task's first, for the "
                               "base model and each strategy's final checkpoint (mean over seeds)."),
        "base_split": (split, "Training on examples the base model gets wrong vs right (size-matched), their "
                              "size-matched random control and the full pool. vs_base_right_pct: relative difference "
                              "of final accuracy to base_right. gain CI: as in accuracy_gain (t over seeds, questions "
                              "fixed)." if split.height else
                       "No base_wrong / base_right / matched_random / full runs in this configuration."),
        "tier_accuracy": (tiers, "Accuracy in % per difficulty tier: the base model and each strategy's final "
                                 "checkpoint (mean over seeds)." if tiers.height else
                          "No benchmark of this configuration has tiers."),
        "gain_by_difficulty": (gain_by_difficulty(res, metrics, level, n_boot, seed),
                               gain_by_difficulty_note(level, n_boot) + " " + metric_note),
        "pool_pass_rates": (pool, "Pool examples per probe pass rate (correct samples / K)."),
        "subset_pass_rates": (subs, "Size and pass rates of the pool and of each selected subset; learnable_examples: "
                                    "those with 0 < pass rate < 1 (mean over seeds), the only ones whose GRPO groups "
                                    "can mix rewards." + expected_note + ties_note(subs)),
        "catch_up": (catch, "Each strategy against the run on the full pool (strategy full), on each benchmark, "
                            "overall and per tier: paper 2's claim that the lower tiers alone match the full run's "
                            "accuracy with ~45 % of its steps, read as a step share and an equivalence. share_pct = 100 "
                            "x steps (the run's own last checkpoint: all its training) / full_steps. accuracy, "
                            "full_accuracy: final accuracy in % (mean over seeds). difference: run minus full, in "
                            f"points, with its {tost_pct} t-interval (paired by seed number when both ran the same "
                            "seeds, Welch's otherwise; none with one seed). equivalent: two one-sided tests at "
                            f"alpha = {alpha}: yes when that interval lies inside [-margin, +margin] "
                            "(report.equivalence_margin, points), no when it lies wholly outside (a difference "
                            "beyond the margin), not shown otherwise or without an interval. full_gain: the full "
                            f"run's final minus the base model's accuracy (base_accuracy), paired by seed, with its "
                            f"{pct} t-interval; where its mean is <= 0 or its interval reaches 0 the row says "
                            f"'{NO_GAIN}' and gives no share and no first crossing. first_crossing_share "
                            "(secondary, not paper 2's measure): the share of the full run's steps at which the run "
                            "first reaches the full run's final accuracy of the same seed, the base model counting as "
                            f"step 0 (mean over seeds, {pct} t-interval, low end stopped at 0; given only when every "
                            "seed reaches it, reached_seeds of n_seeds did)." + no_verdict if catch.height else
                     "No run on the full pool (strategy full) in this configuration: nothing to catch up with."),
        "data_overlap": (overlaps if overlaps is not None else load_overlaps([]),
                         "Questions of each benchmark that are also in the task's pool: exact, only after "
                         "normalizing case, spacing and punctuation, or as the same problem in other words or order "
                         "(same_problem: a generated family's canonical form, e.g. 4 + 3 for 3 + 4). A task with more "
                         "than tasks.<task>.allow_overlap (allowed) of them stops before probing: its gain would be "
                         "measured on training data. near_duplicates: the other benchmark questions with the same "
                         "numbers and operators as a pool question (same_numbers) or an 8-word run in common "
                         "(shared_ngram, template wording left out); refused beyond "
                         "tasks.<task>.allow_near_duplicates (allowed_near; empty: reported only). Where pool and "
                         "benchmark both have a canonical form, it decides alone."),
        "rollout_budget": (budget, "Completions (rollouts) and tokens each strategy generated, mean over seeds. "
                                   "probe: the probe samples of the whole pool, charged to every strategy that "
                                   "selects by pass rate (hard, medium, easy, band, learnable and their _online "
                                   "runs), none to the others; train: completions trained on; discarded: those of "
                                   "groups online filtering dropped for agreeing rewards; capped_steps: steps where "
                                   "it reached grpo.online_max_rounds. Tokens: new tokens, EOS included (TRL's own "
                                   "generate records none: its mean completion length times its rollouts). Gain as "
                                   f"in accuracy_gain, with its {pct} interval." if budget.height else
                           "No run recorded its rollouts (results from before the count was kept)."),
        "pass_at_k": (pass_at_k_table(res, level, seed=seed), pass_at_k_note(level)),
        "rescored": rescored if rescored is not None else
        (pl.DataFrame(schema={"model": pl.Utf8, "task": pl.Utf8, "strategy": pl.Utf8}),
         "Not rescored: the completions were not rescored for this report (report.rescoring.rescored_table)."),
        "power": (by_metric(verdicts, "power"), power_note(power["power"], power["alpha"], power["max_seeds"])
                  + " " + metric_note),
        "across_tasks": (across_tasks_table(headline_all, probes, metrics),
                         "One row per metric x model x task: the pool's profile from the probe (pool: examples; "
                         "never_solved_pct, always_solved_pct, mixed_pct: shares solved in none, all, some of the "
                         "K samples), then each strategy's gain over the base model in points with the headline's "
                         f"{pct} interval, verdict and seeds. " + metric_note),
        "hard_vs_easy": (contrast, contrast_note + " " + metric_note),
        "recommend_check": (check, check_note + " " + metric_note),
    }


def metric_verdicts(res: Results, level: float, n_boot: int, seed: int, margin: float,
                    power: dict[str, Any]) -> dict[str, Any]:
    """The verdict tables in one metric (`res` already in it, `Results.in_metric`): runs (run_summary), gains
    (Table 1 with its intervals and controls), pairwise, headline (frame and note), the gain curve and power."""
    summary = run_summary(res)
    gains = gain_table(res, level, n_boot, seed, summary)
    gains = with_seeds_and_questions_interval(gains, res, summary, level, n_boot, seed)
    gains = gain_beyond_controls(gains, summary, res, level, n_boot, seed)
    pairwise = pairwise_table(res, summary, level, n_boot, seed, margin)  # the headline reads its verdicts
    return {"runs": summary, "gains": gains, "pairwise": pairwise, "headline": headline_table(gains, pairwise, level),
            "gain_curve": gain_curve(res, level),
            "power": power_table(summary, power["power"], power["alpha"], power["max_seeds"])}


def by_metric(verdicts: dict[str, dict[str, Any]], name: str) -> pl.DataFrame:
    """One verdict table over every metric: the blocks in report.metrics' order within each model x task,
    column `metric` after task (left out where only one metric is reported, as before metrics were named)."""
    frames = [(v[name][0] if isinstance(v[name], tuple) else v[name]) for v in verdicts.values()]
    if len(frames) == 1:
        return frames[0]
    blocks = []
    for rank, (metric, df) in enumerate(zip(verdicts, frames)):
        at = df.columns.index("task") + 1 if "task" in df.columns else 0
        blocks.append(df.with_columns(pl.lit(metric).alias("metric"), pl.lit(rank).alias("_metric"))
                      .select(*df.columns[:at], "metric", *df.columns[at:], "_metric"))
    both = pl.concat(blocks, how="diagonal_relaxed")
    keys = [k for k in ("model", "task") if k in both.columns]
    return both.with_row_index("_row").sort([*keys, "_metric", "_row"]).drop("_row", "_metric") if keys else \
        both.drop("_metric")


def metrics_note(metrics: Sequence[str]) -> str:
    """Which metric each verdict is in (report.metrics): the first decides, the others stand beside it."""
    first = f"Metric: {METRICS[metrics[0]]}"
    if len(metrics) == 1:
        return first + "."
    rest = "; ".join(METRICS[m] for m in metrics[1:])
    return (f"Metrics (column metric, report.metrics): {METRICS[metrics[0]]}, the first, decides (the sequential "
            f"design's looks and the sentences above); beside it {rest}. The same checkpoints in each: a verdict "
            f"that holds in one metric and not in another is said so.")


def metric_disagreements(verdicts: dict[str, dict[str, Any]]) -> list[str]:
    """Per model x task, the findings that hold in one metric and not another, in words: a gain shown above or
    below zero (its interval over seeds), a pair that differs after Holm's correction and which run leads."""
    if len(verdicts) < 2:
        return []
    found: dict[tuple, dict[str, tuple[str, float]]] = {}
    for metric, v in verdicts.items():
        for r in v["headline"][0].iter_rows(named=True):
            sign = interval_sign(r["gain_ci_low"], r["gain_ci_high"]) if r["n_seeds"] > 1 else 0
            state = {1: "shown", -1: "a loss shown", 0: "not shown"}[sign]
            found.setdefault((r["model"], r["task"], f"{r['strategy']}'s gain"), {})[metric] = (state, r["gain"])
        for r in v["pairwise"].iter_rows(named=True):
            if r["difference"] is None:
                continue
            lead = r["strategy"] if r["difference"] > 0 else r["versus"]
            state = f"differs, {lead} ahead" if (r["verdict"] or "").startswith(DIFFERS) else "not shown"
            found.setdefault((r["model"], r["task"], f"{r['strategy']} - {r['versus']}"), {})[metric] = (
                state, r["difference"])
    out = []
    for (model, task, what), by in found.items():
        if len({state for state, _ in by.values()}) > 1:
            words = [f"{state} in {metric} ({value:+.1f})" for metric, (state, value) in by.items()]
            out.append(f"{model} on {task}: {what} {' but '.join(words)}.")
    return out

