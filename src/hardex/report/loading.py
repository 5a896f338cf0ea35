"""Reading the workflow's result files into frames; a file's model, task, strategy and seed come from
its path (`hardex.layout`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import polars as pl

from hardex import layout
from hardex.io import parquet_columns, read_parquet
from hardex.report import AnalysisError

OUTCOME_COLUMNS = ["step", "benchmark", "id", "tier", "n", "n_correct"]

#: the metrics a verdict can be computed in (`report.metrics`, the first deciding a sequential design): the
#: same accuracy tables over other outcomes of the same completions
METRICS = {
    "sampled": "sampled accuracy: the share of right answers among each question's evaluation samples "
               "(evaluation.decoding)",
    "greedy": "greedy accuracy: one greedy answer per question (evaluation.greedy)",
}


def _keys(template: str, path: str | Path) -> dict[str, Any]:
    try:
        return layout.identity(template, path)
    except layout.LayoutError as e:
        raise AnalysisError(str(e)) from None


def _with_keys(df: pl.DataFrame, keys: dict[str, Any]) -> pl.DataFrame:
    return df.with_columns([pl.lit(v, dtype=pl.Int64 if k == "seed" else pl.Utf8).alias(k) for k, v in keys.items()])


@dataclass
class Results:
    """Per-example outcomes of every run and of the base model, and every run's step record.

    `runs`: model, task, strategy, seed, step, benchmark, id, tier, n, n_correct (+ greedy_correct where
    evaluated with evaluation.greedy).
    `base`: model, task, benchmark, id, tier, n, n_correct (step 0; likewise).
    `steps`: model, task, strategy, seed + the columns of steps.parquet.
    `benchmarks`: task -> its benchmarks, the in-distribution one first.
    `pass_k`: benchmark -> the k values of its pass@k.
    """

    runs: pl.DataFrame
    base: pl.DataFrame
    steps: pl.DataFrame
    benchmarks: dict[str, list[str]]
    pass_k: dict[str, list[int]] = field(default_factory=dict)

    def in_metric(self, metric: str) -> "Results":
        """These results in one of METRICS: sampled as evaluated; greedy with each question's greedy answer as
        its one sample (n 1, n_correct greedy_correct), so every accuracy table reads greedy accuracy."""
        if metric == "sampled":
            return self
        if metric != "greedy":
            raise AnalysisError(f"report.metrics: unknown metric {metric!r} (known: {', '.join(METRICS)})")
        frames = []
        for name, df in (("runs", self.runs), ("base", self.base)):
            if "greedy_correct" not in df.columns or df["greedy_correct"].null_count():
                raise AnalysisError(f"report.metrics: greedy needs a greedy answer for every question; the {name} "
                                    "evaluations lack some: evaluate with evaluation.greedy: true")
            frames.append(df.with_columns(pl.lit(1, dtype=df["n"].dtype).alias("n"),
                                          pl.col("greedy_correct").cast(df["n_correct"].dtype).alias("n_correct")))
        return Results(frames[0], frames[1], self.steps, self.benchmarks, {b: [1] for b in self.pass_k})

    def in_distribution(self, task: str) -> str:
        return self.benchmarks[task][0]

    def ood(self, task: str) -> list[str]:
        return self.benchmarks[task][1:]


def load_results(
    eval_files: Iterable[str | Path],
    base_files: Iterable[str | Path],
    steps_files: Iterable[str | Path] = (),
    benchmarks: dict[str, Sequence[str]] | None = None,
    pass_k: dict[str, Sequence[int]] | None = None,
) -> Results:
    """Read result files of the standard layout; model/task/strategy/seed come from their paths.

    `benchmarks` (task -> benchmarks, first = in-distribution) is the config's; without it the
    order in which benchmarks first appear in the base files is used.
    """
    run_keys = [(f, _keys(layout.EVAL_RUN, f)) for f in eval_files]  # a stray path fails before any read
    base_keys = [(f, _keys(layout.EVAL_BASE, f)) for f in base_files]
    # greedy_correct: the greedy sample beside the sampled ones, in files evaluated with evaluation.greedy
    runs = [_with_keys(read_parquet(f, columns=[c for c in [*OUTCOME_COLUMNS, "greedy_correct"] if c in have]), k)
            for f, k in run_keys for have in [parquet_columns(f)]]
    # the base model is evaluated once per run seed (column seed), with that seed's evaluation noise
    bases = [_with_keys(read_parquet(f, columns=[c for c in ["seed", *OUTCOME_COLUMNS, "greedy_correct"]
                                                 if c in have]), k)
             for f, k in base_keys for have in [parquet_columns(f)]]
    if not runs or not bases:
        raise AnalysisError("no evaluation results to analyse (need run and base evaluation files)")
    runs_df = pl.concat(runs, how="diagonal_relaxed")
    base_df = pl.concat(bases, how="diagonal_relaxed").drop("step")
    if "seed" not in base_df.columns:
        base_df = base_df.with_columns(pl.lit(None, dtype=pl.Int64).alias("seed"))
    steps_df = load_steps(steps_files)
    if benchmarks is None:
        benchmarks = {}
        for (task,), grp in base_df.group_by(["task"], maintain_order=True):
            benchmarks[task] = list(dict.fromkeys(grp["benchmark"].to_list()))
    benchmarks = {t: list(b) for t, b in benchmarks.items()}
    if pass_k is None:
        pass_k = {}
        for (bench,), grp in base_df.group_by(["benchmark"], maintain_order=True):
            n = int(grp["n"].min())
            pass_k[bench] = sorted({1, n})
    return Results(runs_df, base_df, steps_df, benchmarks, {b: list(k) for b, k in pass_k.items()})


def load_steps(steps_files: Iterable[str | Path]) -> pl.DataFrame:
    """Every run's steps.parquet, with model, task, strategy and seed from its path."""
    steps = [_with_keys(read_parquet(f), _keys(layout.STEPS, f)) for f in steps_files]
    if not steps:
        return pl.DataFrame(schema={"model": pl.Utf8, "task": pl.Utf8, "strategy": pl.Utf8, "seed": pl.Int64,
                                    "step": pl.Int64, "frac_zero_std": pl.Float64})
    return pl.concat(steps, how="diagonal_relaxed")


