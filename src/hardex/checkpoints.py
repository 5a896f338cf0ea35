"""A GRPO run's checkpoints folder, `<run>/checkpoints/`: which checkpoints a run resumes from, the step record kept
beside them, and the run's outputs published from its last one.

The folder is no declared output of the workflow: Snakemake deletes a failed job's declared outputs, and a killed
run must find its checkpoints again. A hash of what decides their content (the model's fingerprint, the scorer,
the settings, the seed, the rendered prompts and answers) guards them: checkpoints of anything else are never
resumed. Under a fixed schedule horizon (`grpo.schedule_steps`, hardex.schedule) the steps a run stops at are not
part of it: a finished run continues to more steps, or publishes the checkpoint at fewer, with the record and
weights of an uninterrupted run.

A callback writes one row per optimizer step to a JSON-lines file in the folder (`STEP_RECORD`), so a resumed run
keeps the record of the steps before the kill; `steps.parquet` is written from it when the run is published.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import polars as pl

from hardex.io import checkpoint_steps, settings_hash, write_json_atomic, write_parquet_atomic
from hardex.metrics import learnable_pct
from hardex.schedule import RUN_END

STEP_RECORD = "steps.jsonl"  # beside the checkpoints: one JSON line per step, appended as it ends

STEP_COLUMNS = {
    "step": pl.Int64,
    "reward_mean": pl.Float64,
    "reward_std": pl.Float64,
    "frac_zero_std": pl.Float64,
    "loss": pl.Float64,
    "kl": pl.Float64,
    "completion_length": pl.Float64,
    "frac_truncated": pl.Float64,  # share of the step's completions cut at grpo.max_completion_length
    "learning_rate": pl.Float64,
    "step_time": pl.Float64,
    "rollouts_generated": pl.Int64,  # completions sampled in the step, discarded ones included
    "rollouts_discarded": pl.Int64,  # online filtering: completions of groups dropped for agreeing rewards
    "tokens_generated": pl.Int64,
    "filter_capped": pl.Boolean,  # online filtering reached grpo.online_max_rounds (null: not filtering)
}
# TRL log key -> steps.parquet column
TRL_KEYS = {
    "reward": "reward_mean",
    "reward_std": "reward_std",
    "frac_reward_zero_std": "frac_zero_std",
    "loss": "loss",
    "kl": "kl",
    "completions/mean_length": "completion_length",
    "completions/clipped_ratio": "frac_truncated",
    "learning_rate": "learning_rate",
}


def step_recorder(path: Path, counts: Callable[[], dict[str, Any]]):
    """A callback writing one row per step; `counts()` gives the step's rollouts generated and discarded,
    tokens generated and whether online filtering reached its cap."""
    from transformers import TrainerCallback

    class StepRecorder(TrainerCallback):
        """One JSON line per logged optimizer step (logging_steps = 1)."""

        def __init__(self):
            self.t0 = time.time()
            self.counts = counts  # the step's counts, as on_log reads them

        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.time()

        def on_log(self, args, state, control, logs=None, **kw):
            if not logs or "reward" not in logs:
                return
            for key in ("loss", "grad_norm"):  # fail loudly: later steps would train on garbage
                if not math.isfinite(logs.get(key) or 0.0):
                    raise FloatingPointError(
                        f"{key.replace('_', ' ')} is {logs[key]} at step {state.global_step}; lower the learning "
                        "rate or check the rewards (last good checkpoint kept)")
            row = {col: logs.get(key) for key, col in TRL_KEYS.items()}  # TRL gathers these across processes
            row["step"] = state.global_step
            row["step_time"] = time.time() - self.t0
            row.update(summed_over_processes(counts(), getattr(args, "device", None)))  # nccl takes CUDA tensors only
            if state.is_world_process_zero:
                with open(path, "a") as fh:
                    fh.write(json.dumps(row) + "\n")

    return StepRecorder()


def summed_over_processes(counts: dict[str, Any], device=None) -> dict[str, Any]:
    """A step's rollout counts of every process (each generates its own share of the step's groups): summed,
    and capped if any process's online filtering was. Every process must call it (a collective).

    `device`: the process's own device (the trainer's `args.device`), where the reduced tensor must lie:
    accelerate starts the group with nccl on GPUs, which reduces CUDA tensors only (gloo, on a CPU, takes CPU
    tensors)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return counts
    numbers = [k for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool)]
    totals = torch.tensor([counts[k] for k in numbers] + [int(bool(counts.get("filter_capped")))], dtype=torch.int64,
                          device=device)
    dist.all_reduce(totals)
    totals = totals.tolist()
    out = {**counts, **dict(zip(numbers, totals))}
    if counts.get("filter_capped") is not None:
        out["filter_capped"] = bool(totals[-1])
    return out


