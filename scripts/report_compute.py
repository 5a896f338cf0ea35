"""Write the compute table (wall time and peak memory per stage) from the jobs' timing files."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.job import job_log
from hardex.report import timings
from hardex.report.render import write_table

with job_log(snakemake) as log:
    i = snakemake.input
    expected = timings.timing_files([*i.models, *i.probes, *i.bases, *i.steps, *i.evals],
                                    snakemake.params.model_stages)
    found = [f for f in expected if Path(f).exists()]
    missing = len(expected) - len(found)
    note = timings.NOTE + (f" {missing} of {len(expected)} jobs have no timing file "
                           f"(made before timings were recorded) and are not counted." if missing else "")
    table = timings.compute_table(timings.load_timings(found))
    write_table(table, Path(snakemake.output[0]).with_suffix(""), timings.TITLE, note,
                banner=snakemake.params.banner)
    log(f"compute: {len(found)} timing files, {missing} missing, {table.height} rows")
