"""The survey of tasks by probing alone: one table and one figure from every probe table (hardex.report.survey)."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.io import read_parquet
from hardex.job import job_log
from hardex.layout import PROBE, identity
from hardex.report.plots import plot_survey
from hardex.report.render import write_table
from hardex.report.survey import NOTE, survey_table

with job_log(snakemake) as log:
    probes = {}
    for path in snakemake.input.probes:
        ids = identity(PROBE, path)
        probes[ids["model"], ids["task"]] = read_parquet(path)
    table = survey_table(probes, snakemake.params.generations)
    stem = Path(snakemake.output.table).with_suffix("")
    write_table(table, stem, "Survey: which pools sit where GRPO can learn", NOTE, decimals=1, formats=("md", "csv"),
                banner=snakemake.params.banner)
    plot_survey(table, [snakemake.output.figure], {"banner": snakemake.params.banner})
    log(f"{table.filter(table['tier'] == 'all').height} tasks surveyed")
