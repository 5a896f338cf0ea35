"""Figure: the pool's pass rates with every selected subset marked, and the learnable % each should give."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.report import plots
from hardex.report.loading import load_pool
from hardex.report.tables import with_expected_mixed
from hardex.workflow import job_log

with job_log(snakemake) as log:
    probes, subsets = with_expected_mixed(*load_pool(snakemake.input.probes, snakemake.input.subsets),
                                          snakemake.params.generations)
    plots.plot_pool_pass_rates(probes, subsets, list(snakemake.output), snakemake.params.style)
    log(f"wrote {', '.join(snakemake.output)}")
