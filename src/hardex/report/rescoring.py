"""Form against skill: the stored completions of the base model and of every run's final checkpoint,
rescored by each scorer of their task, side by side (the `rescored` table).

Training rewards exactly what evaluation scores, so a gain under one scorer can be a gain in answer form
(writing a box) rather than in solving. Rescoring the same completions by box only (`lenient`), by the
last number or option when nothing is boxed (`flexible`), and by paper 1's released scorer (`strict`, for
`tasks.STRICT_FAMILIES` only) tells them apart: a gain that holds under `flexible` is not a box-writing
gain. The inputs are the original scoring's: the benchmark's reference answers (its data file) and the
question's prompt, from which an echo is stripped (`tasks.strip_echo`). Evaluation stripped the rendered
prompt (chat template included), which the report cannot rebuild without the tokenizer; the task's own
prompt text inside it is what an echo repeats, so rescoring uses that, and the table counts the examples
whose rescored count under the configured scorer differs from the stored one (`stored_mismatch`; 0 when
they agree, every example in a rehearsal, whose stored verdicts are seeded draws).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable, Sequence

import polars as pl

from hardex import layout
from hardex.io import parquet_columns, read_parquet
from hardex.report import AnalysisError
from hardex.selection import strategy_sort_key
from hardex.tasks import SCORINGS, STRICT_FAMILIES, get_task
from hardex.tasks.seeded import PREFIX as REHEARSAL_PREFIX


def scorers_of(family: str) -> list[str]:
    """The scorers a family has, in SCORINGS order: strict only where paper 1 released one."""
    return [s for s in SCORINGS if s != "strict" or family in STRICT_FAMILIES]


def rescore(outcomes: pl.DataFrame, rows: dict[str, dict], family: str) -> pl.DataFrame:
    """`outcomes` (id, n, n_correct, completions) with `n_correct_<scorer>` for each scorer of `family`:
    each completion judged against the reference answer of `rows[id]`, the task's prompt stripped as an echo."""
    out = {}
    for scoring in scorers_of(family):
        task = get_task(family, scoring)
        counts = []
        for ex_id, comps in zip(outcomes["id"], outcomes["completions"]):
            if ex_id not in rows:
                raise AnalysisError(f"example {ex_id!r} of the stored completions is not in the benchmark's data file")
            row = rows[ex_id]
            prompt = task.prompt(row)
            counts.append(sum(task.is_correct(c, row["answer"], prompt) for c in comps))
        out[f"n_correct_{scoring}"] = pl.Series(counts, dtype=pl.Int64)
    return outcomes.with_columns(**out)


def _accuracy(df: pl.DataFrame, col: str) -> float:
    return 100 * float((df[col] / df["n"]).mean()) if df.height and col in df.columns else math.nan


def _completions(path: str | Path, bench: str, base: bool) -> pl.DataFrame:
    have = parquet_columns(path)
    cols = [c for c in ["seed", "step", "benchmark", "id", "n", "n_correct", "completions"] if c in have]
    if "completions" not in cols:
        raise AnalysisError(f"{path}: no completions column to rescore")
    df = read_parquet(path, columns=cols).filter(pl.col("benchmark") == bench)
    if not base:
        df = df.filter(pl.col("step") == df["step"].max())
    return df