def checkpoint_damage(folder: Path) -> str | None:
    """Why a saved checkpoint cannot be resumed (a weight file or the trainer state cut short by a full
    disk or a kill during the save), or None when it is whole."""
    from safetensors import safe_open

    try:
        json.loads((folder / "trainer_state.json").read_text())
        for f in sorted(folder.glob("*.safetensors")):
            with safe_open(str(f), "pt"):  # reads the header, and checks the file holds all it announces
                pass
    except Exception as e:  # any unreadable part makes the whole checkpoint unusable
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None


#: grpo settings that change nothing a run computes: a resumed run keeps its checkpoints when they change
NOT_COMPUTED = ("report_to",)


def resume_settings(grpo: dict[str, Any]) -> dict[str, Any]:
    """The grpo settings that decide what a run's checkpoints hold: all but those that change nothing a run
    computes and, under a fixed schedule horizon (grpo.schedule_steps), those that only say where the run stops
    (max_steps, epochs: hardex.schedule): its checkpoints then serve a run to more steps, or to fewer."""
    left_out = NOT_COMPUTED + (RUN_END if grpo.get("schedule_steps") else ())
    return {k: v for k, v in grpo.items() if k not in left_out}


def resume_point(ckpt_dir: Path, model_path: str, data: list[tuple[str, str]], grpo: dict[str, Any], seed: int,
                 identity: dict[str, Any] | None, steps_total: int, log=print) -> tuple[int | None, int]:
    """Make `ckpt_dir` this run's and say where it resumes: the step of the checkpoint to resume from (None: the
    base model) and the rows its step record keeps.

    Checkpoints of another run (another hash of `identity`, the grpo settings that decide what they hold, the seed
    and the `data`, the rendered prompts and answers) are removed, as are those past `steps_total` (a run lowered
    to fewer steps under a fixed horizon), a damaged last one (the one before is resumed) and all of them where the
    step record does not match the checkpoint resumed from. The record keeps the rows up to that checkpoint."""
    record = ckpt_dir / STEP_RECORD
    tag = settings_hash({"identity": identity or {"model": model_path}, "grpo": resume_settings(grpo), "seed": seed,
                         "data": data})
    marker = ckpt_dir / "settings.json"
    if ckpt_dir.exists() and (other := _other_run(marker, tag, grpo, seed, identity, settings_hash(data))):
        log(f"{ckpt_dir}: checkpoints of {other}; starting afresh")
        shutil.rmtree(ckpt_dir)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic({"hash": tag, "grpo": grpo, "seed": seed, "identity": identity, "data": settings_hash(data)},
                      marker)

    done = checkpoint_steps(ckpt_dir)
    if later := [s for s in done if s > steps_total]:
        # fewer steps than were trained, under a fixed horizon (the hash holds max_steps otherwise): the steps
        # up to steps_total are this run's; the later ones go, since evaluation reads every checkpoint of a run
        log(f"the run trains {steps_total} steps, fewer than the {later[-1]} trained: checkpoints {later} removed")
        for s in later:
            shutil.rmtree(ckpt_dir / f"checkpoint-{s}")
        done = done[: len(done) - len(later)]
    while done and (damage := checkpoint_damage(ckpt_dir / f"checkpoint-{done[-1]}")):
        log(f"checkpoint-{done[-1]} is damaged ({damage}); removed, resuming from the one before")
        shutil.rmtree(ckpt_dir / f"checkpoint-{done.pop()}")
    # the step record must match the checkpoint we resume from: drop rows logged after it
    kept = [r for r in _read_step_record(record) if done and r["step"] <= done[-1]]
    if done and (problem := _record_problem(kept, ckpt_dir / f"checkpoint-{done[-1]}")):
        log(f"{problem}: its steps could not be published; checkpoints {done} removed, starting afresh")
        for s in done:
            shutil.rmtree(ckpt_dir / f"checkpoint-{s}")
        done, kept = [], []
    record.write_text("".join(json.dumps(r) + "\n" for r in kept))
    return (done[-1] if done else None), len(kept)


