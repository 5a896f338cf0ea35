"""Probing: K samples per pool example from the base model -> correct count and pass rate.

Also one greedy sample per example (for the base_wrong / base_right split). Work is written in
chunks beside the output; a killed job resumes without redoing finished chunks. A chunk's file name
carries a hash of everything that decides its content: the probe settings, the model's identity
(the fingerprint of its weights and tokenizer, the backend and dtype, the scorer) and the rendered
prompts and reference answers of its rows. So a rebuilt model, a changed prompt or a new question
under an old id is never answered from old work.

Sample j of an example comes from a random stream keyed by (probe seed, example id, j) (see
`hardex.generation.hf`), so an example's samples do not depend on its chunk, its batch or how many
samples were asked for at once.

Adaptive probing, which samples in rounds, is `hardex.adaptive`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

import polars as pl

from hardex.generation.sampling import Sampling
from hardex.io import DamagedFileError, read_parquet, settings_hash, write_parquet_atomic

# bump when the way samples are drawn or recorded changes, so chunks of the old kind are never reused
# (v2: each sample records its token count)
SAMPLER_VERSION = "keyed-v2"

SAMPLES_SCHEMA = {"id": pl.Utf8, "sample": pl.Int64, "completion": pl.Utf8, "correct": pl.Boolean,
                  "tokens": pl.Int64}


def chunk_tag(settings: dict[str, Any], identity: dict[str, Any]) -> str:
    """Hash of what changes full probing's samples besides the rows (the adaptive block does not)."""
    return settings_hash({**{k: v for k, v in settings.items() if k != "adaptive"}, "sampler": SAMPLER_VERSION,
                          "identity": identity})


def rows_tag(rows: list[dict[str, Any]], prompts: list[str]) -> str:
    """Hash of the rows' ids, rendered prompts and reference answers (a new question under an old id
    is new work)."""
    text = "\x1e".join(f"{r['id']}\x1f{p}\x1f{r['answer']}" for r, p in zip(rows, prompts))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def generate_counted(generator, prompts: list[str], n: int, sampling: Sampling, **kwargs):
    """(completions, token counts): n completions per prompt as `generate` gives them, and the new
    tokens each took, its EOS included (what the compute table counts)."""
    ids = generator.generate_ids(prompts, n, sampling, **kwargs)
    texts = [generator.tokenizer.batch_decode(rows, skip_special_tokens=True) for rows in ids]
    return texts, [[len(r) for r in rows] for rows in ids]


def sample_rows(rows, comps_per_row, correct_per_row, tokens_per_row, first: int = 0) -> list[dict[str, Any]]:
    out = []
    for row, comps, correct, tokens in zip(rows, comps_per_row, correct_per_row, tokens_per_row):
        out += [{"id": row["id"], "sample": first + j, "completion": c, "correct": ok, "tokens": t}
                for j, (c, ok, t) in enumerate(zip(comps, correct, tokens))]
    return out


#: the probe table's Parquet metadata key for how it was made (`probe_provenance`)
PROVENANCE_KEY = "hardex.probe"


def probe_provenance(settings: dict[str, Any], identity: dict[str, Any], prior: dict[str, Any]) -> dict[str, Any]:
    """How a probe table was made, stored in its Parquet metadata (`PROVENANCE_KEY`) so a table passed on
    says it: the model's fingerprint, dtype and backend and the scorer (`identity`), K, the sampling
    (temperature, top_p, max_new_tokens), seed, whether probing was adaptive, and the pass-rate prior of
    its posterior columns (`hardex.posterior.with_posterior`)."""
    sampling = Sampling.from_config(settings)
    return {"model_fingerprint": identity.get("model"), "dtype": identity.get("dtype"),
            "backend": identity.get("backend"), "scorer": identity.get("scorer"), "k": int(settings["k"]),
            "temperature": sampling.temperature, "top_p": sampling.top_p, "max_new_tokens": sampling.max_new_tokens,
            "seed": int(settings["seed"]), "adaptive": bool((settings.get("adaptive") or {}).get("enabled")),
            "prior": prior}


