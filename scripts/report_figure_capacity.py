"""Figure: gain and learnable % of every strategy against model size, one row per task."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.report import plots
from hardex.report.loading import load_results, model_parameters
from hardex.report.tables import gain_table, learnable_table, run_summary
from hardex.workflow import job_log

with job_log(snakemake) as log:
    p, i = snakemake.params, snakemake.input
    res = load_results(i.evals, i.bases, i.steps, p.benchmarks, p.pass_k)
    summary = run_summary(res)
    gains = gain_table(res, p.stats["ci_level"], p.stats["iterations"], p.stats["seed"], summary)
    plots.plot_capacity(gains, learnable_table(summary, p.stats["ci_level"]), model_parameters(p.sizes_b, p.built),
                        list(snakemake.output), p.style)
    log(f"wrote {', '.join(snakemake.output)}")
