"""Evaluation: the base model and every checkpoint of a run on each benchmark of its task.

Per-example outcomes are kept (one row per checkpoint step x example: samples, correct count,
tier, completions), so accuracy, pass@k and accuracy per difficulty tier (`hardex.metrics`) all come
from the same files. Step 0 is the base model. With `evaluation.greedy` each row also holds one greedy
completion (`greedy_outcomes`: greedy_correct, greedy_completion), beside the sampled ones.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

import polars as pl

from hardex.generation.sampling import Sampling
from hardex.io import checkpoint_steps, read_parquet
from hardex.metrics import summarize
from hardex.tasks import get_task

OUTCOME_SCHEMA = {
    "seed": pl.Int64,
    "step": pl.Int64,
    "id": pl.Utf8,
    "tier": pl.Utf8,
    "n": pl.Int64,
    "n_correct": pl.Int64,
    "completions": pl.List(pl.Utf8),
}


def evaluation_seed(eval_seed: int, run_seed: int) -> int:
    """The sampling seed of run seed `run_seed`'s evaluations: its checkpoints and the base model it is
    compared with. Each run seed draws its own evaluation noise (so intervals over seeds cover it), and
    a run shares it with its base (common random numbers: the gain is not blurred by it)."""
    return int(hashlib.sha256(f"{int(eval_seed)}:{int(run_seed)}".encode()).hexdigest()[:8], 16)


#: what a run's final/ folder holds instead of its weights when it came from an archive packed without them
#: (hardex.archive): its checkpoints are not there either, so the run cannot be evaluated again
NO_ADAPTERS = "ARCHIVED_WITHOUT_ADAPTERS"


def run_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every saved checkpoint of a training run, in step order."""
    ckpt = Path(run_dir) / "checkpoints"
    steps = checkpoint_steps(ckpt)
    if not steps and (Path(run_dir) / "final" / NO_ADAPTERS).exists():
        raise FileNotFoundError(f"{run_dir} was unpacked from an archive without its adapters: retrain it "
                                f"(snakemake -R {run_dir}/steps.parquet) or unpack an archive made with --adapters")
    return [(s, ckpt / f"checkpoint-{s}") for s in steps]


def evaluate_examples(
    generator,
    task,
    rows: list[dict[str, Any]],
    render: Callable[[str], str],
    decoding: dict[str, Any],
    step: int,
    seed: int,
    run_seed: int = 0,
    with_greedy: bool = False,
) -> pl.DataFrame:
    """Outcomes of the generator's current weights on one benchmark, for run seed `run_seed`
    (sampled with `seed`: see `evaluation_seed`). With `with_greedy`, also `greedy_outcomes`' columns, the greedy
    completions decoded beside the samples (one prefill per prompt for both, where the backend batches them)."""
    prompts = [render(task.prompt(r)) for r in rows]
    n = int(decoding["n_samples"])
    sampling, keys = Sampling.from_config(decoding), [r["id"] for r in rows]
    if with_greedy:
        outs, greedy = generator.generate_with_greedy(prompts, n, sampling, seed=seed,
                                                      desc=f"eval step {step} with greedy", keys=keys)
    else:
        outs = generator.generate(prompts, n, sampling, seed=seed, desc=f"eval step {step}", keys=keys)
    sampled = pl.DataFrame(
        [
            {
                "seed": run_seed,
                "step": step,
                "id": r["id"],
                "tier": None if r.get("tier") is None else str(r["tier"]),
                "n": n,
                "n_correct": sum(task.is_correct(c, r["answer"], p) for c in comps),
                "completions": comps,
            }
            for r, p, comps in zip(rows, prompts, outs)
        ],
        schema=OUTCOME_SCHEMA,
    )
    return sampled.join(_greedy_frame(task, rows, prompts, greedy), on="id", how="left") if with_greedy else sampled


GREEDY_COLUMNS = ("greedy_correct", "greedy_completion")


def greedy_outcomes(generator, task, rows: list[dict[str, Any]], render: Callable[[str], str],
                    decoding: dict[str, Any], step: int) -> pl.DataFrame:
    """One greedy completion per example (`evaluation.greedy`): id, greedy_correct (0/1), greedy_completion.
    Greedy decoding has no randomness, so one call serves every run seed of a checkpoint."""
    prompts = [render(task.prompt(r)) for r in rows]
    greedy = Sampling(temperature=0.0, max_new_tokens=int(decoding["max_new_tokens"]))
    outs = generator.generate(prompts, 1, greedy, seed=0, desc=f"eval step {step} greedy", keys=[r["id"] for r in rows])
    return _greedy_frame(task, rows, prompts, [c[0] for c in outs])


def _greedy_frame(task, rows: list[dict[str, Any]], prompts: list[str], completions: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {"id": [r["id"] for r in rows],
         "greedy_correct": [int(task.is_correct(c, r["answer"], p)) for r, p, c in zip(rows, prompts, completions)],
         "greedy_completion": completions},
        schema={"id": pl.Utf8, "greedy_correct": pl.Int64, "greedy_completion": pl.Utf8},
    )


def evaluate_checkpoints(generator, checkpoints: list[tuple[int, Path | None]], seeds: list[int],
                         benchmarks: list[dict[str, Any]], paths: list[str], scoring: str,
                         render_for: Callable[[Any], Callable[[str], str]], eval_seed: int,
                         log: Callable[[str], None] = print) -> pl.DataFrame:
    """Every benchmark's outcomes at every checkpoint (step, folder; folder None: the base model) for each run seed:
    an evaluate job's table. `render_for(task)` renders a task's prompts for the model. With a benchmark's
    `greedy`, its greedy completions are decoded once per checkpoint, beside the first seed's samples, and every
    seed's rows take them."""
    # each benchmark's rows, task and renderer made once, not at every checkpoint and seed
    tasks = [get_task(bench["family"], scoring, bench.get("prompt")) for bench in benchmarks]
    loaded = [(bench, read_parquet(path).to_dicts(), task, render_for(task))
              for bench, path, task in zip(benchmarks, paths, tasks)]
    frames, greedy = [], {}
    for step, folder in checkpoints:
        generator.use_checkpoint(folder)
        for run_seed in seeds:
            sampling_seed = evaluation_seed(eval_seed, run_seed)
            for bench, rows, task, render in loaded:
                first = bool(bench["decoding"].get("greedy")) and (step, bench["ref"]) not in greedy
                out = evaluate_examples(generator, task, rows, render, bench["decoding"], step,
                                        sampling_seed, run_seed, with_greedy=first)
                if first:
                    greedy[step, bench["ref"]] = out.select("id", *GREEDY_COLUMNS)
                elif bench["decoding"].get("greedy"):
                    out = out.join(greedy[step, bench["ref"]], on="id", how="left")
                frames.append(out.with_columns(pl.lit(bench["ref"]).alias("benchmark")))
                summary = summarize(out, bench["decoding"]["pass_k"]).row(0, named=True)
                log(f"seed {run_seed} step {step:5d}  {bench['ref']:24s} " + "  ".join(
                    f"{k} {v:.3f}" for k, v in summary.items() if k not in ("step", "n_examples") and v is not None))
    return pl.concat(frames)