def rescored_table(eval_files: Iterable[str | Path], base_files: Iterable[str | Path],
                   benchmarks: dict[str, Sequence[str]], data_files: dict[str, str | Path],
                   families: dict[str, str], scorings: dict[str, str]) -> pl.DataFrame:
    """Per model x task x strategy, on the task's first benchmark: accuracy (%) of the base model and of the
    final checkpoint, and the gain (points), under each scorer (`<scorer>_base`, `<scorer>_final`,
    `<scorer>_gain`; null where the family has no such scorer), means over seeds, each run paired with the
    base evaluated with its seed's noise. `configured`: the scorer the config uses (a rehearsal's, without
    its prefix). `data_files`: benchmark ref -> its data file; `families`: ref -> family; `scorings`: task ->
    its configured scoring."""
    rows_of: dict[str, dict[str, dict]] = {}
    bases: dict[tuple, pl.DataFrame] = {}
    for f in base_files:
        keys = layout.identity(layout.EVAL_BASE, f)
        bench = benchmarks[keys["task"]][0]
        if bench not in rows_of:
            rows_of[bench] = {str(r["id"]): r for r in read_parquet(data_files[bench]).to_dicts()}
        bases[keys["model"], keys["task"]] = rescore(_completions(f, bench, base=True), rows_of[bench], families[bench])
    out = []
    for f in eval_files:
        keys = layout.identity(layout.EVAL_RUN, f)
        model, task, strategy, seed = keys["model"], keys["task"], keys["strategy"], int(keys["seed"])
        bench = benchmarks[task][0]
        if (model, task) not in bases:
            raise AnalysisError(f"{f}: no base evaluation of {model}/{task} to compare with")
        base = bases[model, task]
        own = base.filter(pl.col("seed") == seed) if "seed" in base.columns else base.clear()
        base = own if own.height else base
        final = _completions(f, bench, base=False)
        if final.height == 0:
            continue  # a run without checkpoints on this benchmark has no final to rescore
        final = rescore(final, rows_of[bench], families[bench])
        configured = scorings[task].removeprefix(REHEARSAL_PREFIX)
        mismatch = sum(int((df[f"n_correct_{configured}"] != df["n_correct"]).sum()) for df in (base, final))
        row = {"model": model, "task": task, "strategy": strategy, "seed": seed, "benchmark": bench,
               "final_step": int(final["step"][0]), "configured": configured, "stored_mismatch": mismatch}
        for scoring in SCORINGS:
            col = f"n_correct_{scoring}"
            b, fi = _accuracy(base, col), _accuracy(final, col)
            row |= {f"{scoring}_base": b, f"{scoring}_final": fi, f"{scoring}_gain": fi - b}
        out.append(row)
    if not out:
        return pl.DataFrame(schema={"model": pl.Utf8, "task": pl.Utf8, "strategy": pl.Utf8})
    runs = pl.DataFrame(out)
    value_cols = [f"{s}_{part}" for s in SCORINGS for part in ("base", "final", "gain")]
    cells = runs.group_by(["model", "task", "strategy"], maintain_order=True).agg(
        pl.col("benchmark").first(), pl.len().alias("n_seeds"), pl.col("final_step").max(),
        pl.col("configured").first(), *[pl.col(c).mean() for c in value_cols], pl.col("stored_mismatch").sum())
    # NaN (no such scorer for the family) shown as empty
    cells = cells.with_columns([pl.col(c).fill_nan(None) for c in value_cols])
    return in_paper_order(cells)


def in_paper_order(df: pl.DataFrame) -> pl.DataFrame:
    """Rows by model, task, then strategy in paper order ("base" first), as every table."""
    ranked = sorted(df["strategy"].unique(), key=lambda st: (-1, "") if st == "base" else strategy_sort_key(st))
    rank = pl.col("strategy").replace_strict({st: i for i, st in enumerate(ranked)}, return_dtype=pl.Int64)
    return df.sort(["model", "task", rank])


RESCORED_NOTE = (
    "The stored completions of the base model and of each strategy's final checkpoint on each task's first "
    "benchmark, rescored by every scorer of the task (accuracy in %, gain in points, mean over seeds; each run "
    "paired with the base of its seed). lenient: the last box only; flexible: as lenient, but a completion "
    "without a box is read by its last number or option; strict: paper 1's released scorer (gsm8k, "
    "shuffled_objects, aime2025 only; empty otherwise). configured: the scorer the config uses, which training "
    "rewarded: a gain that shrinks under flexible was partly a gain in answer form (boxing), one that holds is "
    "solving. stored_mismatch: examples (base and final rows, all seeds) whose rescored count under the "
    "configured scorer differs from evaluation's (0 expected; the report strips the task's prompt as an echo, "
    "evaluation the rendered one; a rehearsal's stored verdicts are seeded draws)."
)
