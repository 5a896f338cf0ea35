"""What every figure of the report shares (matplotlib, Agg backend): a strategy's colour, a run's line and marker
(a control's from its record, hardex.controls.REGISTRY), the style settings and their rc parameters, the panel grid,
the legend below the panels, and `save_figure`, which writes a figure once per format under the style's banner. The
figure modules call it as `drawing.save_figure`, so a test keeps the figures it draws by replacing that one name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")  # files only: no display on cluster nodes or in tests

import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402

from hardex.controls import REGISTRY as CONTROL_REGISTRY  # noqa: E402
from hardex.io import atomic_path  # noqa: E402
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
