"""Adaptive probing vs full-K probing: samples saved and subset agreement (Jaccard), over seeds.

Two studies, printed separately:

- SIMULATED: a pool of N examples with known per-example pass rates drawn from a named shape;
  sample j of example i is correct iff its keyed uniform U(seed, id, j) < p_i, so adaptive probing
  sees exactly the first samples of full probing (as the real backend guarantees). Fast and exact:
  it isolates the stopping rule.
- REAL: the built tiny Qwen3 on the default config's synthetic pools (arith, swaps), through the
  real pipeline code (hardex.probing.probe_pool and hardex.adaptive.probe_pool_adaptive), so generation
  effects (batch composition) are included; it also reports how many of the adaptive samples
  equal full probing's sample with the same index.

For every strategy (hard, easy, medium, random, base_wrong, base_right) it reports the Jaccard
index of the subset chosen from the adaptive table and from the full-K table (same selection
seed), and the share of the N x K samples adaptive probing did not take. Rows: the mean over
seeds, "(min)" the worst seed, and (simulated) "(full~full)" the agreement of full-K probing with
full-K probing under another sampling seed -- how reproducible the subsets are in the first place.

    python perf/adaptive_probing.py --study simulated --seeds 0 1 2 3 4
    python perf/adaptive_probing.py --study real --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import OUT, built_model, dump, machine, pool  # noqa: E402

STRATEGIES = ["hard", "easy", "medium", "random", "base_wrong", "base_right"]

# pass-rate shapes of a pool (fraction, beta a, beta b) mixtures
SHAPES = {
    "uniform": [(1.0, 1.0, 1.0)],
    "u-shaped": [(1.0, 0.4, 0.4)],
    "gsm8k-like": [(0.6, 6.0, 1.0), (0.25, 1.0, 1.0), (0.15, 1.0, 5.0)],  # a strong model: mostly easy
    "hard-skewed": [(0.7, 0.6, 3.0), (0.3, 1.0, 1.0)],
}


def jaccard(a, b) -> float:
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 1.0


def simulated_pool(shape: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, 7])
    parts = []
    for frac, a, b in SHAPES[shape]:
        parts.append(rng.beta(a, b, size=int(round(frac * n))))
    p = np.concatenate(parts)[:n]
    if len(p) < n:
        p = np.concatenate([p, rng.uniform(size=n - len(p))])
    return rng.permutation(p)


def sim_outcomes(ids, p, k, seed) -> np.ndarray:
    """Correctness of samples 0..k-1 of each example: keyed uniform < pass rate."""
    from hardex.generation.token_sampler import stream_key, stream_uniforms

    keys = [stream_key(seed, i, j) for i in ids for j in range(k)]
    u = stream_uniforms(keys, 1)[:, 0].reshape(len(ids), k)
    return u < p[:, None]


def tables(ids, taken, correct, greedy):
    import polars as pl

    return pl.DataFrame({"id": ids, "k": taken, "n_correct": correct, "pass_rate": correct / np.maximum(taken, 1),
                         "greedy_correct": greedy, "tier": [None] * len(ids)},
                        schema={"id": pl.Utf8, "k": pl.Int64, "n_correct": pl.Int64, "pass_rate": pl.Float64,
                                "greedy_correct": pl.Boolean, "tier": pl.Utf8})


def agreement(full, adaptive, budget, seed) -> dict[str, float]:
    from hardex.selection import select

    return {s: jaccard(select(full, s, budget, seed)["id"], select(adaptive, s, budget, seed)["id"])
            for s in STRATEGIES}


def oracle_saved(out: np.ndarray, k: int, budget: float, strategies) -> float:
    """Share of samples a clairvoyant zero-error rule saves: it knows every example's full-K count
    and so the exact boundary counts, but stops an example only once its own first r samples prove
    its side of every boundary (r successes above it, or too few left to reach it). No rule that
    must be exact can save more; ties at a boundary force K samples."""
    from hardex.adaptive import boundary_indices

    n = len(out)
    final = np.sort(out.sum(1))
    cuts = [final[j] for j in boundary_indices(n, budget, strategies)]
    cum = np.cumsum(out, axis=1)
    need = np.full(n, k)
    for r in range(k, 0, -1):
        a, hi = cum[:, r - 1], cum[:, r - 1] + (k - r)
        ok = np.ones(n, dtype=bool)
        for c in cuts:
            ok &= (a > c) | (hi < c)
        need[ok] = r
    return 1 - need.sum() / (n * k)


def run_simulated(args, cfg):
    from hardex.adaptive import adaptive_rounds

    results = []
    for shape in args.shapes:
        for seed in args.seeds:
            p = simulated_pool(shape, args.n, seed)
            ids = [f"ex{i}" for i in range(args.n)]
            out = sim_outcomes(ids, p, args.k, seed)
            greedy = p > 0.5
            full = tables(ids, np.full(args.n, args.k), out.sum(1), greedy)
            taken, correct, hist = adaptive_rounds(
                args.n, args.k, cfg, [args.budget],
                lambda idx, first, take: out[idx, first : first + take], log=lambda *a: None)
            ad = tables(ids, taken, correct, greedy)
            # context: how well full-K probing agrees with itself under another sampling seed
            other = tables(ids, np.full(args.n, args.k), sim_outcomes(ids, p, args.k, seed + 1000).sum(1), greedy)
            results.append({"shape": shape, "seed": seed, "saved": 1 - taken.sum() / (args.n * args.k),
                            "rounds": len(hist), "jaccard": agreement(full, ad, args.budget, seed),
                            "oracle_saved": oracle_saved(out, args.k, args.budget, args.strategies),
                            "full_vs_full_other_seed": agreement(full, other, args.budget, seed)})
    return results


def run_real(args, cfg):
    import polars as pl

    from hardex.adaptive import probe_pool_adaptive
    from hardex.generation import load_generator
    from hardex.probing import probe_pool

    path = built_model(args.model)
    results = []
    gens = {}

    def factory():
        if "g" not in gens:
            gens["g"] = load_generator("transformers", path, dtype="float32", token_budget=args.token_budget,
                                       max_batch_prompts=512, progress=False)
        return gens["g"]

    for family in args.families:
        task, rows, _ = pool(family, args.n_real)
        df = pl.DataFrame(rows)
        for seed in args.seeds:
            base = {"k": args.k, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": args.max_new_tokens, "seed": seed}
            with tempfile.TemporaryDirectory() as tmp:
                g = factory()
                t0, tok0 = time.perf_counter(), g.tokens_generated
                full, full_s = probe_pool(df, task, lambda x: x + "\n", factory, base, Path(tmp) / "full",
                                          log=lambda *a: None)
                t_full, tok_full = time.perf_counter() - t0, g.tokens_generated - tok0
                t0, tok0 = time.perf_counter(), g.tokens_generated
                ad, ad_s = probe_pool_adaptive(df, task, lambda x: x + "\n", factory,
                                               {**base, "adaptive": {**cfg, "enabled": True, "budget": args.budget}},
                                               Path(tmp) / "adaptive", log=lambda *a: None)
                t_ad, tok_ad = time.perf_counter() - t0, g.tokens_generated - tok0
            pos = {i: j for j, i in enumerate(df["id"].to_list())}
            outcomes = np.zeros((df.height, args.k), dtype=bool)
            for r in full_s.iter_rows(named=True):
                outcomes[pos[r["id"]], r["sample"]] = r["correct"]
            joined = ad_s.join(full_s, on=["id", "sample"], suffix="_full")
            same_text = float((joined["completion"] == joined["completion_full"]).mean())
            same_outcome = float((joined["correct"] == joined["correct_full"]).mean())
            # tokens: greedy pass is part of both; report sampled-token savings too
            results.append({
                "family": family, "seed": seed, "n": df.height,
                "saved": 1 - ad["k"].sum() / (df.height * args.k),
                "oracle_saved": oracle_saved(outcomes, args.k, args.budget, args.strategies),
                "tokens_full": tok_full, "tokens_adaptive": tok_ad, "seconds_full": t_full, "seconds_adaptive": t_ad,
                "same_completion": same_text, "same_outcome": same_outcome,
                "full_pass_rate_hist": np.bincount(full["n_correct"].to_numpy(), minlength=args.k + 1).tolist(),
                "jaccard": agreement(full, ad, args.budget, seed),
            })
            r = results[-1]
            print(f"  real {family} seed {seed}: saved {r['saved']:.1%}, same completion {same_text:.4f}, "
                  f"jaccard " + " ".join(f"{s}={v:.3f}" for s, v in r["jaccard"].items()), flush=True)
    return results


def summarize(label, results, group):
    print(f"\n== {label} ==")
    head = f"{group:12s} {'seeds':>5s} {'saved':>7s} " + " ".join(f"{s:>10s}" for s in STRATEGIES)
    if all("oracle_saved" in r for r in results):
        head += "   oracle-saved"
    print(head)
    keys = sorted({r[group] for r in results}, key=lambda x: str(x))
    for g in keys + ["ALL"]:
        rs = [r for r in results if g == "ALL" or r[group] == g]
        saved = np.mean([r["saved"] for r in rs])
        js = {s: np.mean([r["jaccard"][s] for r in rs]) for s in STRATEGIES}
        mins = {s: np.min([r["jaccard"][s] for r in rs]) for s in STRATEGIES}
        line = f"{str(g):12s} {len(rs):5d} {saved:7.1%} " + " ".join(f"{js[s]:10.3f}" for s in STRATEGIES)
        if all("oracle_saved" in r for r in rs):
            line += f"   {np.mean([r['oracle_saved'] for r in rs]):12.1%}"
        print(line)
        print(f"{'  (min)':12s} {'':5s} {'':7s} " + " ".join(f"{mins[s]:10.3f}" for s in STRATEGIES))
        if all("full_vs_full_other_seed" in r for r in rs):
            ref = {s: np.mean([r["full_vs_full_other_seed"][s] for r in rs]) for s in STRATEGIES}
            print(f"{'  (full~full)':12s} {'':5s} {'':7s} " + " ".join(f"{ref[s]:10.3f}" for s in STRATEGIES))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--study", choices=["simulated", "real", "both"], default="both")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--budget", type=float, default=0.1)
    ap.add_argument("--n", type=int, default=2000, help="simulated pool size")
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--method", default="empirical_bayes", choices=["empirical_bayes", "wilson", "clopper_pearson"])
    ap.add_argument("--confidence", type=float, default=0.99)
    ap.add_argument("--min-samples", type=int, default=2)
    ap.add_argument("--round-size", type=int, default=1)
    ap.add_argument("--strategies", nargs="+", default=["hard", "easy"], help="boundaries adaptive probing settles")
    ap.add_argument("--model", default="build")
    ap.add_argument("--families", nargs="+", default=["arith", "swaps"])
    ap.add_argument("--n-real", type=int, default=300, help="real pool size per family (default pool: 300)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--token-budget", type=int, default=262144)
    ap.add_argument("--json", default=str(OUT / "adaptive_probing.json"))
    args = ap.parse_args(argv)
    cfg = {"enabled": True, "min_samples": args.min_samples, "round_size": args.round_size, "method": args.method,
           "confidence": args.confidence, "budget": args.budget, "strategies": args.strategies}
    print(f"adaptive settings: {cfg}; K={args.k}, budget {args.budget}; machine {machine()}")
    out = {"settings": cfg, "k": args.k, "budget": args.budget, "seeds": args.seeds}
    if args.study in ("simulated", "both"):
        out["simulated"] = run_simulated(args, cfg)
        summarize(f"SIMULATED (N={args.n}, K={args.k}, known pass rates; mean over seeds)", out["simulated"], "shape")
    if args.study in ("real", "both"):
        out["real"] = run_real(args, cfg)
        summarize(f"REAL (built tiny Qwen3, default pools, K={args.k}; mean over seeds)", out["real"], "family")
    if args.json:
        dump(out, Path(args.json))
    return out


if __name__ == "__main__":
    main()
