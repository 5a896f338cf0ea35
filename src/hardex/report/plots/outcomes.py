"""The report's figures of what the runs ended with: the gain against learnable % (paper 1's Figure 3), against
the model's size, against the compute spent, per bin of the base model's difficulty and per task, and pass@k against
k beside the sharpening null.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")  # files only: no display on cluster nodes or in tests

import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from hardex.report.plots import drawing  # noqa: E402
from hardex.report.plots.drawing import (  # noqa: E402
    MARKERS,
    _at_least_ten_points,
    _first_metrics_panels,
    _grid,
    _legend_below,
    _legend_of_panels,
    _no_data,
    _rc,
    _style,
    strategy_color,
    strategy_linestyle,
    strategy_marker,
)
from hardex.selection import STRATEGIES, RunName, strategy_sort_key  # noqa: E402
from hardex.statistics import confidence_band  # noqa: E402

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


def plot_learnable_vs_gain(report: dict[str, Any], paths: Sequence[str | Path],
                           style: dict | None = None) -> list[Path]:
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
        return drawing.save_figure(fig, paths, st)


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
                    ax.errorbar(x, y, yerr=np.where(np.isfinite(err), err, 0),
                                color=strategy_color(strategy, strategies), marker=MARKERS[k % len(MARKERS)],
                                capsize=3, lw=1.5, label=strategy)
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
        return drawing.save_figure(fig, paths, st)


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
        return drawing.save_figure(fig, paths, st)


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
                    ax.errorbar(np.asarray(xs)[ok], acc[ok],
                                yerr=[np.maximum(acc - low, 0)[ok], np.maximum(high - acc, 0)[ok]],
                                fmt="none", ecolor=c, elinewidth=1.0, capsize=2, alpha=0.8)
                ax.set_xticks(range(len(bins)), [f"{b}\n{n} q." for b, n in zip(base["bin"], base["n_questions"])])
                ax.set_ylim(-3, 103)
        _legend_of_panels(fig, axes)
        fig.suptitle(f"Accuracy by the base model's pass rate on each question\n({metric}; bars: the gain's interval)")
        return drawing.save_figure(fig, paths, st)


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
        return drawing.save_figure(fig, paths, st)


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
        return drawing.save_figure(fig, paths, st)
