"""Figure: each strategy's gain against the rollouts and tokens it generated, from the rollout_budget table."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import polars as pl

from hardex.report import plots
from hardex.workflow import job_log

with job_log(snakemake) as log:
    budget = pl.read_csv(snakemake.input.budget)
    plots.plot_gain_vs_compute(budget, list(snakemake.output), snakemake.params.style)
    log(f"{budget.height} strategy cells; wrote {', '.join(snakemake.output)}")
