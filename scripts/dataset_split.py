"""Materialize one dataset split: rows from the hub, a local file or a generator -> Parquet."""
import contextlib
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.fetch import dataset_item, hub_errors
from hardex.io import write_parquet_atomic
from hardex.job import job_log
from hardex.tasks import get_task
from hardex.tasks.rows import keep_listed

with job_log(snakemake) as log:
    src = snakemake.params.source
    item = dataset_item(f"{snakemake.wildcards.dataset}/{snakemake.wildcards.split}", src)
    # a hub dataset that is not there, gated or out of reach: one line naming the key (hardex.fetch)
    with hub_errors(item) if item else contextlib.nullcontext():
        df = keep_listed(get_task(src["family"]).load_split(src["spec"], root=None), src["spec"])
    write_parquet_atomic(df, snakemake.output[0])
    log(f"{df.height} rows, columns {df.columns}")
