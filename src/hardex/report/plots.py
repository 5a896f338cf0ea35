"""Figures of the report (matplotlib, Agg backend): each one readable on its own, with a title,
labelled axes and a legend, and the published runs overlaid (thin or hollow) when a reference is
given. Every function takes frames from the report's table modules and writes one file per format.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")  # files only: no display on cluster nodes or in tests

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import matplotlib.ticker  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from hardex.controls import REGISTRY as CONTROL_REGISTRY  # noqa: E402
from hardex.io import atomic_path  # noqa: E402
from hardex.metrics import sort_tiers  # noqa: E402
from hardex.report.dynamics import QUANTITIES  # noqa: E402
from hardex.report.reference import map_names  # noqa: E402
from hardex.statistics import confidence_band  # noqa: E402
from hardex.selection import STRATEGIES, RunName, strategy_sort_key  # noqa: E402

# One colour per strategy in every figure (colour-blind-safe Tableau order, hard = red).
STRATEGY_COLORS = {"hard": "#d62728", "medium": "#ff7f0e", "easy": "#2ca02c", "random": "#1f77b4",
                   "base_wrong": "#9467bd", "base_right": "#8c564b", "matched_random": "#17becf", "full": "#7f7f7f",
                   "band": "#e377c2", "learnable": "#bcbd22"}
assert set(STRATEGY_COLORS) == set(STRATEGIES)
_EXTRA_COLORS = ["#393b79", "#637939", "#8c6d31", "#843c39", "#5254a3", "#8ca252"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">"]

# banner: a line above every figure (a rehearsal's says its numbers are not results)
DEFAULT_STYLE = {"dpi": 150, "font_size": 10, "panel_width": 4.5, "panel_height": 3.2, "rolling_window": 5,
                 "banner": None}


def strategy_color(strategy: str, known: Sequence[str] = ()) -> str:
    """A run's colour: its strategy's, which its online run and its control runs share."""
    strategy = RunName.parse(strategy).strategy
    if strategy in STRATEGY_COLORS:
        return STRATEGY_COLORS[strategy]
    others = sorted(s for s in known if s not in STRATEGY_COLORS) or [strategy]
    return _EXTRA_COLORS[(others.index(strategy) if strategy in others else 0) % len(_EXTRA_COLORS)]


# a control or online run shares its strategy's colour and is told apart by its line and marker (a control's are its
# record's, hardex.controls.REGISTRY; thin dotted lines are published runs)
STRATEGY_LINESTYLE, STRATEGY_MARKER = "-", "o"
ONLINE_LINESTYLE = (0, (3, 1, 1, 1, 1, 1))  # dash-dot-dot: the strategy's subset, filtered online


def strategy_linestyle(strategy: str) -> Any:
    """A run's line: solid for a strategy, dash-dot-dot for its online run, its control's for a control run
    (`Control.linestyle`: dash-dot for the shuffled-reward control, dashed for format, dotted for random reward)."""
    run = RunName.parse(strategy)
    if run.online:
        return ONLINE_LINESTYLE
    return CONTROL_REGISTRY[run.control].linestyle if run.control else STRATEGY_LINESTYLE


def strategy_marker(strategy: str) -> str:
    """A run's marker: a circle for a strategy and its online run, its control's for a control run
    (`Control.marker`: a triangle, square or cross for the shuffled-reward, format and random-reward controls)."""
    control = RunName.parse(strategy).control
    return CONTROL_REGISTRY[control].marker if control else STRATEGY_MARKER


def _style(style: dict[str, Any] | None) -> dict[str, Any]:
    return {**DEFAULT_STYLE, **(style or {})}


def _rc(st: dict[str, Any]) -> dict[str, Any]:
    fs = st["font_size"]
    return {"font.size": fs, "axes.titlesize": fs + 1, "axes.labelsize": fs, "legend.fontsize": fs - 1,
            "xtick.labelsize": fs - 1, "ytick.labelsize": fs - 1, "figure.titlesize": fs + 3,
            "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False}


def save_figure(fig, paths: Sequence[str | Path], st: dict[str, Any]) -> list[Path]:
    """Write the figure once per path, the format from each suffix (png, pdf, svg), under the style's banner."""
    if st["banner"]:
        fig.text(0.5, 1.0, st["banner"], ha="center", va="bottom", color="darkred", fontweight="bold",
                 fontsize=st["font_size"] + 2)
    out = []
    for p in paths:
        p = Path(p)
        with atomic_path(p) as tmp:
            fig.savefig(tmp, dpi=st["dpi"], format=p.suffix.lstrip("."), bbox_inches="tight")
        out.append(p)
    plt.close(fig)
    return out


