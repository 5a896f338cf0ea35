"""Figures of the report (matplotlib, Agg backend): each one readable on its own, with a title,
labelled axes and a legend, and the published runs overlaid (thin or hollow) when a reference is
given. Every function takes frames from the report's table modules and writes one file per format.

The figures by what they show: over training steps (`curves`), what the runs ended with (`outcomes`), the pool
before training (`pool`); what they share, colours, lines, markers, style and `save_figure`, is `drawing`'s. The
names below are the ones the report, its scripts and tests call as `plots.<name>`.
"""

from hardex.report.plots.curves import (
    plot_accuracy_curves,
    plot_gain_curve,
    plot_tier_curves,
    plot_training_dynamics,
    plot_zero_std,
)
from hardex.report.plots.drawing import (
    DEFAULT_STYLE,
    MARKERS,
    ONLINE_LINESTYLE,
    STRATEGY_COLORS,
    STRATEGY_LINESTYLE,
    STRATEGY_MARKER,
    save_figure,
    strategy_color,
    strategy_linestyle,
    strategy_marker,
)
from hardex.report.plots.outcomes import (
    plot_across_tasks,
    plot_capacity,
    plot_gain_by_difficulty,
    plot_gain_vs_compute,
    plot_learnable_vs_gain,
    plot_pass_at_k,
    regression_title,
)
from hardex.report.plots.pool import plot_pool_pass_rates, plot_survey

__all__ = [
    "DEFAULT_STYLE", "MARKERS", "ONLINE_LINESTYLE", "STRATEGY_COLORS", "STRATEGY_LINESTYLE", "STRATEGY_MARKER",
    "plot_accuracy_curves", "plot_across_tasks", "plot_capacity", "plot_gain_by_difficulty", "plot_gain_curve",
    "plot_gain_vs_compute", "plot_learnable_vs_gain", "plot_pass_at_k", "plot_pool_pass_rates", "plot_survey",
    "plot_tier_curves", "plot_training_dynamics", "plot_zero_std", "regression_title", "save_figure",
    "strategy_color", "strategy_linestyle", "strategy_marker",
]
