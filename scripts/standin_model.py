"""Build a rehearsal's stand-in model from a kept architecture config."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.job import job_log, set_threads
from hardex.rehearsal.standin import build_standin

with job_log(snakemake) as log:
    set_threads(snakemake.threads)
    build_standin(snakemake.output[0], snakemake.params.architecture, log=log)  # logs what it built
