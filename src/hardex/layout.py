"""The results layout: one path template per kind of file, relative to the workflow's directory.

The rules write these paths (their wildcards are the templates' fields) and the report reads a file's
identity (model, task, strategy, seed) back out of its path with `identity`, so the layout is
written once. Names are letters, digits, `_` and `-` (the config refuses others), so a field never
spans a separator or a suffix.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

# one training run: what every file of a run is named by
RUN = "{model}/{task}/{strategy}/seed{seed}"

DATA = "results/data/{dataset}/{split}.parquet"
MODEL = "results/models/{model}"
# the models whose folder (MODEL) the workflow makes, by their config path, and the rule that makes it
MADE_BY = {"build": "build_model", "gguf": "convert_model", "standin": "standin_model"}
OVERLAP = "results/overlap/{task}.json"
PROBE = "results/probe/{model}/{task}.parquet"
PROBE_SAMPLES = "results/probe/{model}/{task}.samples.parquet"
PROBE_WORK = "results/probe/{model}/{task}.chunks"
SUBSET = f"results/subsets/{RUN}.parquet"
RUN_DIR = f"results/train/{RUN}"
STEPS = f"{RUN_DIR}/steps.parquet"
FINAL = f"{RUN_DIR}/final"
EVAL_BASE = "results/eval/{model}/base/{task}.parquet"
EVAL_RUN = f"results/eval/{RUN}.parquet"
TABLE = "results/tables/{name}.{ext}"
FIGURE = "results/figures/{name}.{ext}"
REGRESSION = "results/regression.json"
# a sequential design's look k (seeds: {first, batch, max}): verdicts and the runs of the next batch
LOOK = "results/sequential/look{look}.json"

# Snakemake's `benchmark:` file of each model job (wall time, memory, CPU time): its timing file.
# In pipeline order, which the compute table keeps.
TIMINGS = {
    "build_model": "results/timings/build_model/{model}.tsv",
    "convert_model": "results/timings/convert_model/{model}.tsv",
    "standin_model": "results/timings/standin_model/{model}.tsv",
    "probe": "results/timings/probe/{model}/{task}.tsv",
    "train": f"results/timings/train/{RUN}.tsv",
    "evaluate_base": "results/timings/evaluate_base/{model}/{task}.tsv",
    "evaluate_run": f"results/timings/evaluate_run/{RUN}.tsv",
}

_NAME = r"[A-Za-z0-9][A-Za-z0-9_-]*"
_SEP = r"[/\\]"


class LayoutError(ValueError):
    """A path that is not one of the layout's (say which and what was expected)."""


@lru_cache(maxsize=None)
def _pattern(template: str) -> re.Pattern:
    """The template as a regex matching the end of a path (any folder before `results/`)."""
    parts = re.split(r"\{(\w+)\}", template)
    regex = ""
    for i, part in enumerate(parts):
        if i % 2:
            regex += rf"(?P<{part}>\d+)" if part == "seed" else rf"(?P<{part}>{_NAME})"
        else:
            regex += _SEP.join(re.escape(p) for p in part.split("/"))
    return re.compile(rf"(?:^|{_SEP}){regex}$")


def identity(template: str, path: str | Path) -> dict[str, Any]:
    """The fields of `template` in `path` (seed as an int); LayoutError when the path is not one."""
    m = _pattern(template).search(str(path))
    if not m:
        raise LayoutError(f"{path}: not a path of the results layout ({template})")
    return {k: int(v) if k == "seed" else v for k, v in m.groupdict().items()}


def fill(template: str, **fields: Any) -> str:
    """The template with its fields filled in (the path of one file)."""
    return template.format(**fields)


def data_file(ref: str) -> str:
    """The data file of a 'dataset/split' reference."""
    dataset, split = ref.split("/", 1)
    return fill(DATA, dataset=dataset, split=split)
