"""Figure: learnable % against gain with the fitted line and its band, from results/regression.json."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import json

from hardex.report import plots
from hardex.workflow import job_log

with job_log(snakemake) as log:
    with open(snakemake.input.regression) as fh:
        plots.plot_learnable_vs_gain(json.load(fh), list(snakemake.output), snakemake.params.style)
    log(f"wrote {', '.join(snakemake.output)}")
