"""Figure: test accuracy per difficulty tier during training, against the share of the full run's steps."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.report import plots
from hardex.report.catch_up import tier_curves
from hardex.report.loading import load_results
from hardex.workflow import job_log

with job_log(snakemake) as log:
    p, i = snakemake.params, snakemake.input
    res = load_results(i.evals, i.bases, (), p.benchmarks, p.pass_k)
    plots.plot_tier_curves(tier_curves(res.runs, res.base), res.benchmarks, list(snakemake.output), p.style)
    log(f"wrote {', '.join(snakemake.output)}")