def _grid(models: Sequence[str], tasks: Sequence[str], st: dict[str, Any], sharey: bool = False):
    """One panel per model x task: rows = models, columns = tasks."""
    fig, axes = plt.subplots(len(models), len(tasks), squeeze=False, layout="constrained", sharey=sharey,
                             figsize=(st["panel_width"] * len(tasks), st["panel_height"] * len(models) + 0.9))
    return fig, axes


def _no_data(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4", wrap=True)


def _legend_below(fig, handles, labels) -> None:
    """One legend for all panels, under them, as many columns as the figure's width allows."""
    if handles:
        per_row = max(1, min(len(handles), int(fig.get_figwidth() / 2.0)))
        fig.legend(handles, labels, loc="outside lower center", ncol=per_row, frameon=False)


def _integer_steps(ax) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _at_least_ten_points(ax) -> None:
    """Flat accuracy curves (in %): show at least 10 points, not a magnified 0.01."""
    lo, hi = ax.get_ylim()
    if hi - lo < 10:
        mid = (hi + lo) / 2
        ax.set_ylim(max(-1.0, mid - 5), max(mid + 5, 9.0))


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
                sub = curves.filter((pl.col("model") == model) & (pl.col("task") == task) & (pl.col("benchmark") == bench))
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
                        ax.errorbar(agg["step"], agg["m"], yerr=[agg["m"] - agg["lo"], agg["hi"] - agg["m"]], fmt="none",
                                    ecolor=c, elinewidth=1.0, capsize=3)
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
        return save_figure(fig, paths, st)


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
                                 figsize=(st["panel_width"] * 0.85 * cols, st["panel_height"] * 0.9 * len(cells) * per_cell + 0.9))
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
        return save_figure(fig, paths, st)


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


# ---- Figure 3 of paper 1: learnable % against gain ---------------------------------------------------


def regression_title(fit: dict[str, Any], level: int) -> str:
    """What the learnable-% figure shows, from its fit: "predicts" only where the slope's interval excludes 0."""
    if fit.get("slope") is None:
        return f"Learnable % against the gain: no fit (n = {fit['n']} cells, learnable % without spread)"
    r2 = f"R² {fit['r2']:.2f}" if fit.get("r2") is not None else "R² undefined"
    lo, hi = fit.get("slope_ci") or (None, None)
    slope = f"slope {fit['slope']:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if None not in (lo, hi) else "")
    if None not in (lo, hi) and (lo > 0 or hi < 0):
        return f"Learnable % predicts the gain ({level} % interval): {r2}, {slope}, n = {fit['n']}"
    shown = "no slope shown" if None not in (lo, hi) else "too few cells for an interval"
    return f"Learnable % against the gain: {r2}, {slope}, n = {fit['n']}: {shown}"


