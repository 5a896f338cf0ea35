"""The memory plan's estimate of each model job against the peak a finished run measured.

    python perf/memory_plan_vs_peak.py [--run DIR] [--config FILE]

DIR is a finished run's working directory (default: here) and FILE its config (default: DIR/config.yaml).
For each model the plan (hardex.memory_plan, host memory on a CPU) is made with compute.prompt_tokens set
to the longest prompt the run's pools and benchmarks hold, rendered and tokenized as the jobs do, and set
beside the largest resident memory Snakemake's benchmark directive recorded for that stage
(results/timings/). It also prints what a bare job process holds: Python with the libraries a train job
imports, the estimates' CPU_PROCESS_GIB (hardex.memory_estimate).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
from pathlib import Path

import polars as pl
import yaml

from hardex import layout
from hardex.config import check_config
from hardex.memory_plan import plan
from hardex.models import encode_prompt, render_prompt
from hardex.report.timings import load_timings
from hardex.settings import decodings
from hardex.tasks import get_task

# the plan's job kinds and the stages whose timing files measure them
STAGES = {"train": ["train"], "probe": ["probe"], "evaluate": ["evaluate_base", "evaluate_run"]}


def process_baseline_gib() -> float:
    """Peak resident memory of a fresh Python that imports what a train job imports."""
    code = ("import resource, hardex.training, peft, trl;"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return int(out.split()[-1]) / 2**20  # ru_maxrss is in KiB on Linux


def longest_prompt(run: Path, cfg: dict, model: str) -> int:
    """Tokens of the longest prompt of any pool or benchmark split the run holds, as its jobs encode it."""
    from transformers import AutoTokenizer

    entry = cfg["models"][model]
    made = run / layout.MODEL.format(model=model)
    tokenizer = AutoTokenizer.from_pretrained(made if made.is_dir() else entry["path"])
    splits = {t["pool"] for t in cfg["tasks"].values()} | set(decodings(cfg))
    longest = 0
    for split in sorted(splits):
        dataset, name = split.split("/")
        task = get_task(cfg["datasets"][dataset]["family"])  # the prompt does not depend on the scoring
        rows = pl.read_parquet(run / layout.DATA.format(dataset=dataset, split=name)).to_dicts()
        longest = max(longest, *(len(encode_prompt(tokenizer, render_prompt(tokenizer, task.prompt(r), entry["chat"])))
                                 for r in rows))
    return longest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, default=Path("."))
    ap.add_argument("--config", type=Path)
    args = ap.parse_args()
    cfg = check_config(yaml.safe_load((args.config or args.run / "config.yaml").read_text()))
    timings = load_timings(sorted((args.run / "results" / "timings").rglob("*.tsv")))
    print(f"bare job process (python + hardex.training, peft, trl): {process_baseline_gib():.2f} GiB "
          f"(self: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB)")
    print(f"{'model':8} {'job':9} {'prompt':>6} {'estimate_gib':>12} {'measured_gib':>12} {'ratio':>6}  biggest parts")
    for model in cfg["models"]:
        tokens = longest_prompt(args.run, cfg, model)
        sized = {**cfg, "compute": {**cfg["compute"], "prompt_tokens": tokens}}
        for p in (p for p in plan(sized) if p.model == model):
            rss = timings.filter((pl.col("model") == model) & pl.col("stage").is_in(STAGES[p.kind]))["max_rss"].max()
            measured = None if rss is None else rss / 1024
            ratio = f"{p.estimate.total / measured:6.2f}" if measured else "     -"
            parts = ", ".join(f"{k} {v:.2f}" for k, v in p.estimate.biggest(3))
            shown = f"{measured:12.2f}" if measured else f"{'-':>12}"
            print(f"{model:8} {p.kind:9} {tokens:6d} {p.estimate.total:12.2f} {shown} {ratio}  {parts}")


if __name__ == "__main__":
    main()
