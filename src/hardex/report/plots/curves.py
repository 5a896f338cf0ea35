"""The report's figures over training steps: test accuracy per strategy (paper 1's Figure 2, the published curves
overlaid) and per difficulty tier (paper 2), the share of groups with no reward variance, the training dynamics the
runs recorded, and the gain over the base model at every checkpoint.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")  # files only: no display on cluster nodes or in tests

import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from hardex.metrics import sort_tiers  # noqa: E402
from hardex.report.dynamics import QUANTITIES  # noqa: E402
from hardex.report.plots import drawing  # noqa: E402
from hardex.report.plots.drawing import (  # noqa: E402
    _at_least_ten_points,
    _first_metrics_panels,
    _grid,
    _integer_steps,
    _legend_below,
    _legend_of_panels,
    _no_data,
    _rc,
    _style,
    strategy_color,
    strategy_linestyle,
    strategy_marker,
)
from hardex.report.reference import map_names  # noqa: E402
from hardex.selection import strategy_sort_key  # noqa: E402

# ---- Figure 2 of paper 1: accuracy over training -----------------------------------------------------


def plot_accuracy_curves(curves: pl.DataFrame, benchmarks: dict[str, Sequence[str]], paths: Sequence[str | Path],
                         style: dict | None = None, reference: pl.DataFrame | None = None,
                         names: dict | None = None) -> list[Path]:
    """Test accuracy (%) against training step per strategy, one panel per model x task.

    `curves` is `report.runs.accuracy_curves` (fractions; step 0 = base). The task's first benchmark
    is plotted; the base model is a dashed line. Several seeds: their mean, and their range shaded.
    `reference` (`report.reference.reference_curves`) adds the published curves as thin dotted lines, on a
    second step axis at the top when the published run is much longer than this one.
    """
    st = _style(style)
    with plt.rc_context(_rc(st)):
        models = list(dict.fromkeys(curves["model"].to_list()))
        tasks = list(dict.fromkeys(curves["task"].to_list()))
        fig, axes = _grid(models, tasks, st)
        strategies = sorted(set(curves["strategy"]) - {"base"}, key=strategy_sort_key)
        used: dict[str, Any] = {}
        ref_mapped = map_names(pl.DataFrame({"model": models}).join(pl.DataFrame({"task": tasks}), how="cross")
                               .with_columns(pl.lit("").alias("strategy")), names) if reference is not None else None
        for i, model in enumerate(models):
            for j, task in enumerate(tasks):
                ax = axes[i][j]
                bench = benchmarks[task][0]
                sub = curves.filter((pl.col("model") == model) & (pl.col("task") == task)
                                    & (pl.col("benchmark") == bench))
                ax.set_title(f"{model} · {task}  ({bench})")
                ax.set_xlabel("training step (0 = base model)")
                ax.set_ylabel("test accuracy (%)")
                if sub.height == 0:
                    _no_data(ax, "no evaluation results")
                    continue
                base = sub.filter(pl.col("strategy") == "base")
                if base.height:
                    b = 100 * float(base["accuracy"][0])
                    used["base model"] = ax.axhline(b, color="black", ls="--", lw=1.3, label="base model", zorder=4)
                max_step = int(sub["step"].max())
                for s in strategies:
                    runs = sub.filter(pl.col("strategy") == s)
                    if runs.height == 0:
                        continue
                    agg = runs.group_by("step").agg((100 * pl.col("accuracy")).mean().alias("m"),
                                                    (100 * pl.col("accuracy")).min().alias("lo"),
                                                    (100 * pl.col("accuracy")).max().alias("hi"),
                                                    pl.col("seed").n_unique().alias("k")).sort("step")
                    c = strategy_color(s, strategies)
                    # a curve through two checkpoints says nothing of its shape: points, and their range as bars
                    curve = agg.height > 2
                    (line,) = ax.plot(agg["step"], agg["m"], color=c, ls=strategy_linestyle(s) if curve else "none",
                                      marker=strategy_marker(s), ms=3.5 if curve else 6, lw=1.8, label=s)
                    if int(agg["k"].max()) > 1 and curve:
                        ax.fill_between(agg["step"], agg["lo"], agg["hi"], color=c, alpha=0.15, lw=0)
                        used["range over seeds"] = Patch(color="0.5", alpha=0.3, label="range over seeds")
                    elif int(agg["k"].max()) > 1:
                        ax.errorbar(agg["step"], agg["m"], yerr=[agg["m"] - agg["lo"], agg["hi"] - agg["m"]],
                                    fmt="none", ecolor=c, elinewidth=1.0, capsize=3)
                        used["range over seeds"] = Line2D([], [], color="0.4", marker="|", ls="none", ms=10,
                                                          label="range over seeds")
                    used.setdefault(s, line)
                if reference is not None:
                    mapped = ref_mapped.filter((pl.col("model") == model) & (pl.col("task") == task))
                    rm, rt = mapped["ref_model"][0], mapped["ref_task"][0]
                    rsub = reference.filter((pl.col("model") == rm) & (pl.col("task") == rt))
                    if rsub.height:
                        _overlay_published_curves(ax, rsub, strategies, max_step, names)
                        ax.set_title(f"{model} · {task}  ({bench})\ndotted: published {rm} · {rt}")
                        used["published (dotted)"] = Line2D([], [], color="0.3", ls=":", lw=1.2,
                                                            label="published run (dotted)")
                ax.set_xlim(left=0)
                _integer_steps(ax)
                _at_least_ten_points(ax)
        order = [s for s in strategies if s in used] + [k for k in used if k not in strategies]
        _legend_below(fig, [used[k] for k in order], [used[k].get_label() for k in order])
        fig.suptitle("Test accuracy during GRPO training, per selection strategy")
        return drawing.save_figure(fig, paths, st)


# ---- Paper 2: accuracy per difficulty tier over training ---------------------------------------------


def plot_tier_curves(curves: pl.DataFrame, benchmarks: dict[str, Sequence[str]], paths: Sequence[str | Path],
                     style: dict | None = None, full: str = "full") -> list[Path]:
    """Test accuracy (%) per difficulty tier during training, one row per model x task, one column per
    tier after "overall"; x is the share of the full run's steps, so a run on one tier ends early.

    `curves` is `report.catch_up.tier_curves` on the task's first benchmark. Lines: the mean over seeds
    per strategy; a dotted line: the full run's final accuracy, against which the catch_up table tests
    each run's final accuracy for equivalence; a dashed one: the base model. Without a full run, x is the training step.
    """
    st = _style(style)
    cells = list(dict.fromkeys(zip(curves["model"].to_list(), curves["task"].to_list())))
    tiers = ["overall", *dict.fromkeys(sort_tiers(curves.filter(pl.col("tier") != "overall"))["tier"].to_list())]
    strategies = sorted(set(curves["strategy"]), key=strategy_sort_key)
    with plt.rc_context(_rc(st)):
        # a model x task's panels wrap after `cols`: MATH's five levels and overall take two rows of four
        cols = min(len(tiers), 4)
        per_cell = math.ceil(len(tiers) / cols)
        fig, grid = plt.subplots(len(cells) * per_cell, cols, squeeze=False, layout="constrained",
                                 figsize=(st["panel_width"] * 0.85 * cols,
                                          st["panel_height"] * 0.9 * len(cells) * per_cell + 0.9))
        used: dict[str, Any] = {}
        for i, (model, task) in enumerate(cells):
            bench = benchmarks[task][0]
            cell = curves.filter((pl.col("model") == model) & (pl.col("task") == task) & (pl.col("benchmark") == bench))
            full_steps = cell["full_steps"].drop_nulls()
            scale = 100 / int(full_steps[0]) if full_steps.len() and int(full_steps[0]) else None
            for j, tier in enumerate(tiers):
                ax = grid[i * per_cell + j // cols][j % cols]
                sub = cell.filter(pl.col("tier") == tier)
                ax.set_title(f"{model} · {task} · {'all tiers' if tier == 'overall' else f'tier {tier}'}")
                ax.set_xlabel("% of the full run's steps" if scale else "training step")
                if j % cols == 0:
                    ax.set_ylabel("test accuracy (%)")
                if sub.height == 0:
                    _no_data(ax, "no examples of this tier")
                    continue
                base = sub.filter(pl.col("step") == 0)
                if base.height:
                    used["base model"] = ax.axhline(100 * float(base["accuracy"].mean()), color="black", ls="--",
                                                    lw=1.0, label="base model")
                for s in strategies:
                    runs = sub.filter(pl.col("strategy") == s)
                    if runs.height == 0:
                        continue
                    agg = runs.group_by("step").agg((100 * pl.col("accuracy")).mean().alias("m")).sort("step")
                    x = agg["step"].to_numpy() * (scale or 1)
                    (line,) = ax.plot(x, agg["m"], color=strategy_color(s, strategies), ls=strategy_linestyle(s),
                                      marker="o", ms=3, lw=1.6, label=s)
                    used.setdefault(s, line)
                    if s == full:
                        final = runs.filter(pl.col("step") == pl.col("step").max().over("seed"))
                        used["full run's final accuracy"] = ax.axhline(
                            100 * float(final["accuracy"].mean()), color=strategy_color(s, strategies), ls=":",
                            lw=1.3, label="full run's final accuracy")
                ax.set_xlim(left=0)
                _at_least_ten_points(ax)
            for j in range(len(tiers), per_cell * cols):
                grid[i * per_cell + j // cols][j % cols].set_visible(False)
        order = [s for s in strategies if s in used] + [k for k in used if k not in strategies]
        _legend_below(fig, [used[k] for k in order], [used[k].get_label() for k in order])
        fig.suptitle("Test accuracy per difficulty tier during GRPO training (mean over seeds)")
        return drawing.save_figure(fig, paths, st)


def _overlay_published_curves(ax, rsub: pl.DataFrame, strategies: Sequence[str], max_step: int, names) -> None:
    """Published curves as thin dotted lines; on a top step axis when the step scales differ."""
    inverse = {v: k for k, v in ((names or {}).get("strategies") or {}).items()}
    ref_max = int(rsub["step"].max())
    target = ax
    if max_step > 0 and not (0.67 <= ref_max / max_step <= 1.5):
        target = ax.twiny()
        target.set_xlabel("published training step", color="0.3")
        target.tick_params(axis="x", colors="0.3")
        target.grid(False)
        target.set_xlim(0, ref_max * 1.02)
    for (strategy,), g in rsub.group_by(["strategy"], maintain_order=True):
        ours = inverse.get(strategy, strategy)
        if ours not in strategies:
            continue
        g = g.sort("step")
        target.plot(g["step"], g["accuracy"], color=strategy_color(ours, strategies), ls=":", lw=1.2, alpha=0.9)


# ---- the mechanism: groups with no reward variance ------------------------------------------------


def plot_zero_std(steps: pl.DataFrame, paths: Sequence[str | Path], style: dict | None = None) -> list[Path]:
    """Per-step share (%) of GRPO groups whose rewards are all equal (no gradient), per strategy:
    a rolling mean over `rolling_window` steps (bold) over the raw per-step values (faint)."""
    st = _style(style)
    window = max(1, int(st["rolling_window"]))
    with plt.rc_context(_rc(st)):
        models = list(dict.fromkeys(steps["model"].to_list())) or ["(none)"]
        tasks = list(dict.fromkeys(steps["task"].to_list())) or ["(none)"]
        fig, axes = _grid(models, tasks, st, sharey=True)
        strategies = sorted(set(steps["strategy"]), key=strategy_sort_key) if steps.height else []
        used = {}
        for i, model in enumerate(models):
            for j, task in enumerate(tasks):
                ax = axes[i][j]
                ax.set_title(f"{model} · {task}")
                ax.set_xlabel("training step")
                ax.set_ylabel("groups with zero reward std (%)")
                ax.set_ylim(-3, 103)
                sub = steps.filter((pl.col("model") == model) & (pl.col("task") == task)) if steps.height else steps
                if sub.height == 0:
                    _no_data(ax, "no training steps")
                    continue
                for s in strategies:
                    g = sub.filter(pl.col("strategy") == s)
                    if g.height == 0:
                        continue
                    m = g.group_by("step").agg((100 * pl.col("frac_zero_std")).mean().alias("z")).sort("step")
                    c = strategy_color(s, strategies)
                    ax.plot(m["step"], m["z"], color=c, lw=0.8, alpha=0.3)
                    smooth = m["z"].rolling_mean(window_size=window, min_samples=1)
                    (line,) = ax.plot(m["step"], smooth, color=c, ls=strategy_linestyle(s), lw=2, label=s)
                    used.setdefault(s, line)
                _integer_steps(ax)
        handles = [used[s] for s in strategies if s in used]
        handles.append(Line2D([], [], color="0.4", lw=0.8, alpha=0.4, label="per step (raw)"))
        _legend_below(fig, handles, [h.get_label() for h in handles])
        fig.suptitle(f"GRPO groups with no learning signal (rolling mean over {window} steps)")
        return drawing.save_figure(fig, paths, st)



# ---- what happened during training ------------------------------------------------------------------------

def plot_training_dynamics(dynamics: pl.DataFrame, paths: Sequence[str | Path], style: dict | None = None,
                           predicted: pl.DataFrame | None = None) -> list[Path]:
    """One row per model x task, one panel per quantity the runs recorded (`report.dynamics`: mean reward, the share
    of groups whose rewards mixed, mean completion length, the share of completions cut at the length limit and,
    where nonzero, KL to the reference); per strategy the mean over seeds (one line; online and control runs in
    their own lines) with the range over seeds shaded. `dynamics` is `report.dynamics.dynamics_by_step`.
    `predicted` (model, task, strategy, expected_learnable_pct_posterior: the subset_pass_rates table) marks at
    step 0 of the mixed panel the share of mixed groups the probe predicted for each subset at the base model, a
    diamond in its strategy's colour."""
    st = _style(style)
    shown = [name for name, _, _ in QUANTITIES.values() if name in set(dynamics["quantity"])]
    titles = {name: title for name, title, _ in QUANTITIES.values()}
    cells = dynamics.select("model", "task").unique(maintain_order=True).rows() if dynamics.height else []
    strategies = list(dict.fromkeys(dynamics["strategy"])) if dynamics.height else []  # in the frame's order
    with plt.rc_context(_rc(st)):
        fig, axes = plt.subplots(max(1, len(cells)), max(1, len(shown)), squeeze=False, layout="constrained",
                                 figsize=(0.8 * st["panel_width"] * max(1, len(shown)),
                                          0.8 * st["panel_height"] * max(1, len(cells)) + 0.9))
        used = {}
        for i, (model, task) in enumerate(cells):
            sub = dynamics.filter((pl.col("model") == model) & (pl.col("task") == task))
            for j, name in enumerate(shown):
                ax = axes[i][j]
                ax.set_title(f"{model} · {task}: {titles[name]}" if j == 0 else titles[name])
                ax.set_xlabel("training step")
                for s in strategies:
                    m = sub.filter((pl.col("strategy") == s) & (pl.col("quantity") == name)).sort("step")
                    if m.height == 0:
                        continue
                    c = strategy_color(s, strategies)
                    (line,) = ax.plot(m["step"], m["mean"], color=c, ls=strategy_linestyle(s), lw=1.6, label=s)
                    if int(m["n_seeds"].max()) > 1:
                        ax.fill_between(m["step"], m["low"], m["high"], color=c, alpha=0.12, lw=0)
                        used["range"] = Patch(color="0.5", alpha=0.3, label="range over seeds")
                    used.setdefault(s, line)
                if name == "mixed_pct" and predicted is not None:
                    for r in predicted.filter((pl.col("model") == model) & (pl.col("task") == task)
                                              & pl.col("strategy").is_in(strategies)).iter_rows(named=True):
                        ax.plot([0], [r["expected_learnable_pct_posterior"]], ls="none", marker="D", ms=6,
                                color=strategy_color(r["strategy"], strategies), mec="black", mew=0.6, zorder=5)
                        used["predicted"] = Line2D([], [], ls="none", marker="D", ms=6, color="0.6", mec="black",
                                                   mew=0.6, label="predicted by the probe (step 0)")
                _integer_steps(ax)
        if not cells:
            _no_data(axes[0][0], "no training steps")
        handles = [used[s] for s in strategies if s in used] + [used[k] for k in ("predicted", "range") if k in used]
        _legend_below(fig, handles, [h.get_label() for h in handles])
        fig.suptitle("Training dynamics per run: lines are the mean over seeds")
        return drawing.save_figure(fig, paths, st)