def plot_learnable_vs_gain(report: dict[str, Any], paths: Sequence[str | Path], style: dict | None = None) -> list[Path]:
    """Learnable % (x) against accuracy gain (y), one point per model x task x strategy (seeds averaged):
    colour = strategy, marker = model, the OLS fit with its confidence band, and R² and slope on the
    plot. `report` is `report.regression.regression_report`;
    its "published" part, when present, is drawn with hollow markers and a dashed fit."""
    st = _style(style)
    ours, pub = report["this_run"], report.get("published")
    pts = ours["points"]
    strategies = sorted({p["strategy"] for p in pts} | {p["strategy"] for p in (pub or {}).get("points", [])},
                        key=strategy_sort_key)
    models = list(dict.fromkeys([p["model"] for p in pts] + [p["model"] for p in (pub or {}).get("points", [])]))
    marker = {m: MARKERS[i % len(MARKERS)] for i, m in enumerate(models)}
    with plt.rc_context(_rc(st)):
        fig, ax = plt.subplots(figsize=(st["panel_width"] * 1.55, st["panel_height"] * 1.6), layout="constrained")
        xs_all = [p["learnable_pct"] for p in pts] + [p["learnable_pct"] for p in (pub or {}).get("points", [])]
        lo, hi = (min(xs_all), max(xs_all)) if xs_all else (0.0, 100.0)
        pad = max(1.0, 0.05 * (hi - lo))
        grid = np.linspace(max(0.0, lo - pad), hi + pad, 200)
        lines = []
        for fit, label, color, ls, filled in ((ours, "this run", "black", "-", True),
                                              (pub, "published", "0.45", "--", False)):
            if not fit:
                continue
            for p in fit["points"]:
                c = strategy_color(p["strategy"], strategies)
                ax.scatter(p["learnable_pct"], p["gain"], marker=marker[p["model"]], s=55 if filled else 60,
                           facecolors=c if filled else "none", edgecolors=c if not filled else "white",
                           linewidths=1.4 if not filled else 0.6, zorder=3 if filled else 2)
            if fit.get("slope") is None:
                lines.append(f"{label}: no fit (learnable % has no spread, n = {fit['n']})")
                continue
            yhat, blo, bhi = confidence_band(fit, grid)
            ax.plot(grid, yhat, color=color, ls=ls, lw=1.6 if filled else 1.2, zorder=1)
            if np.isfinite(blo).all():
                ax.fill_between(grid, blo, bhi, color=color, alpha=0.15 if filled else 0.08, lw=0, zorder=0)
            ci = fit.get("slope_ci") or [None, None]
            ci_txt = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if None not in ci else ""
            # R² is undefined where every gain is the same (a run that moved nothing): the fit is flat
            r2 = f"{fit['r2']:.2f}" if fit.get("r2") is not None else "undefined (gain has no spread)"
            lines.append(f"{label}: R² = {r2}, slope = {fit['slope']:.2f}{ci_txt}, "
                         f"intercept = {fit['intercept']:.1f}, n = {fit['n']} cells")
        ax.axhline(0, color="0.6", lw=0.8, zorder=0)
        ax.text(0.02, 0.98, "\n".join(lines), transform=ax.transAxes, va="top", ha="left",
                fontsize=st["font_size"] - 1, bbox={"boxstyle": "round", "fc": "white", "ec": "0.7", "alpha": 0.9})
        ax.set_xlabel("learnable % (training groups with mixed rewards)")
        ax.set_ylabel("accuracy gain over base (points)")
        level = round(100 * ours.get("ci_level", 0.95))
        ax.set_title(regression_title(ours, level))
        handles = [Patch(color=strategy_color(s, strategies), label=s) for s in strategies]
        handles += [Line2D([], [], ls="", marker=marker[m], color="0.3", label=m) for m in models]
        handles += [Line2D([], [], color="black", lw=1.6, label="fit (this run)")]
        if pub:
            handles += [Line2D([], [], ls="", marker="o", mfc="none", mec="0.3", label="published (hollow)"),
                        Line2D([], [], color="0.45", ls="--", lw=1.2, label="fit (published)")]
        ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False,
                  title="strategy / model")
        return save_figure(fig, paths, st)


# ---- pool pass rates with the subsets marked ----------------------------------------------------------


def plot_pool_pass_rates(probes: pl.DataFrame, subsets: pl.DataFrame, paths: Sequence[str | Path],
                         style: dict | None = None) -> list[Path]:
    """Histogram of the pool's pass rates (one bar per value j/K), and below it one row per subset:
    the span of its pass rates (line), the middle half (thick bar) and its mean (dot), with the
    expected learnable % when the subsets carry `expected_mixed`. One such pair per model (rows)
    x task (columns)."""
    st = _style(style)
    models = list(dict.fromkeys(probes["model"].to_list()))
    tasks = list(dict.fromkeys(probes["task"].to_list()))
    strategies = sorted(set(subsets["strategy"]), key=strategy_sort_key)
    strip = 0.28 * max(1, len(strategies)) + 0.5
    with plt.rc_context(_rc(st)):
        fig = plt.figure(layout="constrained", figsize=(st["panel_width"] * len(tasks),
                                                        (st["panel_height"] + strip) * len(models) + 1.0))
        outer = fig.add_gridspec(len(models), len(tasks))
        for i, model in enumerate(models):
            for j, task in enumerate(tasks):
                cell = outer[i, j].subgridspec(2, 1, height_ratios=[st["panel_height"], strip])
                top = fig.add_subplot(cell[0])
                bottom = fig.add_subplot(cell[1], sharex=top)
                pool = probes.filter((pl.col("model") == model) & (pl.col("task") == task))
                subs = subsets.filter((pl.col("model") == model) & (pl.col("task") == task))
                _pool_cell(top, bottom, pool, subs, strategies, st, f"{model} · {task}")
        handles = [Patch(color="0.65", label="pool (histogram)"),
                   Line2D([], [], color="0.2", ls="--", label="pool mean"),
                   Line2D([], [], color="0.3", lw=1.5, label="subset: range"),
                   Line2D([], [], color="0.3", lw=6, alpha=0.5, label="subset: middle 50 %"),
                   Line2D([], [], ls="", marker="o", color="0.3", mec="black", label="subset: mean")]
        _legend_below(fig, handles, [h.get_label() for h in handles])
        fig.suptitle("Probe pass rates of the pool and of each selected subset")
        return save_figure(fig, paths, st)


