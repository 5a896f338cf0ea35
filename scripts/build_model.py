"""Build the tiny Qwen3 and warm-start it on the sft splits."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import polars as pl

from hardex.devices import pick_device
from hardex.io import read_parquet
from hardex.job import job_log, set_threads
from hardex.models import build_model, warmstart_rows
from hardex.tasks import get_task

with job_log(snakemake) as log:
    set_threads(snakemake.threads)
    held_out = set()
    for f in snakemake.input.held_out:
        held_out |= set(read_parquet(f)["question"])
    rows = []
    for f, family in zip(snakemake.input.sft, snakemake.params.families):
        df = read_parquet(f)
        overlap = df.filter(pl.col("question").is_in(list(held_out))).height
        if overlap:
            raise ValueError(f"{f}: {overlap} warm-start questions also appear in a pool or test split")
        rows += warmstart_rows(get_task(family), df)
    log(f"warm-start on {len(rows)} examples, disjoint from {len(held_out)} held-out questions")
    # on the job's GPU where it holds one (compute.gpu: gpu_mini warm-starts 938 steps)
    summary = build_model(snakemake.output[0], rows, snakemake.params.arch, snakemake.params.warmstart, log=log,
                          device=pick_device())
    log(summary)
