"""The sequential design's verdict table, from its last look (hardex.report.looks)."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import json

from hardex.job import job_log
from hardex.report.looks import verdict_note, verdict_table
from hardex.report.render import write_table
from hardex.sequential import Design

with job_log(snakemake) as log:
    record = json.loads(Path(snakemake.input.look).read_text())
    table = verdict_table(record)
    write_table(table, Path(snakemake.output[0]).with_suffix(""), "Verdicts of the sequential design",
                verdict_note(Design(**snakemake.params.design), record), banner=snakemake.params.banner)
    log(f"{table.height} deciding comparisons at look {record['look']} ({record['seeds']} seeds)")