def _pool_cell(top, bottom, pool: pl.DataFrame, subs: pl.DataFrame, strategies: Sequence[str],
               st: dict[str, Any], title: str) -> None:
    from matplotlib.ticker import MaxNLocator

    top.set_title(title)
    if pool.height == 0:
        _no_data(top, "no probe table")
        return
    k = max(1, int(pool["k"].max()))
    counts = pool.group_by("pass_rate").agg(pl.len().alias("n")).sort("pass_rate")
    top.bar(counts["pass_rate"], counts["n"], width=0.8 / k, color="0.65", edgecolor="0.3")
    top.axvline(float(pool["pass_rate"].mean()), color="0.2", ls="--", lw=1)
    top.set_title(f"{title}: pool of {pool.height}, K = {k}")
    top.set_ylabel("pool examples")
    top.yaxis.set_major_locator(MaxNLocator(integer=True))
    top.tick_params(labelbottom=False)
    n_rows = max(1, len(strategies))
    for r, s in enumerate(strategies):
        v = subs.filter(pl.col("strategy") == s)["pass_rate"].to_numpy()
        if v.size == 0:
            continue
        c, y = strategy_color(s, strategies), n_rows - 1 - r
        q1, q3 = np.quantile(v, [0.25, 0.75])
        bottom.plot([v.min(), v.max()], [y, y], color=c, lw=1.5)
        bottom.plot([q1, q3], [y, y], color=c, lw=6, alpha=0.5, solid_capstyle="butt")
        bottom.plot(v.mean(), y, "o", color=c, mec="black", ms=6)
        label = f"n={v.size}, mean {v.mean():.2f}"
        if "expected_mixed" in subs.columns:  # what GRPO should learn from, before any training
            mixed = subs.filter(pl.col("strategy") == s)["expected_mixed"].mean()
            label += f"\nexp. learnable {100 * mixed:.0f} %"
        bottom.text(1.04, y, label, va="center", fontsize=st["font_size"] - 3)
    bottom.set_yticks(range(n_rows), list(reversed(strategies)) or [""])
    bottom.set_ylim(-0.7, n_rows - 0.3)
    bottom.set_xlim(-0.5 / k - 0.02, 1.35)
    bottom.set_xticks(np.linspace(0, 1, 6))
    bottom.set_xlabel("probe pass rate (correct samples / K)")
    bottom.grid(axis="y", alpha=0)


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
        return save_figure(fig, paths, st)



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
        return save_figure(fig, paths, st)


# ---- gain and learnable % against model capacity ----------------------------------------------------


def _human_count(n: float) -> str:
    """1412608 -> '1.41M': parameter counts as people write them."""
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return f"{n:.0f}"


def plot_capacity(gains: pl.DataFrame, learnable: pl.DataFrame, capacity: dict[str, float],
                  paths: Sequence[str | Path], style: dict | None = None) -> list[Path]:
    """Per task (rows): the gain of each strategy against the model's size (left), with its interval,
    and the learnable % of its runs (right). Where the hardest subset stops (or starts) winning is where
    its line crosses the others: the crossover between the papers' regimes, which neither paper shows.

    `gains` and `learnable` are `report.gains.gain_table` and `report.gains.learnable_table`; `capacity` maps
    each model to its parameter count.
    """
    st = _style(style)
    tasks = list(dict.fromkeys(gains["task"].to_list()))
    strategies = sorted(set(gains["strategy"]), key=strategy_sort_key)
    with plt.rc_context(_rc(st)):
        fig, axes = plt.subplots(len(tasks), 2, squeeze=False, layout="constrained",
                                 figsize=(2 * st["panel_width"], st["panel_height"] * len(tasks) + 0.8))
        for i, task in enumerate(tasks):
            for ax, table, col, label in ((axes[i][0], gains, "gain", "gain over the base model (points)"),
                                          (axes[i][1], learnable, "learnable", "learnable % (groups with a gradient)")):
                value = "gain" if col == "gain" else "learnable_pct"
                for k, strategy in enumerate(strategies):
                    rows = table.filter((pl.col("task") == task) & (pl.col("strategy") == strategy)
                                        & pl.col("model").is_in(list(capacity))).sort(
                        pl.col("model").replace_strict(capacity, return_dtype=pl.Float64))
                    if rows.height == 0:
                        continue
                    x = np.array([capacity[m] for m in rows["model"]]) * (1 + 0.03 * (k - len(strategies) / 2))
                    y = rows[value].to_numpy()
                    lo, hi = rows[f"{col}_ci_low"].to_numpy(), rows[f"{col}_ci_high"].to_numpy()
                    err = np.vstack([y - lo, hi - y])
                    ax.errorbar(x, y, yerr=np.where(np.isfinite(err), err, 0), color=strategy_color(strategy, strategies),
                                marker=MARKERS[k % len(MARKERS)], capsize=3, lw=1.5, label=strategy)
                if col == "gain":
                    ax.axhline(0, color="0.3", lw=0.8)
                ax.set_xscale("log")
                # one tick per model, named: log-scale minor labels overlap when the sizes are close
                sizes = sorted(capacity.items(), key=lambda kv: kv[1])
                ax.set_xticks([v for _, v in sizes], [f"{name}\n{_human_count(v)}" for name, v in sizes])
                ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
                ax.set_xlabel("model (parameters)")
                ax.set_ylabel(label)
                ax.set_title(f"{task}: {'gain' if col == 'gain' else 'learnable %'} by capacity")
        handles, labels = axes[0][0].get_legend_handles_labels()
        _legend_below(fig, handles, labels)
        fig.suptitle("Which subset wins, by model capacity (bars: intervals of the gain and learnable % tables)")
        return save_figure(fig, paths, st)


