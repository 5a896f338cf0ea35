"""Draw the figures this job's outputs name, in one process (hardex.report.figures)."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.job import job_log
from hardex.report.figures import draw_figures

with job_log(snakemake) as log:
    draw_figures(list(snakemake.output), dict(snakemake.input.items()), dict(snakemake.params.items()), log)
