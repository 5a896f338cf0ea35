"""Probe throughput: paper 1's way (plain `generate`) vs hardex's backend, same prompts, same model.

Baseline = what paper 1's released code did: `model.generate`, 16 prompts per batch in dataset
order, `num_return_sequences = K`, sampling. Backend = `hardex.generation.hf.HFGenerator`
(length-sorted batches under a token budget, one prefill per prompt, finished rows dropped, a
lean decode loop). Both count generated tokens the same way: the new tokens of every sample up
to and including its EOS (padding after EOS is not counted). Each repeat runs both methods
(alternating which goes first); the summary gives the median tokens/s of each and the ratio of
the medians.

CPU, the built tiny model (builds it once into perf/out/ unless results/models/tiny exists):
    python perf/probe_throughput.py --n-prompts 128 --k 8 --max-new-tokens 64 --repeats 3
With --vllm, hardex's vLLM backend runs too, on the same model, prompts and dtype (its engine started
once, before the repeats), in an environment that has vllm (README: vLLM):
    python perf/probe_throughput.py --vllm --model results/models/tiny --n-prompts 64 --k 5 --repeats 2
A real model, prompts of a config's pool rendered as its jobs render them (here SmolLM2-135M-Instruct
with its chat template; the folder is what `snakemake --configfile experiments/real_model_cpu.yaml`
converts), with the machine's float32 matmul bound measured in the same run:
    python perf/probe_throughput.py --model results/models/smol --config experiments/real_model_cpu.yaml \
        --vllm --dtype float32 --n-prompts 64 --k 8 --max-new-tokens 48 --temperature 0.7 --repeats 2
GPU, a random-init Qwen3 of ~0.6B parameters (hidden 1024, 28 layers, vocab 151936), EOS ignored:
    python perf/probe_throughput.py --random-qwen3 1024,28 --device cuda --dtype bfloat16 \\
        --n-prompts 512 --k 8 --max-new-tokens 256 --repeats 2
HFGenerator's decode modes side by side (--decode: the first is "hardex", the others are timed beside it and
their completions compared with its, same seeds), e.g. a GPU's CUDA-graph step against the step it replays and
the dynamic one:
    python perf/probe_throughput.py --model M --device cuda --dtype bfloat16 --decode graph,static,dynamic
A mode ending in "-sdpa" decodes with PyTorch's SDPA kernel at one query token instead of hardex's attention
there (hardex.generation.decode_attention), e.g. on a CPU: --decode dynamic,dynamic-sdpa
On a CPU the run ends with the bound of its own matmuls at the shapes it ran (_common.run_matmul_bound) and each
mode's share of it; the CPU's default (the lean step) beside transformers' forward, SmolLM2 at one thread:
    python perf/probe_throughput.py --model results/models/smol --config experiments/real_model_cpu.yaml \
        --dtype bfloat16 --n-prompts 16 --k 8 --max-new-tokens 48 --temperature 0.7 --threads 1 --decode auto,dynamic
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import OUT, built_model, config_pool, dump, machine, matmul_bound, median, pool, run_matmul_bound  # noqa: E402


def synthetic_tokenizer(vocab_size: int):
    """A word-level tokenizer over `vocab_size` tokens `w0 w1 ...` (no hub access needed)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<|endoftext|>": 0, "<|pad|>": 1, **{f"w{i}": i for i in range(2, vocab_size)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|pad|>")


