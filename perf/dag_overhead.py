"""Workflow overhead: wall time of `snakemake -n` (build the DAG, plan every job, run nothing).

Times each config given (default: every experiments/*.yaml, or config.yaml when there is none) in
a fresh, empty working directory, so the DAG holds every job of the experiment; prints the job
count and the median of --repeats runs per config, and the largest config's figure last.

    python perf/dag_overhead.py                      # experiments/*.yaml (or config.yaml)
    python perf/dag_overhead.py experiments/big.yaml --repeats 5
Target: < 10 s on the largest experiment config.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine, median  # noqa: E402


def dry_run(config: Path) -> tuple[float, int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "snakemake", "-n", "-s", str(ROOT / "Snakefile"), "--directory", tmp,
               "--configfile", str(config.resolve()), "--cores", "1"]
        # online: a dry run downloads nothing, and offline it would refuse hub models missing from the cache
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_DATASETS_OFFLINE": "1"}
        t0 = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp)
        dt = time.perf_counter() - t0
    out = res.stdout + res.stderr
    if res.returncode != 0:
        raise SystemExit(f"snakemake -n failed on {config}:\n{out[-3000:]}")
    m = re.search(r"^total\s+(\d+)", out, re.M)
    return dt, int(m.group(1)) if m else -1, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("configs", nargs="*", type=Path)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    configs = args.configs or sorted((ROOT / "experiments").glob("*.yaml")) or [ROOT / "config.yaml"]
    print(f"machine {machine()}")
    rows = []
    for cfg in configs:
        times, jobs = [], -1
        for _ in range(args.repeats):
            dt, jobs, _ = dry_run(cfg)
            times.append(dt)
        rows.append((cfg, jobs, median(times), times))
        print(f"{cfg.relative_to(ROOT) if cfg.is_relative_to(ROOT) else cfg}: {jobs} jobs, snakemake -n "
              f"median {median(times):.2f} s  (runs: {', '.join(f'{t:.2f}' for t in times)})", flush=True)
    big = max(rows, key=lambda r: r[1])
    print(f"\nlargest config {big[0].name}: {big[1]} jobs, snakemake -n {big[2]:.2f} s (target < 10 s): "
          f"{'met' if big[2] < 10 else 'MISSED'}")


if __name__ == "__main__":
    main()
