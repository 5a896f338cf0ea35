"""Memory of a prefill with frozen weights (as after a LoRA checkpoint loads), at SmolLM2-135M's output layer
(576 x 49,152): the old call (`logits_to_keep=1`, a strided 3-D slice into the output layer) against hardex's
(the last position as an index tensor, hardex.generation.hf), on a CPU or a GPU, each in a process of its own.

    python perf/prefill_memory.py                  # CPU: growth of the process's peak resident memory
    python perf/prefill_memory.py --device cuda    # GPU: torch's peak allocated memory

On a CPU in bfloat16 the old call copied the output weight once per prompt (57 MB each, issue 44); the
script prints each call's growth over a warm-up, and the copies a prompt that growth amounts to.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

GIB = 2**30
OUTPUT_LAYER_BYTES = 576 * 49152 * 2  # one bfloat16 copy of SmolLM2-135M's output weight


def measure(device: str, call: str, n_prompts: int, prompt_tokens: int) -> float:
    """GiB the prefill of n_prompts grows the peak by, over a 2-prompt warm-up."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=576, intermediate_size=64, num_hidden_layers=1, num_attention_heads=9,
                      num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(device=device, dtype=torch.bfloat16).eval()
    for p in model.parameters():
        p.requires_grad_(False)

    def prefill(n: int) -> None:
        ids = torch.randint(0, 49152, (n, prompt_tokens), device=device)
        keep = 1 if call == "old" else torch.tensor([prompt_tokens - 1], device=device)
        with torch.inference_mode():
            model(input_ids=ids, use_cache=True, logits_to_keep=keep).logits[:, -1, :].float()

    prefill(2)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        prefill(n_prompts)
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / GIB
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    prefill(n_prompts)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024 / GIB


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--prompt-tokens", type=int, default=48)
    ap.add_argument("--call", choices=["old", "new"], help="measure one call in this process")
    args = ap.parse_args()
    if args.call:
        print(json.dumps(measure(args.device, args.call, args.prompts, args.prompt_tokens)))
        return
    print(f"prefill of {args.prompts} prompts x {args.prompt_tokens} tokens, frozen bfloat16 weights, on {args.device}")
    for call, what in [("old", "logits_to_keep=1"), ("new", "last position as an index tensor (hardex)")]:
        res = subprocess.run([sys.executable, __file__, "--device", args.device, "--prompts", str(args.prompts),
                              "--prompt-tokens", str(args.prompt_tokens), "--call", call],
                             capture_output=True, text=True)
        if res.returncode:
            print(f"{call}: failed\n{res.stderr[-1500:]}")
            continue
        grown = json.loads(res.stdout.strip().splitlines()[-1])
        print(f"{call} ({what}): peak grew {grown:.3f} GiB = {grown * GIB / OUTPUT_LAYER_BYTES:.1f} "
              f"output-layer copies ({grown * GIB / OUTPUT_LAYER_BYTES / args.prompts:.2f} a prompt)")


if __name__ == "__main__":
    main()
