"""The published numbers a report can show beside its own: the shipped reference of paper 1
(`hardex/reference/`) or any CSV in its schema, and the mapping of this run's names onto its names."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import polars as pl

from hardex.report import AnalysisError


def reference_path(reference: str | Path) -> Path:
    """A shipped reference name (e.g. hard_examples_published) or a path to a CSV in that schema."""
    ref = str(reference)
    if "/" not in ref and "\\" not in ref and not ref.endswith(".csv"):
        path = resources.files("hardex") / "reference" / f"{ref}.csv"
        if not path.is_file():
            shipped = sorted(p.name[:-4] for p in (resources.files("hardex") / "reference").iterdir()
                             if p.name.endswith(".csv"))
            raise AnalysisError(f"report.reference: no shipped reference {ref!r}; shipped: {', '.join(shipped)}")
        return Path(str(path))
    path = Path(ref)
    if not path.is_file():
        raise AnalysisError(f"report.reference: {ref} is not a file")
    return path


def load_reference(reference: str | Path | None) -> pl.DataFrame | None:
    """The published runs: task, model, strategy, base/final accuracy in %, gain, learnable %, curve.

    Accuracies are converted from fractions to percent, like this project's tables.
    """
    if reference is None:
        return None
    df = pl.read_csv(reference_path(reference))
    missing = {"task", "model", "strategy", "gain_points"} - set(df.columns)
    if missing:
        raise AnalysisError(f"report.reference {reference}: missing columns {sorted(missing)}")
    acc_cols = [c for c in df.columns if c in ("base_accuracy", "final_accuracy") or c.startswith("accuracy_step_")]
    return df.with_columns([(100 * pl.col(c)).alias(c) for c in acc_cols]).rename({"gain_points": "gain"})


def reference_curves(ref: pl.DataFrame) -> pl.DataFrame:
    """Published accuracy (%) per checkpoint step, long form, with the base accuracy as step 0."""
    steps = sorted(int(c.rsplit("_", 1)[1]) for c in ref.columns if c.startswith("accuracy_step_"))
    parts = ([ref.select("task", "model", "strategy", pl.lit(0).alias("step"),
                         pl.col("base_accuracy").alias("accuracy"))]
             if "base_accuracy" in ref.columns else [])
    parts += [ref.select("task", "model", "strategy", pl.lit(s).alias("step"),
                         pl.col(f"accuracy_step_{s}").alias("accuracy")) for s in steps]
    if not parts:
        return pl.DataFrame(schema={"task": pl.Utf8, "model": pl.Utf8, "strategy": pl.Utf8, "step": pl.Int32,
                                    "accuracy": pl.Float64})
    return pl.concat(parts, how="vertical_relaxed").sort(["task", "model", "strategy", "step"])


def map_names(df: pl.DataFrame, names: dict[str, dict[str, str]] | None) -> pl.DataFrame:
    """Add ref_model / ref_task / ref_strategy: this run's names translated to the published ones.

    `names` is the config's report.reference_names ({models: {ours: theirs}, tasks: ..., strategies:
    ...}); names not listed are used as they are.
    """
    names = names or {}
    out = df
    for col, key in (("model", "models"), ("task", "tasks"), ("strategy", "strategies")):
        mapping = names.get(key) or {}
        out = out.with_columns(pl.col(col).replace(mapping).alias(f"ref_{col}"))
    return out


def with_reference(table: pl.DataFrame, ref: pl.DataFrame | None, columns: dict[str, str],
                   names: dict[str, dict[str, str]] | None = None) -> pl.DataFrame:
    """Put published values beside this run's: columns {published column: new column name}.

    Rows are matched on model, task and strategy after `names` translates this run's names; a row
    with no published counterpart gets nulls. Without a reference the table is returned unchanged.
    """
    if ref is None:
        return table
    keep = {c: new for c, new in columns.items() if c in ref.columns}
    published = ref.select(pl.col("model").alias("ref_model"), pl.col("task").alias("ref_task"),
                           pl.col("strategy").alias("ref_strategy"), *[pl.col(c).alias(n) for c, n in keep.items()])
    out = map_names(table, names).join(published, on=["ref_model", "ref_task", "ref_strategy"], how="left")
    return out.drop(["ref_model", "ref_task", "ref_strategy"])