# ---- compute: gain against rollouts and tokens (offline selection vs online filtering) -------------


def _dodge(xs: Sequence[float], step: float = 1.04) -> list[float]:
    """Positive x values on a log axis, those within 1 % of each other spread by factors of `step`
    around their value, so that strategies of equal cost do not hide each other."""
    out = list(xs)
    groups: list[list[int]] = []
    for i in sorted(range(len(xs)), key=lambda i: xs[i]):
        if groups and xs[i] <= xs[groups[-1][0]] * 1.01:
            groups[-1].append(i)
        else:
            groups.append([i])
    for group in groups:
        for j, i in enumerate(group):
            out[i] = xs[i] * step ** (j - (len(group) - 1) / 2)
    return out


def plot_gain_vs_compute(budget: pl.DataFrame, paths: Sequence[str | Path], style: dict | None = None) -> list[Path]:
    """Per model x task (rows): each strategy's gain against the rollouts (left) and tokens (right) it
    generated in all, probing and discarded groups included; bars are the gain's interval. A point up
    and to the left buys more gain for less compute. Online runs share their strategy's colour, with
    open markers; strategies of equal cost are nudged apart (by at most a few % per neighbour).
    `budget` is `report.rollout_budget.rollout_budget`."""
    st = _style(style)
    cells = budget.select("model", "task").unique(maintain_order=True).rows()
    strategies = sorted(set(budget["strategy"]), key=strategy_sort_key)
    with plt.rc_context(_rc(st)):
        fig, axes = plt.subplots(max(1, len(cells)), 2, squeeze=False, layout="constrained",
                                 figsize=(2 * st["panel_width"], st["panel_height"] * max(1, len(cells)) + 0.9))
        for i, (model, task) in enumerate(cells):
            rows = budget.filter((pl.col("model") == model) & (pl.col("task") == task))
            for ax, col, label in ((axes[i][0], "total_rollouts", "rollouts generated (probe + train + discarded)"),
                                   (axes[i][1], "total_tokens", "tokens generated (probe + train + discarded)")):
                points = [(strategy, r) for strategy in strategies
                          if (r := rows.filter(pl.col("strategy") == strategy)).height and r[col][0] is not None]
                xs = _dodge([float(r[col][0]) for _, r in points])
                for k, ((strategy, r), x) in enumerate(zip(points, xs)):
                    y, lo, hi = (float(r[c][0]) if r[c][0] is not None else math.nan
                                 for c in ("gain", "gain_ci_low", "gain_ci_high"))
                    err = np.array([[y - lo], [hi - y]])
                    run = RunName.parse(strategy)
                    base = run.strategy
                    marker = MARKERS[(STRATEGIES.index(base) if base in STRATEGIES else k) % len(MARKERS)]
                    color = strategy_color(strategy, strategies)
                    ax.errorbar([x], [y], yerr=np.where(np.isfinite(err), err, 0), color=color, marker=marker,
                                markerfacecolor="white" if run.online else color, markersize=8, capsize=3, lw=1.5,
                                label=strategy)
                ax.axhline(0, color="0.3", lw=0.8)
                ax.set_xscale("log")
                # labelled ticks at 1, 2 and 5 per decade: the costs often span less than one decade
                ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
                ax.xaxis.set_major_formatter(matplotlib.ticker.EngFormatter(sep=""))
                ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
                ax.set_xlabel(label)
                ax.set_ylabel("gain over the base model (points)")
                ax.set_title(f"{model} / {task}")
        if not cells:
            _no_data(axes[0][0], "no run recorded its rollouts")
        handles, labels = axes[0][0].get_legend_handles_labels()
        _legend_below(fig, handles, labels)
        fig.suptitle("Gain against compute: offline selection (filled) and online filtering (open)")
        return save_figure(fig, paths, st)


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
        return save_figure(fig, paths, st)


