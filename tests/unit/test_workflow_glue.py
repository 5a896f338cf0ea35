"""The workflow glue in the library: the runs a study trains (hardex.study_runs), a sequential design's batches read
through a look reader, and each job kind's resources (hardex.job_resources)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from hardex import job_resources, layout, study_runs
from hardex.config import check_config
from hardex.memory_plan import host_memory_mb
from hardex.settings import run_strategies
from tests.support import with_key


@pytest.fixture
def cfg(smoke_config) -> dict:
    return check_config(smoke_config)


@pytest.fixture
def design_cfg(smoke_config) -> dict:
    return check_config(with_key(smoke_config, "seeds", {"first": 2, "batch": 1, "max": 4}))


def look_files(tmp_path, needs: dict[int, dict]):
    """A look reader over records written here: look -> its file, {model: {task: runs}} needing seeds after it."""
    def look_file(look: int):
        if look not in needs:
            raise LookupError(f"look {look} has not run")  # what the checkpoint's reader does: planning stops
        path = tmp_path / f"look{look}.json"
        path.write_text(json.dumps({"needs_seeds": needs[look]}))
        return path
    return look_file


def test_a_fixed_design_trains_the_whole_grid(cfg, tmp_path):
    runs = study_runs.run_files(cfg, layout.STEPS, look_files(tmp_path, {}))
    assert runs == study_runs.grid_files(cfg, layout.STEPS)
    cells = study_runs.cells(cfg)
    assert len(runs) == len(cells) * len(run_strategies(cfg)) * len(cfg["seeds"])
    assert study_runs.deciding(cfg) == []


def test_a_sequential_design_trains_the_runs_each_look_leaves_undecided(design_cfg, tmp_path):
    (model, task), = study_runs.cells(design_cfg)
    strategies = run_strategies(design_cfg)
    kept = ["hard_online"]
    reader = look_files(tmp_path, {1: {model: {task: kept}}, 2: {model: {task: []}}})
    first = study_runs.design_runs(design_cfg, reader, 1)
    assert first == [(model, task, s, seed) for s in strategies for seed in (0, 1)]
    # the third seed goes to the runs look 1 left undecided; look 2 decides the rest: no fourth seed
    assert study_runs.design_runs(design_cfg, reader) == first + [(model, task, kept[0], 2)]
    assert study_runs.last_look(design_cfg, reader) == 2
    # the subsets of the first batch: one per strategy and seed, online and control runs sharing their strategy's
    subsets = study_runs.subset_files(design_cfg, reader, first_batch=True)
    assert len(subsets) == len(design_cfg["selection"]["strategies"]) * 2
    # an input function: a look not run yet is read only when Snakemake asks for the files
    evals = study_runs.run_files(design_cfg, layout.EVAL_RUN, look_files(tmp_path, {}))
    with pytest.raises(LookupError):
        evals(None)


def test_each_job_kind_sizes_its_memory_by_the_plan_on_a_cpu_and_by_the_formula_on_gpus(cfg):
    model = next(iter(cfg["models"]))
    wildcards = SimpleNamespace(model=model)
    train = job_resources.train_job(cfg)
    assert train.gpu(wildcards) == 0
    assert train.mem_mb(wildcards, 1) == host_memory_mb(cfg)[model, "train"]
    assert train.mem_mb(wildcards, 2) == 2 * train.mem_mb(wildcards, 1)  # a retry asks for more
    gpu = check_config(with_key(with_key(cfg, "compute.gpu", 1), "grpo.processes", 2))
    c, size = gpu["compute"], gpu["models"][model]["size_b"]
    assert job_resources.train_job(gpu).mem_mb(wildcards, 1) == int(2 * c["mem_mb"] + c["mem_mb_per_b"] * size)
    assert job_resources.probe_job(gpu).mem_mb(wildcards, 1) == int(c["mem_mb"] + c["mem_mb_per_b"] * size)
    assert job_resources.train_job(gpu).threads(wildcards) == 2 * c["run_threads"]
