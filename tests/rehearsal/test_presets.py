"""The rehearsal lane: every shipped preset rehearsed end to end, to its report (hardex-rehearse --quick).

Run by .ci/run after the main suite (`pytest tests/rehearsal`): a preset whose rehearsal fails would
fail the same way on the GPUs it was written for. Each rehearsal also shows it ran what depends on
rewards: pass rates spread, groups mixed, and LoRA adapters moved away from their zero start.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from tests.support import ROOT


def _jobs(preset) -> int:
    """A rough cost of a preset's quick rehearsal: its model x task cells (each a probe, a run, evaluations)."""
    cfg = yaml.safe_load(preset.read_text())
    return len(cfg["models"]) * len(cfg["tasks"])


# the costliest first, so that the lane's two workers (.ci/run: --dist worksteal) share them out evenly
PRESETS = sorted((ROOT / "experiments").glob("*.yaml"), key=lambda p: (-_jobs(p), p.name))


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.stem)
def test_the_preset_rehearses_to_its_report(preset, tmp_path):
    work = tmp_path / preset.stem
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    # the console script pip installed beside this Python (pyproject's [project.scripts])
    command = str(Path(sys.executable).parent / "hardex-rehearse")
    # two cores each: jobs are mostly imports, so two rehearsals of two jobs share the 2 cores without loss, and
    # the last rehearsal of the lane keeps both cores busy instead of one (CI time)
    done = subprocess.run([command, "--quick", str(preset), "--dir", str(work), "--cores", "2"], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    cfg = yaml.safe_load((work / "config.yaml").read_text())
    results = work / "results"
    # its report, every table titled as a rehearsal
    tables = sorted((results / "tables").glob("*.md"))
    assert len(tables) >= 8 and (results / "figures" / "accuracy_curves.png").exists()
    for table in tables:
        assert table.read_text().startswith(f"## REHEARSAL of {preset}"), table
    # what depends on rewards ran: spread pass rates, mixed groups, adapters that moved
    for probe in (results / "probe").glob("*/*.parquet"):
        if probe.name.endswith(".samples.parquet"):
            continue
        rates = pl.read_parquet(probe)["pass_rate"]
        assert ((rates > 0) & (rates < 1)).any(), probe
    # (a run of two steps on the hardest subset can draw only agreeing groups by chance: the rehearsal as a
    # whole shows it, each run may not)
    steps = list((results / "train").glob("*/*/*/*/steps.parquet"))
    assert steps and any(pl.read_parquet(s)["frac_zero_std"].min() < 1 for s in steps)
    from safetensors import safe_open

    adapters = list((results / "train").glob("*/*/*/*/final/adapter_model.safetensors"))
    assert adapters or all(m["path"] == "build" for m in cfg["models"].values())
    moved = []
    for adapter in adapters:
        with safe_open(str(adapter), "pt") as f:
            lora_b = [f.get_tensor(k) for k in f.keys() if "lora_B" in k]
        assert lora_b, adapter
        moved.append(any(t.abs().sum() > 0 for t in lora_b))
    assert not adapters or any(moved), "every LoRA B is still zero: no gradient reached an adapter"
    # Phi-3's fused projections took the adapters (paper 1's phi-4 targets them by name)
    for adapter in (results / "train").glob("phi4/*/*/*/final/adapter_model.safetensors"):
        with safe_open(str(adapter), "pt") as f:
            assert any("self_attn.qkv_proj.lora_A" in k for k in f.keys())
            assert any("mlp.gate_up_proj.lora_A" in k for k in f.keys())
