"""A sequential design's look over a study's evaluations (`seeds: {first, batch, max}`, hardex.sequential):
the deciding comparisons of each model x task, their verdicts from the runs' gains paired by seed, and the
runs the next batch of seeds goes to. The sequential_look checkpoint writes one look a file; the workflow
reads it back to plan the next batch, and the report's verdict table reads the last.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import polars as pl

from hardex.selection import RunName, strategy_sort_key
from hardex.sequential import BASE_RUN, Design, decide, runs_needing_seeds

# paper 1's headline: the hardest subset against the easiest, the middle and a random one; base-wrong
# against base-right examples (each where both ran)
HEADLINE_PAIRS = [("hard", "easy"), ("hard", "medium"), ("hard", "random"), ("base_wrong", "base_right")]


def deciding_comparisons(run_strategies: Sequence[str], configured: Sequence[Sequence[str]] | None = None
                         ) -> list[tuple[str, str]]:
    """The (run, versus) pairs that decide a study, per model x task: `seeds.deciding` where configured,
    else each run against the base model (a control run: against the run it controls, whose own
    comparison with the base is already there) and paper 1's headline pairs that ran."""
    if configured:
        return [(a, b) for a, b in configured]
    pairs = []
    for s in run_strategies:
        run = RunName.parse(s)
        pairs.append((run.strategy, s) if run.control else (s, BASE_RUN))
    return pairs + [p for p in HEADLINE_PAIRS if p[0] in run_strategies and p[1] in run_strategies]


def _differences(gain: dict, model: str, task: str, a: str, b: str) -> dict[int, float]:
    """seed -> gain of run a minus run b (the base model: 0), over the seeds both have."""
    def by_seed(run):
        return {sd: g for (m, t, s, sd), g in gain.items() if (m, t, s) == (model, task, run)}

    mine = by_seed(a)
    if b == BASE_RUN:
        return mine
    theirs = by_seed(b)
    return {sd: mine[sd] - theirs[sd] for sd in mine if sd in theirs}


def look(summary: pl.DataFrame, design: Design, deciding: Sequence[tuple[str, str]], alpha: float,
         margin: float, cells: Sequence[tuple[str, str]], look_index: int) -> dict[str, Any]:
    """Look `look_index` (from 1) of the design over the runs' in-distribution gains (`run_summary`): the
    verdict of each deciding comparison in each model x task cell (the data up to this look's seeds only;
    a family per cell, as the pairwise table's), and the runs each cell gives the next batch."""
    n = design.looks[look_index - 1]
    gain = {(m, t, s, sd): g
            for m, t, s, sd, g in summary.select("model", "task", "strategy", "seed", "gain").iter_rows() if sd < n}
    verdicts, needs = [], {}
    for model, task in cells:
        pairs = {f"{a} vs {b}": (a, b) for a, b in deciding}
        decided = decide(design, {name: _differences(gain, model, task, a, b) for name, (a, b) in pairs.items()},
                         alpha, margin)
        for name, (a, b) in pairs.items():
            v = decided[name]
            verdicts.append({"model": model, "task": task, "strategy": a, "versus": b, "verdict": v.verdict,
                             "seeds": v.seeds, "look": v.look, "final": v.final, "difference": _num(v.difference),
                             "p": _num(v.p), "p_equivalence": _num(v.p_equivalence), "level": _num(v.level)})
        runs = runs_needing_seeds(decided, pairs) if look_index < len(design.looks) else set()
        needs.setdefault(model, {})[task] = sorted(runs, key=strategy_sort_key)
    nxt = design.looks[look_index] if look_index < len(design.looks) else n
    return {"look": look_index, "seeds": n, "alpha": alpha, "margin": margin, "verdicts": verdicts,
            "needs_seeds": needs, "next_seeds": list(range(n, nxt)) if any(r for t in needs.values()
                                                                            for r in t.values()) else []}


