"""How long a run trains and over how many steps its learning-rate schedule runs: its optimizer steps from its
grpo settings and its subset's size (a fixed max_steps, or grpo.epochs passes over the subset), for the trainer
(hardex.training), the job-time estimates (hardex.job_time) and the report's captions; and what one step is, its
completions (`completions_per_step`).

The schedule's horizon (the steps its warmup and decay span) is the run's own length unless
`grpo.schedule_steps` fixes it. A fixed horizon makes step k of a run the same computation whatever step the
run ends at, so a run continued to more steps equals one that trained that long uninterrupted
(hardex.training.train_grpo keeps its checkpoints); without it, a run of another length is another run.
"""

from __future__ import annotations

import math

#: grpo settings that only say where a run stops: under a fixed horizon (grpo.schedule_steps) they change
#: nothing the steps before that compute
RUN_END = ("max_steps", "epochs")

#: schedules that decay to zero at their horizon: past it transformers' cosine rises again and linear stays
#: at zero, so a run may not train beyond a fixed horizon of theirs
DECAYING = ("cosine", "linear")


def completions_per_step(grpo: dict) -> int:
    """The completions one optimizer step trains on: prompts_per_step prompts, a group of num_generations
    (TRL's name for the group size) each."""
    return grpo["prompts_per_step"] * grpo["num_generations"]


def run_steps(grpo: dict, n_examples: int) -> int:
    """Optimizer steps of a run: `max_steps`, or with `grpo.epochs` as many steps as that many passes
    over the subset take (paper 2 trains each tier on its own epoch-based budget)."""
    if grpo.get("epochs"):
        return max(1, math.ceil(grpo["epochs"] * n_examples / grpo["prompts_per_step"]))
    return grpo["max_steps"]


def schedule_horizon(grpo: dict, steps: int) -> int:
    """The steps the learning-rate schedule spans for a run of `steps`: `grpo.schedule_steps` where set, else
    the run's own steps."""
    return grpo.get("schedule_steps") or steps


def past_horizon(grpo: dict, steps: int) -> str | None:
    """Why a run of `steps` cannot train under its settings' fixed horizon (a decaying schedule ending before
    the run does), or None."""
    horizon = grpo.get("schedule_steps")
    if not horizon or steps <= horizon or grpo["lr_scheduler"] not in DECAYING:
        return None
    beyond = ("the learning rate rises again" if grpo["lr_scheduler"] == "cosine"
              else "it trains at a learning rate of 0")
    return (f"a run of {steps} steps goes past the {horizon} steps its {grpo['lr_scheduler']} learning-rate schedule "
            f"spans, where {beyond}; raise schedule_steps to at least {steps} (another schedule: runs train afresh) "
            f"or train fewer steps")


def run_length(grpo: dict) -> str:
    """How long a model's runs train, in words for captions (a number of steps, or epochs per subset)."""
    return f"{grpo['epochs']:g} epoch(s) of each subset" if grpo.get("epochs") else f"{grpo['max_steps']}"
