"""The same config and seeds give byte-identical datasets, probe counts and subsets (same machine)."""

from __future__ import annotations

import hashlib
import shutil

from tests.support import SMOKE, snakemake


def digests(root, pattern):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.glob(pattern))}


def test_two_runs_are_byte_identical(tmp_path, smoke_run):
    """A fresh run against the session's smoke run (the same config, run the same way)."""
    a = tmp_path / "a"
    a.mkdir()
    shutil.copy(SMOKE, a / "config.yaml")
    targets = [f"results/subsets/tiny/swaps/{s}/seed0.parquet" for s in ("hard", "easy", "random")]
    res = snakemake(a, "--cores", "2", *targets)
    assert res.returncode == 0, res.stderr[-3000:]
    for pattern in ("results/data/**/*.parquet", "results/probe/**/*.parquet", "results/subsets/**/*.parquet",
                    "results/models/tiny/model.safetensors"):
        da = digests(a, pattern)
        db = {path: digest for path, digest in digests(smoke_run, pattern).items() if path in da}
        assert da, f"nothing matched {pattern}"
        assert da == db, f"{pattern} differs between two runs of the same config"
