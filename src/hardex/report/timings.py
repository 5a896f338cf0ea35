"""What a run cost: wall time and peak memory per stage, from the jobs' timing files.

Every model job (build, probe, train, evaluate) has a timing file, Snakemake's `benchmark:` output at
`layout.TIMINGS[stage]` (`results/timings/{stage}/...tsv`): one TSV row with the job's wall seconds,
resident memory (MiB) and CPU seconds. The table sums them per stage so a user can size a larger
run, or a cluster profile's resources.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import polars as pl

from hardex import layout
from hardex.report import AnalysisError

# pipeline order of the stages that have timing files
STAGES = tuple(layout.TIMINGS)
TITLE = "Compute per stage: wall time and peak host memory of the model jobs"
NOTE = ("Per model and stage: jobs, summed wall time (minutes), median and longest job (seconds), summed CPU "
        "time (minutes) and the largest resident memory of any job (GiB, host memory only: GPU memory is not "
        "counted); row all sums every stage. Each job's last successful attempt, as Snakemake's benchmark "
        "directive measured it (its timing file in results/timings/). Jobs run in parallel, so summed wall time "
        "exceeds the elapsed time of the run.")


# each model job's output -> the stage whose timing file it has (a made model's stage: how it is made)
_OUTPUT_STAGES = {layout.PROBE: "probe", layout.EVAL_BASE: "evaluate_base", layout.STEPS: "train",
                  layout.EVAL_RUN: "evaluate_run"}


def timing_files(outputs: Iterable[str | Path], model_stages: dict[str, str]) -> list[str]:
    """The timing file of the job behind each output (a probe table, a base evaluation, a run's steps or
    evaluation; a made model's folder, by `model_stages`: model -> build_model, convert_model or
    standin_model), so the compute table reads the jobs its inputs name, however they were planned."""
    found = []
    for path in outputs:
        for template, stage in [(layout.MODEL, None), *_OUTPUT_STAGES.items()]:
            try:
                fields = layout.identity(template, path)
            except layout.LayoutError:
                continue
            stage = stage or model_stages.get(fields["model"])
            if stage:
                found.append(layout.fill(layout.TIMINGS[stage], **fields))
            break
    return list(dict.fromkeys(found))


def _stage_and_model(path: str | Path) -> tuple[str, str]:
    for stage, template in layout.TIMINGS.items():
        try:
            return stage, layout.identity(template, path)["model"]
        except layout.LayoutError:
            continue
    raise AnalysisError(f"{path}: not a timing file of the results layout (results/timings/<stage>/...tsv)")


def load_timings(paths: Iterable[str | Path]) -> pl.DataFrame:
    """One row per timing file: stage, model, job (the path), s, max_rss (MiB), cpu_time (s)."""
    rows = []
    for path in paths:
        stage, model = _stage_and_model(path)
        # Snakemake writes NA (or '-') for what it could not measure, e.g. memory of a very short job
        df = pl.read_csv(path, separator="\t", null_values=["NA", "-"], infer_schema_length=None)
        missing = {"s", "max_rss", "cpu_time"} - set(df.columns)
        if df.height == 0 or missing:
            raise AnalysisError(f"{path}: not a Snakemake timing file (no rows, or no {sorted(missing)})")
        last = df.tail(1)  # with repeat() several rows: the last measurement
        rows.append({
            "stage": stage, "model": model, "job": str(path),
            "s": float(last["s"][0]),
            "max_rss": None if last["max_rss"][0] is None else float(last["max_rss"][0]),
            "cpu_time": None if last["cpu_time"][0] is None else float(last["cpu_time"][0]),
        })
    return pl.DataFrame(rows, schema={"stage": pl.String, "model": pl.String, "job": pl.String,
                                      "s": pl.Float64, "max_rss": pl.Float64, "cpu_time": pl.Float64})


def compute_table(timings: pl.DataFrame) -> pl.DataFrame:
    """Per model x stage (pipeline order) and a total per model: jobs, summed and typical wall time,
    summed CPU time, peak resident memory."""
    aggs = [
        pl.len().alias("jobs"),
        (pl.col("s").sum() / 60).alias("wall_min"),
        pl.col("s").median().alias("median_s"),
        pl.col("s").max().alias("max_s"),
        (pl.col("cpu_time").sum() / 60).alias("cpu_min"),
        (pl.col("max_rss").max() / 1024).alias("peak_rss_gib"),
    ]
    per_stage = timings.group_by("model", "stage").agg(aggs)
    total = timings.group_by("model").agg(aggs).with_columns(stage=pl.lit("all"))
    order = {s: i for i, s in enumerate(STAGES)}
    out = pl.concat([per_stage, total.select(per_stage.columns)])
    rank = pl.col("stage").replace_strict(order, default=len(STAGES), return_dtype=pl.Int64)
    return (out.with_columns(_rank=rank).sort("model", "_rank", "stage").drop("_rank")
            .select("model", "stage", "jobs", "wall_min", "median_s", "max_s", "cpu_min", "peak_rss_gib")
            .with_columns(pl.col("jobs").cast(pl.Int64)))
