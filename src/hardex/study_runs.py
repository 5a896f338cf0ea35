"""The runs a study trains and the files they make, as the rules' inputs: the config's grid (every model with its
own tasks, run strategy and seed: `grid_files`), or under a sequential design (`seeds: {first, batch, max}`,
hardex.sequential) the batches its looks decide.

Every run trains the design's first batch of seeds; the checkpoint sequential_look then reads the evaluations and
names the runs of the comparisons still undecided, which alone train the next batch, until every deciding
comparison is decided or the design's maximum is reached. The functions here read a look through `look_file`
(look -> its record's path: the workflow's checkpoint), so that reading a look that has not run yet stops
planning there, and Snakemake plans again once the checkpoint has run.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Callable

from hardex import layout
from hardex.report.looks import deciding_comparisons
from hardex.selection import RunName
from hardex.settings import model_tasks, run_strategies, seed_design, seed_list

LookFile = Callable[[int], "str | Path"]
Run = tuple[str, str, str, int]  # model, task, run strategy, seed


def grid_files(cfg: dict, template: str, **fields) -> list[str]:
    """The template filled with every model, task, run strategy and seed it names (`fields` narrows them),
    each model with its own tasks (models.<name>.tasks)."""
    values = dict(model=list(cfg["models"]), task=list(cfg["tasks"]), strategy=run_strategies(cfg),
                  seed=seed_list(cfg)) | fields
    used = {k: [v] if isinstance(v, str) else list(v) for k, v in values.items() if f"{{{k}}}" in template}
    return [layout.fill(template, **combo)
            for combo in (dict(zip(used, c)) for c in itertools.product(*used.values()))
            if "model" not in combo or "task" not in combo or combo["task"] in model_tasks(cfg, combo["model"])]


def cells(cfg: dict) -> list[tuple[str, str]]:
    """Every (model, task) the study trains on: each model with its own tasks."""
    return [(m, t) for m in cfg["models"] for t in model_tasks(cfg, m)]


def deciding(cfg: dict) -> list[tuple[str, str]]:
    """The (run, versus) pairs that decide a sequential design in each cell (`seeds.deciding`, else
    report.looks' defaults); none without a design."""
    if not seed_design(cfg):
        return []
    return deciding_comparisons(run_strategies(cfg), cfg["seeds"].get("deciding"))


def runs_after_look(look_file: LookFile, look: int) -> dict[tuple[str, str], list[str]]:
    """{(model, task): run strategies} that train the batch after look `look`."""
    record = json.loads(Path(look_file(look)).read_text())
    return {(m, t): runs for m, tasks in record["needs_seeds"].items() for t, runs in tasks.items()}


def design_runs(cfg: dict, look_file: LookFile, batches: int | None = None) -> list[Run]:
    """Every run the design's first `batches` batches train (by default the whole design's: until a look leaves
    no run needing seeds, or the maximum)."""
    design = seed_design(cfg)
    runs, bounds = [], [0] + design.looks
    needed = {cell: run_strategies(cfg) for cell in cells(cfg)}
    for k in range(1, (batches or len(design.looks)) + 1):
        if k > 1:
            needed = runs_after_look(look_file, k - 1)
            if not any(needed.values()):
                break
        runs += [(m, t, s, seed) for (m, t), strategies in needed.items() for s in strategies
                 for seed in range(bounds[k - 1], bounds[k])]
    return runs


def last_look(cfg: dict, look_file: LookFile) -> int:
    """The look after which no run trains more seeds: every comparison decided, or the design's maximum."""
    looks, look = len(seed_design(cfg).looks), 1
    while look < looks and any(runs_after_look(look_file, look).values()):
        look += 1
    return look


def design_files(cfg: dict, template: str, look_file: LookFile, batches: int | None = None) -> list[str]:
    """`template` filled for every run of the design (up to `batches` batches; all of them by default)."""
    return [layout.fill(template, model=m, task=t, strategy=s, seed=seed)
            for m, t, s, seed in design_runs(cfg, look_file, batches)]


def design_subsets(cfg: dict, look_file: LookFile, batches: int | None = None) -> list[str]:
    """The subsets the design's runs train on (of its first `batches` batches; all by default)."""
    return sorted({layout.fill(layout.SUBSET, model=m, task=t, strategy=RunName.parse(s).strategy, seed=seed)
                   for m, t, s, seed in design_runs(cfg, look_file, batches)})


def run_files(cfg: dict, template: str, look_file: LookFile):
    """`template` filled for every run the study trains: the grid's, or under a sequential design an input
    function of the runs its looks decided (planned again after each look)."""
    if seed_design(cfg):
        return lambda wildcards: design_files(cfg, template, look_file)
    return grid_files(cfg, template)


def subset_files(cfg: dict, look_file: LookFile, first_batch: bool = False):
    """Every subset the study's runs train on (as `run_files`); `first_batch`: under a sequential design, those of
    its first batch alone, which exist before any run trains (what a prediction from the probe alone reads: the
    whole design's would wait for every look, and so for the first batch's training)."""
    if not seed_design(cfg):
        return grid_files(cfg, layout.SUBSET, strategy=cfg["selection"]["strategies"])
    if first_batch:
        return design_subsets(cfg, look_file, 1)
    return lambda wildcards: design_subsets(cfg, look_file)