def changed_settings(before: dict[str, Any], now: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, recorded, now) for every resume setting (`resume_settings`) by which two grpo blocks differ, keys
    sorted; `now` is compared as JSON writes it, as the recorded block was."""
    before, now = resume_settings(before), json.loads(json.dumps(resume_settings(now), default=str))
    return [(k, before.get(k), now.get(k)) for k in sorted({*before, *now}) if before.get(k) != now.get(k)]


def _other_run(marker: Path, tag: str, grpo: dict[str, Any], seed: int, identity: dict | None, data: str) -> str | None:
    """What made the checkpoints beside `marker` that differs from this run (for the line of a run that starts
    afresh), or None when they are this run's."""
    if not marker.exists():
        return "a run without a record of its settings"
    old = json.loads(marker.read_text())
    if old.get("hash") == tag:
        return None
    if old.get("identity") != json.loads(json.dumps(identity, default=str)) or old.get("seed") != seed:
        return "another model, scorer, reward or seed"
    if old.get("data", data) != data:
        return "other prompts or answers"
    changed = changed_settings(old.get("grpo", {}), grpo)
    if not changed:
        return "another model or data"
    why = f"other grpo settings ({', '.join(f'{k}: {was} -> {now}' for k, was, now in changed)})"
    if {k for k, _, _ in changed} <= set(RUN_END):
        why += ("; without grpo.schedule_steps the learning-rate schedule spans the run's own steps, so a run of "
                "another length is another run (set schedule_steps to continue runs to more steps)")
    return why


def length_changes(ckpt_dir: Path, grpo: dict[str, Any]) -> list[str]:
    """The run-length settings ("max_steps: 200 -> 400") by which a run's `grpo` differs from what its checkpoints
    in `ckpt_dir` were trained with, where they are all that differs and no fixed horizon (grpo.schedule_steps)
    lets the checkpoints serve: its train job would delete them and train from the base model. [] where the job
    resumes them, where other settings differ too (a change a user means as another run), or where none exist."""
    marker = ckpt_dir / "settings.json"
    if not marker.exists() or not checkpoint_steps(ckpt_dir):
        return []
    old = json.loads(marker.read_text()).get("grpo", {})
    if grpo.get("precision") == "auto":  # the job resolves it for its machine, and records what it resolved
        grpo = {**grpo, "precision": old.get("precision")}
    changed = changed_settings(old, grpo)
    if not changed or not {k for k, _, _ in changed} <= set(RUN_END):
        return []
    return [f"{k}: {was} -> {now}" for k, was, now in changed]


