"""Write the recommendation table (which subset to train on, from the probe alone) in every format."""
import sys
from pathlib import Path

# the library, also inside --sdm conda envs (from __file__: a process vLLM spawns has no `snakemake`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hardex.job import job_log
from hardex.report.loading import load_pool
from hardex.report.pool import subset_pass_rates
from hardex.report.recommend import TITLE, recommend_note, recommend_table
from hardex.report.render import write_table

with job_log(snakemake) as log:
    p, i = snakemake.params, snakemake.input
    probes, subsets = load_pool(i.probes, i.subsets)
    table = recommend_table(subset_pass_rates(probes, subsets, p.generations))
    write_table(table, Path(snakemake.output[0]).with_suffix(""), TITLE, recommend_note(table), p.decimals,
                banner=p.banner)
    for row in table.filter(table["rank"] == 1).iter_rows(named=True):
        log(f"{row['model']}/{row['task']}: {row['recommended']} "
            f"({row['predicted_learnable_pct']:.0f} % predicted mixed)")
