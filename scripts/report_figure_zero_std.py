"""Figure: the per-step share of GRPO groups with no reward variance, per strategy."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.report import plots
from hardex.report.loading import load_steps
from hardex.workflow import job_log

with job_log(snakemake) as log:
    plots.plot_zero_std(load_steps(snakemake.input.steps), list(snakemake.output), snakemake.params.style)
    log(f"wrote {', '.join(snakemake.output)}")