def probe_chunk(
    generator,
    task,
    rows: list[dict[str, Any]],
    prompts: list[str],
    k: int,
    sampling: Sampling,
    seed: int,
    with_greedy: bool = True,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Probe one chunk: (per-example counts, per-sample outcomes)."""
    ids = [r["id"] for r in rows]
    samples, tokens = generate_counted(generator, prompts, k, sampling, seed=seed, desc="probe", keys=ids)
    greedy = (
        generator.generate(prompts, 1, Sampling(0.0, 1.0, sampling.max_new_tokens), seed=seed, desc="greedy",
                           keys=ids)
        if with_greedy
        else [[None]] * len(rows)
    )
    counts, correct_all = [], []
    for row, prompt, comps, g, t in zip(rows, prompts, samples, greedy, tokens):
        correct = [task.is_correct(c, row["answer"], prompt) for c in comps]
        correct_all.append(correct)
        counts.append(
            {
                "id": row["id"],
                "k": k,
                "n_correct": sum(correct),
                "pass_rate": sum(correct) / k,
                "greedy_correct": None if g[0] is None else task.is_correct(g[0], row["answer"], prompt),
                "tier": None if row.get("tier") is None else str(row["tier"]),
                "tokens": sum(t),
            }
        )
    outs = sample_rows(rows, samples, correct_all, tokens)
    return pl.DataFrame(counts), pl.DataFrame(outs, schema=SAMPLES_SCHEMA)


def probe_pool(pool: pl.DataFrame, task, render: Callable[[str], str], generator_factory: Callable[[], Any],
               settings: dict[str, Any], work_dir: Path, chunk_size: int = 512, identity: dict[str, Any] | None = None,
               log=print) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Probe every pool example in chunks, resuming from chunks already in `work_dir`.

    `identity` is what else decides the samples (model fingerprint, backend, dtype, scorer); it keys
    the chunks with the settings and the rows. The generator is created only if some chunk is
    missing (loading a model costs seconds). Adaptive probing is `hardex.adaptive.probe_pool_adaptive`.
    """
    identity = identity or {}
    work_dir.mkdir(parents=True, exist_ok=True)
    sampling = Sampling.from_config(settings)
    tag = chunk_tag(settings, identity)
    rows = pool.to_dicts()
    all_prompts = [render(task.prompt(r)) for r in rows]
    generator = None
    counts, samples = [], []
    n_chunks = (len(rows) + chunk_size - 1) // chunk_size
    for c in range(n_chunks):
        part = rows[c * chunk_size : (c + 1) * chunk_size]
        prompts = all_prompts[c * chunk_size : (c + 1) * chunk_size]
        counts_file = work_dir / f"chunk{c:05d}-{tag}-{rows_tag(part, prompts)}.counts.parquet"
        samples_file = counts_file.with_name(counts_file.name.replace(".counts.", ".samples."))
        done = read_chunk(counts_file, samples_file, log=log)
        if done:
            log(f"chunk {c + 1}/{n_chunks}: reused {counts_file.name}")
        else:
            generator = generator or generator_factory()
            cnt, smp = probe_chunk(generator, task, part, prompts, int(settings["k"]), sampling,
                                   seed=int(settings["seed"]))
            write_parquet_atomic(smp, samples_file)  # samples first: counts mark the chunk done
            write_parquet_atomic(cnt, counts_file)
            log(f"chunk {c + 1}/{n_chunks}: probed {len(part)} examples x {settings['k']} samples")
            done = (cnt, smp)
        counts.append(done[0])
        samples.append(done[1])
    return pl.concat(counts), pl.concat(samples)


def read_chunk(*files: Path, log=print) -> tuple[pl.DataFrame, ...] | None:
    """The finished chunk's frames, or None when it must be probed: missing, or damaged (a disk that
    filled up, a copy cut short), in which case it is named and removed."""
    if not all(f.exists() for f in files):
        return None
    try:
        return tuple(read_parquet(f) for f in files)
    except DamagedFileError as e:
        log(f"{e}: probing it again")
        for f in files:
            f.unlink(missing_ok=True)
        return None


def histogram(pass_rates: pl.Series, edges=(0.0, 0.2, 0.8, 1.0)) -> list[tuple[str, int]]:
    """Counts in [0, 0.2), [0.2, 0.8), [0.8, 1] (the last bin closed)."""
    out = []
    for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
        last = i == len(edges) - 2
        mask = (pass_rates >= lo) & ((pass_rates <= hi) if last else (pass_rates < hi))
        out.append((f"[{lo}, {hi}{']' if last else ')'}", int(mask.sum())))
    return out
