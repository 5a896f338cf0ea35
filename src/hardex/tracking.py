"""Experiment trackers for GRPO runs: TensorBoard, Weights & Biases or trackio, through the Trainer's own
`report_to`, one run per model, task, strategy and seed.

Nothing a tracker does changes what a run computes, so `grpo.report_to` is not part of the settings that
key a run's checkpoints (hardex.training). Every tracker writes under the run's folder unless its own
environment says otherwise: TensorBoard's events in `<run>/tracking/tensorboard/`, W&B's files in
`<run>/tracking/` in offline mode (a cluster node rarely reaches wandb.ai: `wandb sync` them later; set
WANDB_MODE=online to stream), trackio's local database as trackio keeps it.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

#: grpo.report_to -> the Python package the Trainer's integration needs
TRACKERS = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}
#: the project (W&B, trackio) every hardex run reports to, unless WANDB_PROJECT says otherwise
PROJECT = "hardex"


class TrackerError(RuntimeError):
    """A tracker asked for whose package is not installed; str() says how to install it."""


def tracker_args(report_to: str, run_name: str, run_dir: Path) -> dict:
    """The Trainer arguments (report_to, run_name, project) for `grpo.report_to`, after pointing the
    tracker's files at the run's folder; {"report_to": []} for none."""
    if report_to == "none":
        return {"report_to": []}
    if report_to not in TRACKERS:
        raise ValueError(f"grpo.report_to {report_to!r}: expected none or one of {', '.join(TRACKERS)}")
    if importlib.util.find_spec(TRACKERS[report_to]) is None:
        raise TrackerError(f"grpo.report_to: {report_to} needs the {TRACKERS[report_to]} package "
                           f"(pip install {TRACKERS[report_to]})")
    folder = Path(run_dir) / "tracking"
    if report_to == "tensorboard":
        os.environ.setdefault("TENSORBOARD_LOGGING_DIR", str(folder / "tensorboard"))
    elif report_to == "wandb":
        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_DIR", str(folder))
        os.environ.setdefault("WANDB_PROJECT", PROJECT)
    folder.mkdir(parents=True, exist_ok=True)
    return {"report_to": [report_to], "run_name": run_name, "project": os.environ.get("WANDB_PROJECT", PROJECT)}
