"""Figure: test accuracy against training step per strategy, with the published curves when configured."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.report import plots
from hardex.report.reference import load_reference, reference_curves
from hardex.report.loading import load_results
from hardex.report.tables import accuracy_curves
from hardex.workflow import job_log

with job_log(snakemake) as log:
    p, i = snakemake.params, snakemake.input
    res = load_results(i.evals, i.bases, (), p.benchmarks, p.pass_k)
    ref = load_reference(p.reference)
    plots.plot_accuracy_curves(accuracy_curves(res), res.benchmarks, list(snakemake.output), p.style,
                               reference_curves(ref) if ref is not None else None, p.names)
    log(f"wrote {', '.join(snakemake.output)}")
