"""Gain over the base model at every checkpoint, per strategy, with a t-interval over seeds: does a
ranking of subsets hold or turn as runs train longer? Reads a finished run's results.

    python perf/gain_by_step.py --config experiments/cpu_longer.yaml      # in the run's directory

One row per model x task x strategy x checkpoint step on each task's first benchmark: the gain in
points (the checkpoint's accuracy minus the same seed's base evaluation), mean over seeds with its
95 % t-interval, and its rank among the strategies at that step (1 = largest mean gain).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import ROOT  # noqa: F401 - puts the library on the path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="the config the run used (its tasks and benchmarks)")
    ap.add_argument("--results", default="results", help="the run's results folder")
    args = ap.parse_args()

    import polars as pl
    import yaml

    from hardex.report.loading import load_results
    from hardex.report.runs import accuracy_curves
    from hardex.statistics import t_interval

    cfg = yaml.safe_load(Path(args.config).read_text())
    root = Path(args.results)
    res = load_results(sorted(root.glob("eval/*/*/*/seed*.parquet")), sorted(root.glob("eval/*/base/*.parquet")),
                       (), {t: v["benchmarks"] for t, v in cfg["tasks"].items()})
    curves = accuracy_curves(res).filter(pl.col("strategy") != "base")
    rows = []
    for (model, task, strategy), grp in curves.group_by(["model", "task", "strategy"], maintain_order=True):
        grp = grp.filter(pl.col("benchmark") == res.in_distribution(task))
        base = dict(grp.filter(pl.col("step") == 0).select("seed", "accuracy").iter_rows())
        for step in sorted(set(grp["step"]) - {0}):
            at = grp.filter(pl.col("step") == step)
            gains = [100 * (a - base[s]) for s, a in at.select("seed", "accuracy").iter_rows()]
            lo, hi = t_interval(gains)
            rows.append({"model": model, "task": task, "step": step, "strategy": strategy, "seeds": len(gains),
                         "gain": sum(gains) / len(gains), "low": lo, "high": hi})
    table = pl.DataFrame(rows).with_columns(
        pl.col("gain").rank("ordinal", descending=True).over("model", "task", "step").alias("rank")
    ).sort("model", "task", "step", "rank")
    print("| model | task | step | strategy | seeds | gain (points) [95 % t-interval] | rank |")
    print("|---|---|---:|---|---:|---|---:|")
    for r in table.iter_rows(named=True):
        print(f"| {r['model']} | {r['task']} | {r['step']} | {r['strategy']} | {r['seeds']} | "
              f"{r['gain']:+.1f} [{r['low']:+.1f}, {r['high']:+.1f}] | {r['rank']} |")


if __name__ == "__main__":
    main()