def random_qwen3(hidden: int, layers: int, vocab: int, dtype, device):
    """A random-init Qwen3 shaped like the Qwen3 family (head_dim 128, GQA 2:1, MLP 3x hidden)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    heads = max(1, hidden // 64)
    cfg = Qwen3Config(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), head_dim=128,
        max_position_embeddings=4096, tie_word_embeddings=True, bos_token_id=0, eos_token_id=None,
        pad_token_id=1,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3ForCausalLM(cfg)
    model = model.to(dtype).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 1
    return model


def count_new_tokens(new, eos_ids: list[int], pad_id: int, ignore_eos: bool) -> int:
    """Tokens of each row up to and including its first EOS (all of them when EOS is ignored)."""
    import torch

    if ignore_eos:
        return int(new.numel())
    is_eos = torch.isin(new, torch.tensor(eos_ids, device=new.device))
    width = new.shape[1]
    first = torch.where(is_eos.any(1), is_eos.float().argmax(1) + 1, torch.full_like(new[:, 0], width))
    # rows cut at max_new_tokens without EOS: every token counts (no padding inside a row)
    return int(first.sum())


def run_baseline(model, tok, prompts, k, args, eos_ids, sync):
    """Paper 1's released code: plain generate, 16 prompts per batch, dataset order."""
    import torch

    tokens = 0
    for s in range(0, len(prompts), args.baseline_batch):
        chunk = prompts[s : s + args.baseline_batch]
        enc = tok(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
        kw = dict(do_sample=True, temperature=args.temperature, top_p=args.top_p, top_k=0,
                  num_return_sequences=k, max_new_tokens=args.max_new_tokens, pad_token_id=tok.pad_token_id)
        if not args.ignore_eos:
            kw["eos_token_id"] = eos_ids
        torch.manual_seed(s)
        with torch.inference_mode():
            gen = model.generate(**enc, **kw)
        tokens += count_new_tokens(gen[:, enc["input_ids"].shape[1] :], eos_ids, tok.pad_token_id, args.ignore_eos)
    sync()
    return tokens


def completions(gen, prompts, k, sampling):
    """gen.generate, where a "-sdpa" decode mode asked for it with PyTorch's SDPA kernel at one query token."""
    import contextlib

    from hardex.generation.decode_attention import sdpa_kept

    with sdpa_kept() if getattr(gen, "sdpa_at_one_token", False) else contextlib.nullcontext():
        return gen.generate(prompts, k, sampling, seed=0, desc="hardex")


def run_backend(gen, prompts, k, args, sync):
    from hardex.generation import Sampling

    before = gen.tokens_generated
    completions(gen, prompts, k, Sampling(args.temperature, args.top_p, args.max_new_tokens))
    sync()
    return gen.tokens_generated - before


def profile_run(gen, prompts, args, sync, bound_tps: float) -> dict:
    """One hardex run under torch.profiler: the operators that take its time, and the tokens/s its matmuls
    alone (at the shapes this workload runs, rows dropping as they finish) would allow."""
    import torch

    with torch.profiler.profile() as prof:
        t0 = time.perf_counter()
        n_tok = run_backend(gen, prompts, args.k, args, sync)
        wall = time.perf_counter() - t0
    ops = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    seconds = {e.key: e.self_cpu_time_total / 1e6 for e in ops}  # sorted, largest first
    matmul = seconds.get("aten::mm", 0.0) + seconds.get("aten::addmm", 0.0)
    print(f"\nprofile   one hardex run: {n_tok} tokens in {wall:.2f} s ({n_tok / wall:.0f} tokens/s; the profiler "
          f"slows it)")
    for e in ops[:10]:
        print(f"  {e.key:48s} {e.self_cpu_time_total / 1e6:7.3f} s  {e.self_cpu_time_total / 1e6 / wall:5.1%}  "
              f"{e.count:7d} calls")
    print(f"matmuls   {matmul:.2f} s ({matmul / wall:.0%} of the run): alone they would allow {n_tok / matmul:.0f} "
          f"tokens/s, {n_tok / matmul / bound_tps:.0%} of the bound")
    return {"tokens": n_tok, "seconds": wall, "matmul_seconds": matmul,
            "operators": dict(list(seconds.items())[:20])}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="build", help="a from_pretrained path, or 'build' (the built tiny model)")
    ap.add_argument("--random-qwen3", metavar="HIDDEN,LAYERS[,VOCAB]",
                    help="random-init Qwen3 of this size with a synthetic tokenizer (implies --ignore-eos)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    ap.add_argument("--n-prompts", type=int, default=128)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--family", default="arith", choices=["arith", "swaps"], help="prompts: the default pool")
    ap.add_argument("--config", help="prompts: this config's first pool, rendered for --model as its jobs render it")
    ap.add_argument("--prompt-len", default="64,192", help="token range of random prompts (--random-qwen3)")
    ap.add_argument("--ignore-eos", action="store_true", help="decode max_new_tokens for every sample")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--baseline-batch", type=int, default=16)
    ap.add_argument("--token-budget", type=int, default=262144, help="backend: padded tokens per batch")
    ap.add_argument("--max-batch-prompts", type=int, default=512)
    ap.add_argument("--drop-fraction", type=float, default=0.25)
    ap.add_argument("--decode", default="auto",
                    help="HFGenerator decode modes, comma-separated: the first is 'hardex', the others are timed "
                         "and compared with it (auto, graph, static, dynamic, lean)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    ap.add_argument("--vllm", action="store_true", help="also hardex's vLLM backend (needs a --model path)")
    ap.add_argument("--json", default=str(OUT / "probe_throughput.json"))
    ap.add_argument("--profile", action="store_true",
                    help="then profile one hardex run (torch.profiler): where its time goes, and the rate its "
                         "matmuls alone would allow")
    args = ap.parse_args(argv)
    if args.vllm and args.random_qwen3:
        ap.error("--vllm needs a saved model (--model), not --random-qwen3")

    import torch

    from hardex.devices import pick_device
    from hardex.generation.hf import HFGenerator, pick_dtype

    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    dtype = pick_dtype(args.dtype, device)
    if args.random_qwen3:
        parts = [int(x) for x in args.random_qwen3.split(",")]
        hidden, layers, vocab = (parts + [151936])[:3]
        args.ignore_eos = True
        tok = synthetic_tokenizer(vocab)
        model = random_qwen3(hidden, layers, vocab, dtype, device)
        lo, hi = (int(x) for x in args.prompt_len.split(","))
        rng = random.Random(0)
        prompts = [" ".join(f"w{rng.randrange(2, vocab)}" for _ in range(rng.randint(lo, hi)))
                   for _ in range(args.n_prompts)]
        model_desc = f"random-init Qwen3 hidden {hidden}, {layers} layers, vocab {vocab}"
        path = "random-qwen3"
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = built_model(args.model)
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="sdpa").to(device).eval()
        if args.config:
            _, _, _, prompts = config_pool(args.config, path, args.n_prompts)
        else:
            _, _, prompts = pool(args.family, args.n_prompts)
        model_desc = f"{path}"
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    n_params = sum(p.numel() for p in model.parameters())
    # the bound of the precision used, and float32's beside it (on a CPU with hardware bfloat16 they differ ~4x)
    bound = matmul_bound(n_params, dtype=dtype)
    bound_f32 = bound if dtype == torch.float32 else matmul_bound(n_params)
    dtype_name = str(dtype).replace("torch.", "")
    for name, b in {dtype_name: bound, "float32": bound_f32}.items():  # one line when they are the same
        print(f"{name} matmul: {b['matmul_gflops']:.0f} GFLOP/s, bounding generation near "
              f"{b['bound_tokens_per_s']:.0f} tokens/s for {n_params / 1e6:.1f}M parameters", flush=True)
    decodes = args.decode.split(",")

    def generator(decode: str):
        gen = HFGenerator(path, device=device, model=model, tokenizer=tok, token_budget=args.token_budget,
                          max_batch_prompts=args.max_batch_prompts, progress=False, drop_fraction=args.drop_fraction,
                          ignore_eos=args.ignore_eos, decode=decode.removesuffix("-sdpa"))
        gen.sdpa_at_one_token = decode.endswith("-sdpa")
        return gen

    gen = generator(decodes[0])
    eos_ids = gen.eos_ids
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)

    backends = {"hardex": gen, **{f"hardex-{d}": generator(d) for d in decodes[1:]}}
    if args.vllm:
        from hardex.generation.vllm_backend import VLLMGenerator

        t0 = time.perf_counter()
        backends["vllm"] = VLLMGenerator(path, dtype=str(dtype).replace("torch.", ""), progress=False)
        run_backend(backends["vllm"], prompts[:2], 2, argparse.Namespace(**{**vars(args), "max_new_tokens": 8}), sync)
        print(f"vLLM engine started in {time.perf_counter() - t0:.0f} s", flush=True)

    # warm-up (allocator, kernels, lazy inits): a few prompts through each
    run_baseline(model, tok, prompts[:2], 2, argparse.Namespace(**{**vars(args), "max_new_tokens": 8}), eos_ids, sync)
    for b in backends.values():
        run_backend(b, prompts[:2], 2, argparse.Namespace(**{**vars(args), "max_new_tokens": 8}), sync)

    runs = {"baseline": [], **{name: [] for name in backends}}
    for r in range(args.repeats):
        order = ["baseline", *backends] if r % 2 == 0 else [*reversed(backends), "baseline"]
        for name in order:
            t0 = time.perf_counter()
            if name == "baseline":
                n_tok = run_baseline(model, tok, prompts, args.k, args, eos_ids, sync)
            else:
                n_tok = run_backend(backends[name], prompts, args.k, args, sync)
            dt = time.perf_counter() - t0
            runs[name].append({"seconds": dt, "tokens": n_tok, "tokens_per_s": n_tok / dt})
            print(f"repeat {r + 1}/{args.repeats} {name:8s}: {n_tok:8d} tokens in {dt:8.2f} s = "
                  f"{n_tok / dt:10.1f} tokens/s", flush=True)

    base_tps = median([x["tokens_per_s"] for x in runs["baseline"]])
    ours_tps = median([x["tokens_per_s"] for x in runs["hardex"]])
    info = machine()
    if str(device).startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name()
    summary = {
        "model": model_desc, "parameters": n_params, "device": device, "dtype": str(dtype).replace("torch.", ""),
        "n_prompts": len(prompts), "k": args.k, "max_new_tokens": args.max_new_tokens,
        "temperature": args.temperature, "ignore_eos": args.ignore_eos, "repeats": args.repeats,
        "baseline_batch": args.baseline_batch, "token_budget": args.token_budget,
        "effective_token_budget": gen.effective_token_budget(),
        "torch_threads": torch.get_num_threads(), "machine": info, "runs": runs, **bound,
        "float32_matmul_gflops": bound_f32["matmul_gflops"],
        "float32_bound_tokens_per_s": bound_f32["bound_tokens_per_s"],
        "baseline_tokens_per_s": base_tps, "hardex_tokens_per_s": ours_tps, "ratio": ours_tps / base_tps,
    }
    print()
    print("== probe throughput ==")
    print(f"model     {model_desc} ({n_params / 1e6:.1f}M parameters), {device}, {summary['dtype']}")
    print(f"workload  {len(prompts)} prompts x K={args.k} samples, max_new_tokens {args.max_new_tokens}, "
          f"temperature {args.temperature}{', EOS ignored' if args.ignore_eos else ''}")
    print(f"machine   {info}")
    print(f"baseline  (generate, {args.baseline_batch} prompts/batch, dataset order): "
          f"median {base_tps:10.1f} tokens/s over {args.repeats} repeats")
    print(f"hardex    (HFGenerator, token budget {args.token_budget}, effective {gen.effective_token_budget()}): "
          f"median {ours_tps:10.1f} tokens/s over {args.repeats} repeats")
    print(f"ratio     {ours_tps / base_tps:.2f}x")
    print(f"bound     {bound['bound_tokens_per_s']:10.1f} tokens/s ({dtype_name} matmul "
          f"{bound['matmul_gflops']:.0f} GFLOP/s): "
          f"hardex at {ours_tps / bound['bound_tokens_per_s']:.0%} of it (target 60 %)")
    if str(device) == "cpu":  # the run's own matmuls at the shapes it ran, timed alone (_common.run_matmul_bound)
        gen.shapes = []
        n_tok = run_backend(gen, prompts, args.k, args, sync)
        own = run_matmul_bound(model, gen.shapes)
        gen.shapes = None
        own["bound_tokens_per_s"] = n_tok / own["seconds"]
        summary["own_matmul_bound"] = own
        print(f"own bound {own['bound_tokens_per_s']:10.1f} tokens/s: its own matmuls at the shapes it ran "
              f"({own['passes']} forward passes, {own['decode_steps']} of them decode steps), alone: "
              f"{own['decode_linear_s']:.2f} s of decode-step linear layers, {own['decode_attention_s']:.2f} s of "
              f"attention products, {own['prefill_linear_s']:.2f} s of prefill linear layers, for {n_tok} tokens")
        for name in runs:
            if name != "baseline" and name != "vllm":
                tps = median([x["tokens_per_s"] for x in runs[name]])
                print(f"          {name}: {tps:.1f} tokens/s, {tps / own['bound_tokens_per_s']:.0%} of that bound")
    for d in decodes[1:]:  # the other decode modes: speed, and how many completions they share with the first
        from hardex.generation import Sampling

        tps = median([x["tokens_per_s"] for x in runs[f"hardex-{d}"]])
        sampling = Sampling(args.temperature, args.top_p, args.max_new_tokens)
        first, other = (completions(b, prompts, args.k, sampling) for b in (gen, backends[f"hardex-{d}"]))
        pairs = [(a, b) for xs, ys in zip(first, other) for a, b in zip(xs, ys)]
        same = sum(a == b for a, b in pairs) / len(pairs)
        summary.setdefault("decode", {})[d] = {"tokens_per_s": tps, "identical_completions": same}
        print(f"decode    {d}: median {tps:10.1f} tokens/s; decode {decodes[0]} is {ours_tps / tps:.2f}x as fast, "
              f"{same:.1%} of {len(pairs)} completions identical to its")
    if args.vllm:
        vllm_tps = median([x["tokens_per_s"] for x in runs["vllm"]])
        summary.update(vllm_tokens_per_s=vllm_tps, vllm_ratio=vllm_tps / base_tps)
        print(f"vllm      (VLLMGenerator, {summary['dtype']}): median {vllm_tps:10.1f} tokens/s over "
              f"{args.repeats} repeats = {vllm_tps / base_tps:.2f}x the baseline, {vllm_tps / ours_tps:.2f}x hardex's")
    if args.profile:
        summary["profile"] = profile_run(gen, prompts, args, sync, bound["bound_tokens_per_s"])
    if args.json:
        dump(summary, Path(args.json))
    return summary


if __name__ == "__main__":
    main()