def lost_by_length(run_dirs: dict[Path, dict[str, Any]]) -> str | None:
    """One line refusing a plan whose train jobs would delete trained runs' checkpoints for a change of length
    alone (`length_changes`; `run_dirs`: each planned run's folder and grpo settings), or None. Raising
    grpo.max_steps reads as "train longer", but without grpo.schedule_steps the learning rate spans a run's own
    steps, so a longer run is another run and its train job starts afresh: the finished steps would be lost."""
    lost = {d: change for d, grpo in run_dirs.items() if (change := length_changes(d / "checkpoints", grpo))}
    if not lost:
        return None
    changes = sorted({c for change in lost.values() for c in change})
    shown = ", ".join(str(d) for d in sorted(lost)[:2]) + (f" and {len(lost) - 2} more" if len(lost) > 2 else "")
    return (f"grpo.{'; grpo.'.join(changes)} would delete the checkpoints of {len(lost)} trained run(s) ({shown}) and "
            f"train them again from the base model: without grpo.schedule_steps a run's learning rate spans its own "
            f"steps, so a run of another length is another run. To train them afresh, delete their checkpoints "
            f"first (rm -r <run>/checkpoints); to let later runs continue to more steps, set grpo.schedule_steps "
            f"before training them")


def _read_step_record(record: Path) -> list[dict[str, Any]]:
    """The rows of a step record; a line cut short by a kill while it was written is left out."""
    rows = []
    for line in record.read_text().splitlines() if record.exists() else []:
        with contextlib.suppress(json.JSONDecodeError):
            rows.append(json.loads(line))
    return rows


def _record_problem(rows: list[dict[str, Any]], checkpoint: Path) -> str | None:
    """Why the step record's rows up to `checkpoint` are not the record of the steps it trained (one row per
    step 1..N, and a trainer state at step N), or None."""
    step = int(checkpoint.name.removeprefix("checkpoint-"))
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    if state.get("global_step") != step:
        return f"{checkpoint.name} holds the trainer state of step {state.get('global_step')}"
    logged = sorted(r["step"] for r in rows)
    if logged != list(range(1, step + 1)):
        missing = sorted(set(range(1, step + 1)) - set(logged))
        return (f"the step record ({STEP_RECORD}) holds {len(logged)} rows for the {step} steps of {checkpoint.name}"
                + (f", none for steps {missing[:5]}" if missing else ", some twice"))
    return None


# what a checkpoint holds to resume training (and rng_state*.pth), beside the weights, tokenizer and
# configs the final folder gets
TRAINER_STATE_FILES = ("optimizer.pt", "scheduler.pt", "trainer_state.json")


def publish(checkpoint: Path, final_dir: Path, steps_file: Path, t0: float, log, save_steps: int) -> dict[str, Any]:
    """Write the run's outputs from its last checkpoint: `final_dir` (its weights, adapter, tokenizer and
    configs) and `steps_file` (the step record); return the run's summary (`t0`: when the job began to train).

    A run continued past the step it had ended at keeps that step's checkpoint only where an uninterrupted
    run saves one too (every save_steps, and the last): its evaluation reads the same checkpoints."""
    step = int(checkpoint.name.removeprefix("checkpoint-"))
    if earlier_ends := [s for s in checkpoint_steps(checkpoint.parent) if s < step and s % save_steps]:
        log(f"checkpoints {earlier_ends} removed: earlier ends of the run, off its save_steps")
        for s in earlier_ends:
            shutil.rmtree(checkpoint.parent / f"checkpoint-{s}")
    tmp_final = final_dir.with_name(final_dir.name + ".tmp")
    shutil.rmtree(tmp_final, ignore_errors=True)
    shutil.copytree(checkpoint, tmp_final,
                    ignore=lambda _, names: [n for n in names if n in TRAINER_STATE_FILES or n.startswith("rng_state")])
    steps = pl.DataFrame(_read_step_record(checkpoint.parent / STEP_RECORD), schema=STEP_COLUMNS)
    steps = steps.unique("step", keep="last").sort("step")
    shutil.rmtree(final_dir, ignore_errors=True)
    tmp_final.rename(final_dir)
    write_parquet_atomic(steps, steps_file)
    summary = {
        "steps": step,
        "learnable_pct": learnable_pct(steps),
        "seconds": round(time.time() - t0, 1),
        "checkpoints": checkpoint_steps(checkpoint.parent),
    }
    log(summary)
    return summary
