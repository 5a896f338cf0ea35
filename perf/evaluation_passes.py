"""An evaluation's samples and greedy answers: two passes (each prefilling every prompt) against one batch that
decodes both (`evaluate_examples(with_greedy=True)`), on a config's first pool, the same rows, seeds and model,
alternating which goes first; it prints the seconds of each and whether their completions are identical.

    python perf/evaluation_passes.py --config docs/difficulty-map/short.yaml \
        --model runs/map-short/results/models/smol --n 100 --threads 1 --repeats 2

The decoding is the config's evaluation.decoding (n_samples, temperature, max_new_tokens); the model's dtype the
config's first model's.
"""

from __future__ import annotations

import argparse
import time

from _common import OUT, config_pool, dump, machine, median


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="its first pool's rows and its evaluation decoding")
    ap.add_argument("--model", required=True, help="a model folder (e.g. a converted results/models/<name>)")
    ap.add_argument("--n", type=int, default=100, help="rows of the pool evaluated")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    import torch

    from hardex.evaluation import evaluate_examples, greedy_outcomes
    from hardex.generation.hf import HFGenerator

    torch.set_num_threads(args.threads)
    cfg, task, rows, prompts = config_pool(args.config, args.model, args.n)
    rendered = dict(zip((task.prompt(r) for r in rows), prompts))
    render = rendered.__getitem__  # the config's rendering, already applied
    decoding = cfg["evaluation"]["decoding"]
    dtype = next(iter(cfg["models"].values()))["dtype"]
    gen = HFGenerator(args.model, device="cpu", dtype="float32" if dtype == "auto" else dtype, progress=False)

    def apart():
        return evaluate_examples(gen, task, rows, render, decoding, 0, 7).join(
            greedy_outcomes(gen, task, rows, render, decoding, 0), on="id", how="left")

    def together():
        return evaluate_examples(gen, task, rows, render, decoding, 0, 7, with_greedy=True)

    seconds, tables = {"two passes": [], "together": []}, {}
    for repeat in range(args.repeats):
        order = [("two passes", apart), ("together", together)]
        for name, fn in order if repeat % 2 == 0 else order[::-1]:
            t0 = time.perf_counter()
            tables[name] = fn()
            seconds[name].append(time.perf_counter() - t0)
            print(f"repeat {repeat + 1}/{args.repeats} {name:10s}: {seconds[name][-1]:.1f} s")
    a, b = tables["two passes"], tables["together"].select(tables["two passes"].columns)
    same = {"samples": float((a["completions"] == b["completions"]).mean()),
            "greedy": float((a["greedy_completion"] == b["greedy_completion"]).mean())}
    ratio = median(seconds["two passes"]) / median(seconds["together"])
    print(f"\nmachine: {machine()}")
    print(f"{len(rows)} prompts x ({decoding['n_samples']} samples + 1 greedy), up to {decoding['max_new_tokens']} "
          f"tokens, {args.threads} thread(s), {gen.model.dtype}")
    print(f"two passes {median(seconds['two passes']):.1f} s, together {median(seconds['together']):.1f} s: "
          f"{ratio:.2f}x (medians of {args.repeats}); completions identical: samples {same['samples']:.0%}, "
          f"greedy {same['greedy']:.0%}")
    dump({"seconds": seconds, "ratio": ratio, "identical": same, "machine": machine()},
         OUT / "evaluation_passes.json")


if __name__ == "__main__":
    main()
