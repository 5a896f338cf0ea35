"""Convert a GGUF model file into a from_pretrained folder."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.job import job_log, set_threads
from hardex.model_sources import convert_gguf

with job_log(snakemake) as log:
    set_threads(snakemake.threads)
    convert_gguf(snakemake.params.gguf, snakemake.output[0], log=log, file=snakemake.params.file,
                 sha256=snakemake.params.sha256)  # logs its own summary
