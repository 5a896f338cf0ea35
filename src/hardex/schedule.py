"""How long a run trains: its optimizer steps from its grpo settings and its subset's size (a fixed max_steps, or
grpo.epochs passes over the subset), for the trainer (hardex.training), the job-time estimates (hardex.job_time)
and the report's captions.
"""

from __future__ import annotations

import math


def run_steps(g: dict, n_examples: int) -> int:
    """Optimizer steps of a run: `max_steps`, or with `grpo.epochs` as many steps as that many passes
    over the subset take (paper 2 trains each tier on its own epoch-based budget)."""
    if g.get("epochs"):
        return max(1, math.ceil(g["epochs"] * n_examples / g["prompts_per_step"]))
    return g["max_steps"]


def run_length(g: dict) -> str:
    """How long a model's runs train, in words for captions (a number of steps, or epochs per subset)."""
    return f"{g['epochs']:g} epoch(s) of each subset" if g.get("epochs") else f"{g['max_steps']}"