def look_in_metrics(summaries: dict[str, pl.DataFrame], design: Design, deciding: Sequence[tuple[str, str]],
                    alpha: float, margin: float, cells: Sequence[tuple[str, str]], look_index: int) -> dict[str, Any]:
    """`look` in the first of `summaries` (metric -> `run_summary` in it, report.metrics' order), which alone
    plans the next batch; each other metric's verdicts beside it (`reported`), by the same rule on the seeds
    the design gave each comparison, deciding nothing."""
    (metric, first), *others = summaries.items()
    record = look(first, design, deciding, alpha, margin, cells, look_index) | {"metric": metric}
    record["reported"] = {m: look(s, design, deciding, alpha, margin, cells, look_index)["verdicts"] for m, s in others}
    return record


def _num(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


VERDICT_COLUMNS = ["model", "task", "strategy", "versus", "verdict", "seeds", "look", "difference", "p",
                   "p_equivalence", "level"]


def verdict_table(look_record: dict[str, Any]) -> pl.DataFrame:
    """The look's verdicts as a table, one row per deciding comparison; with other metrics reported (a record
    of `look_in_metrics`), column metric after task and each comparison's row in every metric, the deciding
    one first."""
    schema = {"model": pl.Utf8, "task": pl.Utf8, "strategy": pl.Utf8, "versus": pl.Utf8, "verdict": pl.Utf8,
              "seeds": pl.Int64, "look": pl.Int64, "difference": pl.Float64, "p": pl.Float64,
              "p_equivalence": pl.Float64, "level": pl.Float64}
    blocks = {look_record.get("metric"): look_record["verdicts"], **look_record.get("reported", {})}
    frames = [pl.DataFrame([{k: r[k] for k in VERDICT_COLUMNS} for r in rows], schema=schema)
              for rows in blocks.values()]
    if len(frames) == 1:
        return frames[0]
    table = pl.concat([df.with_row_index("_row").with_columns(pl.lit(m).alias("metric"), pl.lit(i).alias("_metric"))
                       for i, (m, df) in enumerate(zip(blocks, frames))])
    return (table.sort("model", "task", "_row", "_metric").drop("_row", "_metric")
            .select("model", "task", "metric", *VERDICT_COLUMNS[2:]))


def verdict_note(design: Design, look_record: dict[str, Any]) -> str:
    """What the verdict table's numbers mean, and where the design stands."""
    if look_record["seeds"] >= design.max:
        stand = f"the design's maximum, {design.max} seeds"
    elif not look_record["next_seeds"]:
        stand = "every deciding comparison is decided"
    else:
        seeds = look_record["next_seeds"]
        stand = f"the next batch (seeds {seeds[0]}-{seeds[-1]}) trains the runs of the comparisons still undecided"
    return (f"Sequential design: seeds in batches of {design.batch} from {design.first} up to {design.max} "
            f"(looks at {', '.join(map(str, design.looks))} seeds). Look {look_record['look']} of "
            f"{len(design.looks)}, at {look_record['seeds']} seeds: {stand}. Each comparison: the strategy's "
            f"in-distribution gain minus the versus run's, paired by seed (versus base: the gain itself), in "
            f"points. Haybittle-Peto boundary: each interim look tests at level 0.001, the last at the rest of "
            f"alpha = {look_record['alpha']:g}, the comparisons still open Holm-adjusted within their model x "
            f"task at each look (hardex.sequential): differs (p < level), equivalent within "
            f"±{look_record['margin']:g} (two one-sided tests), or undecided at N seeds; a decided comparison "
            f"keeps its verdict and gets no more seeds. p and p_equivalence are the raw p's at the look that "
            f"decided it (or the last), level that look's."
            + (f" Metric: {look_record['metric']} decides the design; "
               f"{', '.join(look_record['reported'])} beside it (column metric): the same rule on the same seeds, "
               f"planning nothing." if look_record.get("reported") else
               f" Metric: {look_record.get('metric', 'sampled')}."))
