"""Figure: pass@k against k, the base model and each strategy's final checkpoint beside its sharpening null, from
the pass_at_k table."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import polars as pl

from hardex.report import plots
from hardex.workflow import job_log

with job_log(snakemake) as log:
    table = pl.read_csv(snakemake.input.table)
    plots.plot_pass_at_k(table, list(snakemake.output), snakemake.params.style)
    log(f"{table.height} rows; wrote {', '.join(snakemake.output)}")