def _first_metrics_panels(table: pl.DataFrame) -> tuple[pl.DataFrame, str, list[str], list[str], list[str]]:
    """A per-metric table's rows of its first metric, that metric ("sampled" where the table has no column), and
    the models, tasks (the panels' rows and columns) and strategies it holds, in order."""
    metric = table["metric"][0] if "metric" in table.columns and table.height else "sampled"
    if "metric" in table.columns:
        table = table.filter(pl.col("metric") == metric)
    if table.height == 0:
        return table, metric, [""], [""], []
    return (table, metric, list(dict.fromkeys(table["model"])), list(dict.fromkeys(table["task"])),
            sorted(set(table["strategy"]), key=strategy_sort_key))


def _legend_of_panels(fig, axes) -> None:
    """One legend below the panels of every label any panel drew, in the order first drawn."""
    handles, labels = [], []
    for row in axes:
        for ax in row:
            for h, label in zip(*ax.get_legend_handles_labels()):
                if label not in labels:
                    handles.append(h), labels.append(label)
    _legend_below(fig, handles, labels)


# ---- gain by the base model's difficulty of each test question -----------------------------------------


def plot_gain_by_difficulty(table: pl.DataFrame, paths: Sequence[str | Path], style: dict | None = None) -> list[Path]:
    """One panel per model x task: accuracy (%) per bin of the base model's own pass rate on the test questions
    (`report.by_difficulty`), the base model's as a black dashed line and each strategy's final checkpoint in its
    colour and line, its gain's interval as a bar; each bin's question count under its label. `table` is the
    gain_by_difficulty table (or its CSV); where it holds several metrics, the first."""
    st = _style(style)
    table, metric, models, tasks, strategies = _first_metrics_panels(table)
    with plt.rc_context(_rc(st)):
        fig, axes = _grid(models, tasks, st)
        for i, model in enumerate(models):
            for j, task in enumerate(tasks):
                ax = axes[i][j]
                sub = table.filter((pl.col("model") == model) & (pl.col("task") == task)) if table.height else table
                ax.set_title(f"{model} · {task}")
                ax.set_xlabel("base model's pass rate on the question (bin)")
                ax.set_ylabel(f"{metric} accuracy (%)")
                if sub.height == 0:
                    _no_data(ax, "no test question with 2 or more base samples")
                    continue
                bins = list(dict.fromkeys(sub["bin"]))  # the table's rows run from the never-solved bin up
                x = {b: k for k, b in enumerate(bins)}
                base = sub.unique("bin", keep="first").sort(pl.col("bin").replace_strict(x))
                ax.plot([x[b] for b in base["bin"]], base["base_accuracy"], color="black", ls="--", lw=1.3,
                        marker="s", ms=4, label="base model (held-out samples)", zorder=4)
                width = 0.5 / max(1, len(strategies))
                for k, s in enumerate(strategies):
                    own = sub.filter(pl.col("strategy") == s).sort(pl.col("bin").replace_strict(x))
                    if own.height == 0:
                        continue
                    xs = [x[b] + (k - (len(strategies) - 1) / 2) * width for b in own["bin"]]
                    c = strategy_color(s, strategies)
                    ax.plot(xs, own["accuracy"], color=c, ls=strategy_linestyle(s), marker=strategy_marker(s), ms=4.5,
                            lw=1.5, label=s)
                    low = (own["base_accuracy"] + own["gain_ci_low"]).to_numpy()
                    high = (own["base_accuracy"] + own["gain_ci_high"]).to_numpy()
                    ok = np.isfinite(low) & np.isfinite(high)
                    acc = own["accuracy"].to_numpy()
                    ax.errorbar(np.asarray(xs)[ok], acc[ok], yerr=[np.maximum(acc - low, 0)[ok], np.maximum(high - acc, 0)[ok]],
                                fmt="none", ecolor=c, elinewidth=1.0, capsize=2, alpha=0.8)
                ax.set_xticks(range(len(bins)), [f"{b}\n{n} q." for b, n in zip(base["bin"], base["n_questions"])])
                ax.set_ylim(-3, 103)
        _legend_of_panels(fig, axes)
        fig.suptitle(f"Accuracy by the base model's pass rate on each question\n({metric}; bars: the gain's interval)")
        return save_figure(fig, paths, st)


# ---- every task of a study side by side ----------------------------------------------------------------


