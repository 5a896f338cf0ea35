"""One of the processes of a run trained in several (hardex.launch): builds the run's reward and fits.

    python -m hardex.train_worker SPEC.json      (started by accelerate launch, never by hand)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hardex.controls import RewardSpec
from hardex.devices import hold_to_share
from hardex.launch import die_with_parent, hook_error_file
from hardex.reward_hook import HookError
from hardex.time_limit import TimeLimit
from hardex.training import fit


def main(spec_file: str) -> None:
    die_with_parent()  # torch's launcher gave this process a session of its own: go when it goes
    hold_to_share()  # accelerate's ranks do not pass through the job's setup (hardex.job.job_log)
    spec = json.loads(Path(spec_file).read_text())
    # the reward as data (a function being nothing a process can be handed), built as train_grpo builds it in one
    # process; a control's shuffled references came with the rows, a reward hook is loaded again by its spec
    try:
        reward_fn = RewardSpec(**spec["reward"]).function(spec["seed"])
        fit(spec["model_path"], spec["rows"], reward_fn, spec["grpo"], spec["seed"], Path(spec["ckpt_dir"]),
            spec["resume"], spec["steps_total"], spec["trainer_args"],
            TimeLimit(**spec["time_limit"]) if spec.get("time_limit") else None)
    except HookError as e:  # the job raises it as its own (hardex.launch), not as the launcher's exit status
        hook_error_file(Path(spec_file)).write_text(f"{e}\n")
        raise
    # every rank is past training's last collective: end the process group while the interpreter is whole.
    # Left to interpreter exit, gloo's worker threads die with it and a rank can abort (SIGABRT, "terminate
    # called without an active exception") after a finished run, failing the job (accelerate's end_training
    # does this; TRL's trainer does not call it)
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