def load_pool(probe_files: Iterable[str | Path],
              subset_files: Iterable[str | Path]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(probe tables with model, task; subsets with model, task, strategy, seed) from the standard layout."""
    # tokens: what the probe generated per example (tables probed before it was recorded lack it)
    probes = [_with_keys(read_parquet(f, columns=[c for c in ("id", "k", "pass_rate", "tokens") if c in have]),
                         _keys(layout.PROBE, f))
              for f in probe_files for have in [parquet_columns(f)]]
    subsets = [_with_keys(read_parquet(f, columns=["id", "pass_rate"]), _keys(layout.SUBSET, f)) for f in subset_files]
    if not probes:
        raise AnalysisError("no probe tables to analyse")
    empty_subsets = pl.DataFrame(schema={"id": pl.Utf8, "pass_rate": pl.Float64, "model": pl.Utf8,
                                         "task": pl.Utf8, "strategy": pl.Utf8, "seed": pl.Int64})
    return (pl.concat(probes, how="diagonal_relaxed"),
            pl.concat(subsets, how="diagonal_relaxed") if subsets else empty_subsets)


def load_overlaps(files: Iterable[str | Path]) -> pl.DataFrame:
    """The data check of every task (results/overlap/{task}.json): one row per task x benchmark; the classes a
    file from before they were counted lacks (same_problem and the near-duplicates) are empty."""
    rows = []
    for f in files:
        report = json.loads(Path(f).read_text())
        for bench, o in report["benchmarks"].items():
            rows.append({"task": report["task"], "pool": report["pool"], "benchmark": bench, "n_pool": o["n_pool"],
                         "n_benchmark": o["n_benchmark"], "exact": o["exact"], "normalized": o["normalized"],
                         "same_problem": o.get("same_problem"), "allowed": report["allowed"],
                         "near_duplicates": o.get("near_duplicates"), "same_numbers": o.get("same_numbers"),
                         "shared_ngram": o.get("shared_ngram"), "allowed_near": report.get("allowed_near")})
    return pl.DataFrame(rows, schema={"task": pl.Utf8, "pool": pl.Utf8, "benchmark": pl.Utf8, "n_pool": pl.Int64,
                                      "n_benchmark": pl.Int64, "exact": pl.Int64, "normalized": pl.Int64,
                                      "same_problem": pl.Int64, "allowed": pl.Int64, "near_duplicates": pl.Int64,
                                      "same_numbers": pl.Int64, "shared_ngram": pl.Int64, "allowed_near": pl.Int64})


def model_parameters(sizes_b: dict[str, float], built: dict[str, str | Path]) -> dict[str, float]:
    """Parameters of each model: counted where the workflow made the model (the build's build_summary.json,
    a GGUF conversion's source.json), else the config's size_b (billions)."""
    out = {m: 1e9 * float(b) for m, b in sizes_b.items()}
    for m, folder in built.items():
        record = next(f for f in (Path(folder) / "build_summary.json", Path(folder) / "source.json") if f.exists())
        out[m] = float(json.loads(record.read_text())["parameters"])
    return out