def plot_across_tasks(headline: pl.DataFrame, paths: Sequence[str | Path], style: dict | None = None) -> list[Path]:
    """One panel per metric (and model): a row per task, each strategy's gain over the base model with the
    headline's interval as a bar, a filled marker where the headline's verdict is a gain shown over several
    seeds (an interval above zero), open otherwise; control runs left out (the headline reads each strategy
    against its own). `headline` is the headline table (or its CSV), with or without its `metric` column."""
    st = _style(style)
    frame = headline if "metric" in headline.columns else headline.with_columns(pl.lit("sampled").alias("metric"))
    panels = frame.select("metric", "model").unique(maintain_order=True).rows() if frame.height else []
    strategies = sorted(set(frame["strategy"]), key=strategy_sort_key) if frame.height else []
    tasks = list(dict.fromkeys(frame["task"])) if frame.height else []
    with plt.rc_context(_rc(st)):
        fig, axes = plt.subplots(1, max(1, len(panels)), squeeze=False, layout="constrained", sharey=True,
                                 figsize=(st["panel_width"] * max(1, len(panels)),
                                          0.45 * max(3, len(tasks)) * max(1, len(strategies)) ** 0.5 + 1.4))
        offsets = np.linspace(-0.3, 0.3, len(strategies)) if len(strategies) > 1 else [0.0]
        for ax, (metric, model) in zip(axes[0], panels):
            rows = frame.filter((pl.col("metric") == metric) & (pl.col("model") == model))
            for k, strategy in enumerate(strategies):
                own = rows.filter(pl.col("strategy") == strategy)
                for r in own.iter_rows(named=True):
                    y = tasks.index(r["task"]) + offsets[k]
                    lo, hi = r["gain_ci_low"], r["gain_ci_high"]
                    known = lo is not None and hi is not None and lo == lo and hi == hi
                    shown = known and r["n_seeds"] > 1 and lo > 0
                    color = strategy_color(strategy, strategies)
                    ax.errorbar([r["gain"]], [y], xerr=[[r["gain"] - lo], [hi - r["gain"]]] if known else None,
                                color=color, marker=MARKERS[k % len(MARKERS)], markersize=7, capsize=2, lw=1.2,
                                markerfacecolor=color if shown else "white", linestyle="none")
            ax.axvline(0, color="0.3", lw=0.8)
            ax.set_yticks(range(len(tasks)), tasks)
            ax.set_xlabel(f"gain over the base model (points, {metric} accuracy)")
            ax.set_title(f"{model}: {metric} accuracy")
        axes[0][0].invert_yaxis()  # the first task on top (the panels share the axis: inverted once)
        if not panels:
            _no_data(axes[0][0], "no run finished")
        handles = [Line2D([], [], color=strategy_color(s, strategies), marker=MARKERS[k % len(MARKERS)],
                          linestyle="none", markersize=7) for k, s in enumerate(strategies)]
        _legend_below(fig, handles, strategies)
        fig.suptitle("Gain per task and strategy: filled where the gain is shown over several seeds, open where not")
        return save_figure(fig, paths, st)


# ---- sharpening against new solving: pass@k against k ----------------------------------------------------