# ---- the gain over the base model at every checkpoint ----------------------------------------------------


def plot_gain_curve(table: pl.DataFrame, paths: Sequence[str | Path], style: dict | None = None) -> list[Path]:
    """One panel per model x task: each strategy's gain over the base model (points) against training step, from
    0 at step 0 (the base model) through every checkpoint it saved, its t-interval over seeds as a band; control
    runs dashed or dotted in their strategy's colour. `table` is the gain_curve table (or its CSV); where it
    holds several metrics, the first."""
    st = _style(style)
    table, _, models, tasks, strategies = _first_metrics_panels(table)
    with plt.rc_context(_rc(st)):
        fig, axes = _grid(models, tasks, st)
        for i, model in enumerate(models):
            for j, task in enumerate(tasks):
                ax = axes[i][j]
                sub = table.filter((pl.col("model") == model) & (pl.col("task") == task)) if table.height else table
                ax.set_title(f"{model} · {task}")
                ax.set_xlabel("training step (0 = base model)")
                ax.set_ylabel("gain over the base model (points)")
                if sub.height == 0:
                    _no_data(ax, "no checkpoint evaluated")
                    continue
                for s in strategies:
                    own = sub.filter(pl.col("strategy") == s).sort("step")
                    if own.height == 0:
                        continue
                    steps, gains = [0, *own["step"]], [0.0, *own["gain"]]
                    c = strategy_color(s, strategies)
                    ax.plot(steps, gains, color=c, ls=strategy_linestyle(s), marker=strategy_marker(s), ms=3.5, lw=1.8,
                            label=s)
                    if own["gain_ci_low"].is_not_null().all():
                        ax.fill_between(steps, [0.0, *own["gain_ci_low"]], [0.0, *own["gain_ci_high"]], color=c,
                                        alpha=0.12, lw=0)
                ax.axhline(0, color="black", ls="--", lw=1.0)
                ax.set_xlim(left=0)
                _integer_steps(ax)
        _legend_of_panels(fig, axes)
        fig.suptitle("Gain over the base model at every checkpoint (bands: t-interval over seeds)")
        return drawing.save_figure(fig, paths, st)
