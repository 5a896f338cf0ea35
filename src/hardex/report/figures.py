"""Each figure of the report as what it reads and which `plots` function draws it, and `draw_figures`, which
draws the figures a job's output paths name in one process.

One process for all of them: a process per figure paid 2-4 s of imports (polars, matplotlib, this package)
for a drawing that takes a fraction of that, seven or eight times per report.

The frames a figure shares with the tables (accuracy curves, gains, learnable %, the pool's expected mixed
share) are the table families' functions (`runs`, `gains`, `pool`): this module sits above them.
"""

from __future__ import annotations

import json
import time
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import polars as pl

from hardex.report import AnalysisError, catch_up, plots, runs
from hardex.report.dynamics import dynamics_by_step
from hardex.report.gains import gain_table, learnable_table
from hardex.report.loading import Results, load_pool, load_results, load_steps, model_parameters
from hardex.report.pool import subset_pass_rates, with_expected_mixed
from hardex.report.reference import load_reference, reference_curves


class Sources:
    """A figure job's inputs (name -> file or files) and params (name -> value), as the figure rules name
    them; the results that several figures draw from are read once."""

    def __init__(self, inputs: Mapping[str, Any], params: Mapping[str, Any]):
        self.inputs, self.params = inputs, params
        self.style = params.get("style")

    @cached_property
    def results(self) -> Results:
        i, p = self.inputs, self.params
        return load_results(i["evals"], i["bases"], i.get("steps", ()), p["benchmarks"], p["pass_k"])


def accuracy_curves(src: Sources, paths: Sequence[str | Path]) -> list[Path]:
    """Test accuracy against training step per strategy (Figure 2), the published curves over it when
    `report.reference` names them."""
    res, ref = src.results, load_reference(src.params["reference"])
    return plots.plot_accuracy_curves(runs.accuracy_curves(res), res.benchmarks, paths, src.style,
                                      reference_curves(ref) if ref is not None else None, src.params["names"])


def tier_curves(src: Sources, paths: Sequence[str | Path]) -> list[Path]:
    """Test accuracy per difficulty tier against the share of the full run's steps (paper 2's catch-up)."""
    res = src.results
    return plots.plot_tier_curves(catch_up.tier_curves(res.runs, res.base), res.benchmarks, paths, src.style)


def learnable_vs_gain(src: Sources, paths: Sequence[str | Path]) -> list[Path]:
    """Learnable % against gain with the fitted line and its band (Figure 3), from regression.json: the
    figure draws the fit the regression job made, not one of its own."""
    report = json.loads(Path(src.inputs["regression"]).read_text())
    return plots.plot_learnable_vs_gain(report, paths, src.style)


def pool_pass_rates(src: Sources, paths: Sequence[str | Path]) -> list[Path]:
    """The pool's pass rates with every selected subset marked and the learnable % each should give at its
    model's G: from the probe and the subsets alone, so it needs no training."""
    probes, subsets = with_expected_mixed(*load_pool(src.inputs["probes"], src.inputs["subsets"]),
                                                     src.params["generations"])
    return plots.plot_pool_pass_rates(probes, subsets, paths, src.style)


def capacity(src: Sources, paths: Sequence[str | Path]) -> list[Path]:
    """Gain and learnable % of every strategy against model size, with the tables' intervals (`stats`);
    a model the workflow made counts its own parameters, the others their config's size_b."""
    res, stats = src.results, src.params["stats"]
    summary = runs.run_summary(res)
    gains = gain_table(res, stats["ci_level"], stats["iterations"], stats["seed"], summary)
    sizes = model_parameters(src.params["sizes_b"], src.params["built"])
    return plots.plot_capacity(gains, learnable_table(summary, stats["ci_level"]), sizes, paths, src.style)


def zero_std_share(src: Sources, paths: Sequence[str | Path]) -> list[Path]:
    """Per-step share of GRPO groups with no reward variance, per strategy."""
    return plots.plot_zero_std(load_steps(src.inputs["steps"]), paths, src.style)


def gain_vs_compute(src: Sources, paths: Sequence[str | Path]) -> list[Path]:
    """Each strategy's gain against the rollouts and tokens it generated, from the rollout_budget table
    (its gain intervals are the table's)."""
    return plots.plot_gain_vs_compute(pl.read_csv(src.inputs["budget"]), paths, src.style)


def pass_at_k(src: Sources, paths: Sequence[str | Path]) -> list[Path]:
    """pass@k against k, the base model against each final checkpoint beside its sharpening null, from the
    pass_at_k table."""
    return plots.plot_pass_at_k(pl.read_csv(src.inputs["pass_at_k"]), paths, src.style)


def training_dynamics(src: Sources, paths: Sequence[str | Path]) -> list[Path]:
    """Reward, mixed groups, completion length, truncated completions and KL over the steps of every run, with
    the mixed share the probe predicted for each subset at step 0."""
    predicted = subset_pass_rates(*load_pool(src.inputs["probes"], src.inputs["subsets"]),
                                         src.params["generations"])
    return plots.plot_training_dynamics(dynamics_by_step(load_steps(src.inputs["steps"])), paths, src.style, predicted)


def gain_curve(src: Sources, paths: Sequence[str | Path]) -> list[Path]:
    """Each strategy's gain over the base model at every checkpoint, from the gain_curve table."""
    return plots.plot_gain_curve(pl.read_csv(src.inputs["gain_curve"]), paths, src.style)


def gain_by_difficulty(src: Sources, paths: Sequence[str | Path]) -> list[Path]:
    """Accuracy per bin of the base model's own pass rate on each test question, from the gain_by_difficulty
    table."""
    return plots.plot_gain_by_difficulty(pl.read_csv(src.inputs["by_difficulty"]), paths, src.style)


def across_tasks(src: Sources, paths: Sequence[str | Path]) -> list[Path]:
    """Every task of the study side by side: each strategy's gain with its interval, from the headline table."""
    return plots.plot_across_tasks(pl.read_csv(src.inputs["headline"]), paths, src.style)


# figure name (the file's stem in results/figures/) -> the function that draws it
FIGURES: dict[str, Callable[[Sources, Sequence[str | Path]], list[Path]]] = {
    f.__name__: f for f in (accuracy_curves, tier_curves, learnable_vs_gain, pool_pass_rates, capacity,
                            zero_std_share, gain_vs_compute, pass_at_k, gain_curve, training_dynamics,
                            gain_by_difficulty, across_tasks)}


def draw_figures(paths: Sequence[str | Path], inputs: Mapping[str, Any], params: Mapping[str, Any],
                 log: Callable[[str], Any] = print) -> dict[str, list[Path]]:
    """Draw the figure each path's stem names into every path of that stem (one file per format, the
    format from its suffix); `inputs` and `params` as the figure rules name them. Returns the files written
    per figure."""
    by_name: dict[str, list[str | Path]] = {}
    for path in paths:
        by_name.setdefault(Path(path).stem, []).append(path)
    if unknown := sorted(set(by_name) - set(FIGURES)):
        raise AnalysisError(f"no figure named {', '.join(unknown)} (figures: {', '.join(FIGURES)})")
    src, written = Sources(inputs, params), {}
    for name, own in by_name.items():
        t0 = time.perf_counter()
        written[name] = FIGURES[name](src, own)
        log(f"{name}: {time.perf_counter() - t0:.1f}s, wrote {', '.join(map(str, written[name]))}")
    return written