def plot_pass_at_k(table: pl.DataFrame, paths: Sequence[str | Path], style: dict | None = None) -> list[Path]:
    """Per model x task (one panel each): pass@k (%) against k on a log2 axis, the base model (black,
    dashed, markers) and each strategy's final checkpoint up to its own samples, with its sharpening null's
    predicted pass@k (`null_pass@k`: the base's fitted Beta sharpened to the checkpoint's pass@1) as a dashed
    line of its colour without markers. A trained curve on its dashed line is what sharpening the base
    predicts. `table` is `report.sharpening.pass_at_k_table` (or its CSV; a table from before the null
    columns draws no null)."""
    st = _style(style)
    ks = sorted(int(c.split("@")[1]) for c in table.columns if c.startswith("pass@"))
    cells = table.select("model", "task").unique(maintain_order=True).rows() if table.height else []
    strategies = sorted(set(table["strategy"]) - {"base"}, key=strategy_sort_key) if table.height else []
    with plt.rc_context(_rc(st)):
        fig, axes = plt.subplots(1, max(1, len(cells)), squeeze=False, layout="constrained",
                                 figsize=(st["panel_width"] * max(1, len(cells)), st["panel_height"] + 0.9))
        drew_null = False
        for ax, (model, task) in zip(axes[0], cells):
            rows = table.filter((pl.col("model") == model) & (pl.col("task") == task))
            for strategy in ["base", *strategies]:
                r = rows.filter(pl.col("strategy") == strategy)
                points = [(k, r[f"pass@{k}"][0]) for k in ks if r.height and r[f"pass@{k}"][0] is not None
                          and not math.isnan(r[f"pass@{k}"][0])]
                if not points:
                    continue
                x, y = zip(*points)
                if strategy == "base":
                    ax.plot(x, y, color="black", ls="--", marker="o", lw=1.8, label="base model")
                    continue
                color = strategy_color(strategy, strategies)
                online = RunName.parse(strategy).online
                ax.plot(x, y, color=color, ls=strategy_linestyle(strategy), marker=strategy_marker(strategy), ms=6,
                        markerfacecolor="white" if online else color, lw=1.5, label=f"{strategy} (final)")
                null = [(k, r[f"null_pass@{k}"][0]) for k in ks if f"null_pass@{k}" in r.columns
                        and r[f"null_pass@{k}"][0] is not None and not math.isnan(r[f"null_pass@{k}"][0])]
                if null:  # one legend entry for all nulls (a leading "_" keeps a line out of the legend)
                    ax.plot(*zip(*null), color=color, ls="--", lw=0.9, alpha=0.6, label=f"_{strategy} null")
                    drew_null = True
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ks))
            ax.xaxis.set_major_formatter(matplotlib.ticker.FixedFormatter([str(k) for k in ks]))
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            ax.set_xlabel("k (samples per question)")
            ax.set_ylabel("pass@k (%)")
            ax.set_title(f"{model} / {task}")
            _at_least_ten_points(ax)
        if not cells:
            _no_data(axes[0][0], "no pass@k to draw")
        handles, labels = [], []
        for ax in axes[0]:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        if drew_null:
            handles.append(Line2D([], [], color="0.4", ls="--", lw=1.2))
            labels.append("sharpening null (dashed, the strategy's colour)")
        _legend_below(fig, handles, labels)
        fig.suptitle("pass@k of the base model and of each strategy's final checkpoint (first benchmark)")
        return save_figure(fig, paths, st)


# ---- the survey: which tasks sit where GRPO can learn ----------------------------------------------


def plot_survey(table: pl.DataFrame, paths: Sequence[str | Path], style: dict | None = None) -> list[Path]:
    """One horizontal bar per task x tier of the survey (hardex.report.survey): the shares of its pool never solved
    (left, dark), solved sometimes (middle) and always solved (right), and the expected share of mixed groups as a
    dot; one panel per model. Tasks in the table's order (largest expected mixed share on top)."""
    st = _style(style)
    models = list(dict.fromkeys(table["model"].to_list())) or ["(no probes)"]
    height = max(3.0, 0.22 * table.filter(pl.col("model") == models[0]).height + 1.6)
    with plt.rc_context(_rc(st)):
        fig, axes = plt.subplots(1, len(models), figsize=(7.5 * len(models), height), squeeze=False,
                                 layout="constrained")
        for ax, model in zip(axes[0], models):
            sub = table.filter(pl.col("model") == model)
            if sub.height == 0:
                _no_data(ax, "no probe tables")
                continue
            labels = [t if tier == "all" else f"   level {tier}" if str(tier).isdigit() else f"   {tier}"
                      for t, tier in zip(sub["task"], sub["tier"])]
            y = np.arange(sub.height)[::-1]
            never, between, always = (sub[c].to_numpy() for c in ("never", "between", "always"))
            whole = np.array([tier == "all" for tier in sub["tier"]])
            h = np.where(whole, 0.8, 0.55)
            ax.barh(y, never, height=h, color="#4d4d4d", label="never solved")
            ax.barh(y, between, left=never, height=h, color="#2ca02c", label="solved sometimes")
            ax.barh(y, always, left=never + between, height=h, color="#c7c7c7", label="always solved")
            ax.plot(sub["expected_mixed"].to_numpy(), y, "o", color="#d62728", mec="black", ms=5,
                    label="expected mixed groups")
            ax.set_yticks(y, labels, fontsize=st["font_size"] - 2)
            for tick, w in zip(ax.get_yticklabels(), whole):
                tick.set_fontweight("bold" if w else "normal")
            ax.set_xlim(0, 100)
            ax.set_xlabel("% of the task's pool")
            ax.set_title(f"{model}: pass-rate distribution per task and level")
            ax.grid(axis="y", alpha=0)
        handles, labels = axes[0][0].get_legend_handles_labels()
        order = sorted(range(len(labels)), key=lambda i: labels[i] == "expected mixed groups")  # the bars, then the dot
        _legend_below(fig, [handles[i] for i in order], [labels[i] for i in order])
        fig.suptitle("Where GRPO can learn: examples solved sometimes, and the expected share of mixed groups")
        return save_figure(fig, paths, st)
