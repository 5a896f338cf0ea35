"""The report's figures of the pool before training: its probe pass rates with each selected subset marked, and
the survey's shares of never, sometimes and always solved examples per task and tier.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")  # files only: no display on cluster nodes or in tests

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from hardex.report.plots import drawing  # noqa: E402
from hardex.report.plots.drawing import _legend_below, _no_data, _rc, _style, strategy_color  # noqa: E402
from hardex.selection import strategy_sort_key  # noqa: E402

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
        return drawing.save_figure(fig, paths, st)


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
        return drawing.save_figure(fig, paths, st)
