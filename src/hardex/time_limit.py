"""A train job's pace against its runtime limit (issue 64 item 2): after its first steps, one line in its log says
how long its steps take against the limit, and where something enforces the limit (Slurm) and the run cannot
finish within it, the job stops then, naming the rate to set, instead of at the limit hours later.

The limit is Snakemake's `runtime` resource (hardex.job_time's estimate); what to set is the rate that estimate
reads: compute.gpu_rates on a GPU, compute.runtime_min on a CPU (its size formula)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

#: the step whose time is the pace: the first holds warm-up (graph captures, the allocator's growth)
JUDGED_AT = 2


class OutOfTime(RuntimeError):
    """A run that cannot finish its steps within its job's limit. Not final: a retry asks a longer limit and
    resumes from the run's checkpoints."""


@dataclass(frozen=True)
class TimeLimit:
    """A job's runtime limit, and what its estimate was made of (plain data: a run's processes get it as JSON)."""
    seconds: float  #: the limit, from the job's start
    started: float  #: the job's start (time.time())
    enforced: bool  #: something stops the job at its limit (Slurm); elsewhere a slow run is only told
    planned_step: float | None = None  #: job_time's seconds for one step (None on a CPU: the size formula)
    rates: dict | None = None  #: the peaks it was estimated at: name, tflops, hbm_gbps
    runtime_min: float | None = None  #: compute.runtime_min, what a CPU job's limit grows with

    def pace(self, step_seconds: float, steps_left: int, now: float | None = None) -> tuple[str, float]:
        """The log line for `steps_left` steps at `step_seconds` each, and the seconds the job will have run."""
        elapsed = (time.time() if now is None else now) - self.started
        total = elapsed + steps_left * step_seconds
        return (f"at {step_seconds:.1f} s a step, {steps_left} steps take about {duration(steps_left * step_seconds)} "
                f"({duration(elapsed)} run so far) against the job's limit of {duration(self.seconds)}"), total

    def advice(self, step_seconds: float, total: float) -> str:
        """What to set so that the job's next limit holds this pace."""
        if self.planned_step and self.rates:
            f, r = step_seconds / self.planned_step, self.rates
            return (f"set compute.gpu_rates: {{name: {r['name']}, tflops: {r['tflops'] / f:.0f}, hbm_gbps: "
                    f"{r['hbm_gbps'] / f:.0f}}} (the {r['name']} peaks it was estimated at over {f:.2f}: a step took "
                    f"{step_seconds:.3g} s where hardex.job_time planned {self.planned_step:.3g} s)")
        more = math.ceil((total - self.seconds) / 60 * 1.2)  # a fifth more than the shortfall
        return (f"raise compute.runtime_min by {more} minutes or more (to {(self.runtime_min or 0) + more:.0f}; a CPU "
                f"job's limit is compute.runtime_min + compute.runtime_min_per_b x size_b)")


def duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min" if seconds >= 60 \
        else f"{seconds:.1f} s"


def pace_guard(limit: TimeLimit, steps_total: int, log=print):
    """A TrainerCallback that, at the job's JUDGED_AT-th step, logs its pace and, where the limit is enforced and
    the run's remaining steps cannot end within it, raises OutOfTime naming the rate to set."""
    from transformers import TrainerCallback

    class PaceGuard(TrainerCallback):
        def __init__(self):
            self.t0, self.seen = time.time(), 0

        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.time()

        def on_step_end(self, args, state, control, **kw):
            self.seen += 1
            left = steps_total - state.global_step
            if self.seen != JUDGED_AT or left <= 0:
                return
            step = time.time() - self.t0
            line, total = limit.pace(step, left)
            if state.is_world_process_zero:
                log(f"[hardex] {line}")
            if limit.enforced and total > limit.seconds:  # every process decides alike from its own clock
                raise OutOfTime(f"the run cannot finish within its job's limit ({line}): stopped at step "
                                f"{state.global_step} instead of at the limit; {limit.advice(step, total)}")

    return PaceGuard()
