"""Pool against benchmarks: questions a task would train on and also be scored on.

A pool and a test set holding the same questions (the same file twice, the same GSM8K rows under two
names) would measure the gain on training data. The check compares question texts exactly and after
normalization (case, spacing and punctuation ignored; digits kept, so 'Add 3' and 'Add 4' differ) and
refuses the task unless the config accepts a stated number of overlapping questions.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl


class OverlapError(ValueError):
    """A task whose pool shares questions with its benchmarks; str() is one line saying what to do."""


def normalized(question: str) -> str:
    return re.sub(r"[\W_]+", " ", question.casefold()).strip()


def overlap(pool: pl.DataFrame, benchmark: pl.DataFrame) -> dict[str, Any]:
    """Questions of `benchmark` that are in `pool`: exactly, and only after normalization; three examples."""
    exact = set(pool["question"]) & set(benchmark["question"])
    loose = {normalized(q) for q in pool["question"]}
    near = [q for q in benchmark["question"] if q not in exact and normalized(q) in loose]
    examples = sorted(exact)[:3] + near[: max(0, 3 - len(exact))]
    return {"n_pool": pool.height, "n_benchmark": benchmark.height, "exact": len(exact), "normalized": len(near),
            "overlap": len(exact) + len(near), "examples": examples}


def check_task(task: str, pool_ref: str, pool: pl.DataFrame, benchmarks: dict[str, pl.DataFrame],
               allowed: int) -> dict[str, Any]:
    """The overlap of every benchmark with the pool; OverlapError when it exceeds `allowed` in total."""
    found = {ref: overlap(pool, df) for ref, df in benchmarks.items()}
    total = sum(f["overlap"] for f in found.values())
    if total > allowed:
        worst = max(found, key=lambda r: found[r]["overlap"])
        f = found[worst]
        shown = "; ".join(repr(q[:60] + ("..." if len(q) > 60 else "")) for q in f["examples"])
        raise OverlapError(
            f"tasks.{task}: {total} questions of its benchmarks are in its pool {pool_ref} ({worst}: {f['overlap']} of "
            f"{f['n_benchmark']}, {f['exact']} exact, {f['normalized']} after normalizing; e.g. {shown}): the gain would "
            f"be measured on training data. Use disjoint splits, or accept it with tasks.{task}.allow_overlap: {total}")
    return {"task": task, "pool": pool_ref, "allowed": allowed, "benchmarks": found}
