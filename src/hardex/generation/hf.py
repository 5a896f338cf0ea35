"""Hugging Face transformers generation backend: batched, n samples per prompt, seeded per sample.

`HFGenerator.generate` runs its own decode loop over the model's forward pass instead of
`model.generate`, because probing needs four things `generate` does not give together:

- **One prefill per prompt.** Each prompt is encoded once and its KV cache is expanded n times
  (`generate` with `num_return_sequences` repeats the prompt n times before the prefill).
- **Finished rows leave the batch.** A row that emits EOS stops costing compute: finished rows are
  dropped from the batch and the KV cache (in bulk, once enough of them have finished, so the cache
  is not copied every step). `generate` keeps decoding padding for finished rows until the whole
  batch is done.
- **Large, length-sorted batches under a token budget.** Prompts are sorted by token length and
  packed into batches of at most `token_budget` padded tokens (rows x (prompt + new tokens)).
- **Per-sample random streams.** Sample j of an example draws its randomness from a stream keyed
  by (seed, example key, j) alone -- never by batch composition, batch position or how many
  samples were asked for in the same call. Sampling is inverse-CDF sampling with one counter-based
  uniform per (stream, step) (splitmix64 of the stream key and the step). So the samples an
  example gets are the same whether it is generated with 3 or 300 other prompts, and asking for
  samples 4..7 later gives exactly samples 4..7 of a call that asked for 0..7 at once (what
  adaptive probing relies on). Floating-point results of a forward pass can still differ in the
  last bits with batch composition (different matrix-multiply blocking); a sample flips only when
  its uniform lands within that rounding error of a CDF boundary (measured in the tests and in
  docs/performance.md).

On a CPU (`decode="auto"`) a LoRA adapter is merged into the weights for each batch instead of adding two more
matmuls per projection, and the Llama family decodes by hardex.generation.lean_step's step: the same arithmetic
as transformers' forward without its per-layer wrapping. On a GPU the decode step is replayed from a captured
CUDA graph (hardex.generation.static_step), over a KV cache allocated once per batch
(hardex.generation.kv_cache); the random streams and the sampler are hardex.generation.token_sampler's.
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import cache
from pathlib import Path

from hardex.devices import gpu_share, pick_device
from hardex.generation.decode_attention import NAME as decode_attention_name, decode_attention, one_token_attention
from hardex.generation.kv_cache import kv_cache_room, make_cache, prealloc_layer_class
from hardex.generation.lean_step import LeanDecodeStep, adapters_merged, lean_unsupported
from hardex.generation.sampling import Sampling
from hardex.generation.static_step import StaticDecodeStep
from hardex.generation.token_sampler import SamplerBuffers, sample_tokens, stream_key, stream_uniforms
from hardex.models import encode_prompt
from hardex.precision import resolve_precision, torch_dtype


def pick_dtype(dtype: str, device: str):
    """The torch dtype for a model's `dtype` setting on `device`: `auto` is the precision
    hardex.precision.resolve_precision gives the device (bfloat16 on a GPU that has it in hardware and on a
    CPU with hardware bfloat16, float32 elsewhere, an older GPU included)."""
    import torch

    if dtype == "auto":
        return torch_dtype(resolve_precision("auto", use_cpu=not str(device).startswith("cuda")))
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]


def release_freed_host_memory() -> None:
    """Return freed heap pages to the system (glibc's malloc_trim; elsewhere nothing). glibc keeps the pages of
    freed allocations under its mmap threshold (up to 32 MB) for reuse: after the prefill's cache is copied for
    n samples, the prompts' own cache (0.35 GiB for 150 of SmolLM2's prompts) stayed resident beside it, and
    what one checkpoint's generation freed stayed beside the next's."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim():
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


DECODE_MODES = ("auto", "graph", "static", "dynamic", "lean")


class HFGenerator:
    """Batched sampling over a transformers causal LM (see the module docstring).

    `token_budget` bounds a batch's padded tokens (rows x (prompt + max_new_tokens)), which bounds
    its KV cache (on a GPU it is lowered to what fits in 70% of free memory); `max_batch_prompts`
    bounds its prompts. `prealloc`: a KV cache allocated once per batch (else transformers'
    DynamicCache, which concatenates at every step). `drop_fraction`: finished rows are removed
    from the batch once they are at least this share of it (0 = at every step). `ignore_eos`
    decodes max_new_tokens for every row (throughput benchmarks on random weights). `decode`: "graph" replays
    each decode step from a CUDA graph, "static" runs the same fixed-shape step without one (what the graph
    replays, on any device: its tests), "dynamic" transformers' forward over the filled cache only, "lean" the
    step of hardex.generation.lean_step (Llama-family architectures); "auto" = "graph" on a GPU with SDPA
    attention and a preallocated cache, "lean" on a CPU where the architecture has it, else "dynamic". `model` /
    `tokenizer`: objects already loaded (then `model_path` only names them).
    """

    def __init__(
        self,
        model_path: str,
        device: str | None = None,
        dtype: str = "auto",
        token_budget: int = 65536,
        max_batch_prompts: int = 256,
        progress: bool = True,
        attn_implementation: str | None = "sdpa",
        drop_fraction: float = 0.25,
        ignore_eos: bool = False,
        prealloc: bool = True,
        decode: str = "auto",
        model=None,
        tokenizer=None,
    ):
        import torch
        from transformers import AutoTokenizer

        self.device = pick_device(device)
        self.dtype = pick_dtype(dtype, self.device)
        self.model_path = model_path
        self.attn_implementation = attn_implementation
        self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(model_path)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.base = model if model is not None else self._load(model_path)
        self.base = self.base.to(self.device).eval()
        self.model = self.base
        self._peft = None  # the PeftModel wrapping `base`, once an adapter was loaded
        self._adapter_on = False
        self.token_budget = token_budget
        self.max_batch_prompts = max_batch_prompts
        self.progress = progress
        self.drop_fraction = drop_fraction
        self.ignore_eos = ignore_eos
        if decode not in DECODE_MODES:
            raise ValueError(f"decode: {decode!r} is not one of {', '.join(DECODE_MODES)}")
        self.prealloc = prealloc
        self.decode = decode
        self.tokens_generated = 0
        self.shapes: list[tuple[int, int, int]] | None = None  # a list to record forward passes in: perf/_common.py
        self._torch = torch
        eos = {self.tokenizer.eos_token_id}
        gen_eos = getattr(getattr(self.base, "generation_config", None), "eos_token_id", None)
        eos |= set(gen_eos) if isinstance(gen_eos, (list, tuple)) else {gen_eos}
        self.eos_ids = sorted(e for e in eos if e is not None)

    def _load(self, path):
        from transformers import AutoModelForCausalLM

        kwargs = {"dtype": self.dtype}
        if self.attn_implementation:
            kwargs["attn_implementation"] = self.attn_implementation
        try:
            return AutoModelForCausalLM.from_pretrained(str(path), **kwargs)
        except (ValueError, ImportError):  # an architecture without that attention implementation
            kwargs.pop("attn_implementation", None)
            return AutoModelForCausalLM.from_pretrained(str(path), **kwargs)

    @property
    def _on_cuda(self) -> bool:
        return str(self.device).startswith("cuda")

    def use_checkpoint(self, path: str | Path | None) -> None:
        """Switch weights: None = the base model; a LoRA adapter dir is applied on the loaded base
        (never merged into a copy on disk); a full checkpoint dir is loaded in place of the base."""
        if not self._on_cuda:
            # what the last checkpoint's generation freed: kept, an evaluate job climbed from 1.73 to 2.08 GiB over
            # two checkpoints (docs/memory-plan.md)
            release_freed_host_memory()
        if path is None:
            self.model, self._adapter_on = self.base if self._peft is None else self._peft, False
            return
        path = Path(path)
        if (path / "adapter_config.json").exists():
            from peft import PeftModel

            if self._peft is None:
                self._peft = PeftModel.from_pretrained(self.base, str(path), adapter_name="ckpt").eval()
            else:
                if "ckpt" in self._peft.peft_config:
                    self._peft.delete_adapter("ckpt")
                self._peft.load_adapter(str(path), adapter_name="ckpt")
                self._peft.set_adapter("ckpt")
            self._peft.eval()
            self.model, self._adapter_on = self._peft, True
        else:
            self.model, self._adapter_on = self._load(path).to(self.device).eval(), False

    def _context(self):
        # PEFT injects its layers into the base model in place: the base alone = adapters disabled
        if self._peft is not None and self.model is self._peft and not self._adapter_on:
            return self._peft.disable_adapter()
        # a CPU's fast path decodes a LoRA model with its adapters merged (a few-row step is bound by operator
        # calls, and unmerged adapters add four to each projection); "dynamic" is transformers' and PEFT's own
        if not self._on_cuda and self.decode != "dynamic":
            return adapters_merged(self.model)
        return nullcontext()

    def effective_token_budget(self) -> int:
        """`token_budget`, lowered on a GPU to what the KV cache can take in 70% of free memory (of the job's
        share of the card, where jobs share it)."""
        budget = int(self.token_budget)
        if not self._on_cuda:
            return budget
        try:
            cfg = getattr(self.model, "config", self.base.config).get_text_config()
            heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
            head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
            per_token = 2 * cfg.num_hidden_layers * heads * head_dim * self._torch.finfo(self.dtype).bits // 8
            cuda = self._torch.cuda
            free = kv_cache_room(*cuda.mem_get_info(self.device), reserved=cuda.memory_reserved(self.device),
                                 allocated=cuda.memory_allocated(self.device), share=gpu_share())
            return max(1, min(budget, int(0.7 * free / per_token)))
        except Exception:  # an unusual config: keep the configured budget
            return budget

    def _batches(self, lengths: list[int], n: int, max_new: int):
        order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
        budget = self.effective_token_budget()
        batch: list[int] = []
        for i in order:
            width = lengths[i] + max_new  # sorted ascending: the new prompt is the widest
            if batch and (
                (len(batch) + 1) * n * width > budget or len(batch) >= self.max_batch_prompts
            ):
                yield batch
                batch = []
            batch.append(i)
        if batch:
            yield batch

    def generate(self, prompts: list[str], n: int, sampling: Sampling, seed: int = 0, desc: str = "generate",
                 keys: list[str] | None = None, first_sample: int = 0) -> list[list[str]]:
        """n completions for each prompt (list of lists, in prompt order).

        Completion j of prompt i is sample `first_sample + j` of the stream keyed by
        (seed, keys[i]); `keys` defaults to the prompt texts (so equal prompts get equal samples).
        """
        ids = self.generate_ids(prompts, n, sampling, seed, desc, keys, first_sample)
        return [self.tokenizer.batch_decode(rows, skip_special_tokens=True) for rows in ids]

    def generate_with_greedy(self, prompts: list[str], n: int, sampling: Sampling, seed: int = 0,
                             desc: str = "generate",
                             keys: list[str] | None = None) -> tuple[list[list[str]], list[str]]:
        """(`generate`'s n samples of each prompt, each prompt's greedy completion), decoded in the same batches: a
        prompt's one prefill serves its samples and its greedy row (an evaluation's two passes were two prefills).
        The samples are those `generate` gives, the greedy completions those of temperature 0, up to rounding."""
        if sampling.temperature == 0:
            raise ValueError("generate_with_greedy samples n completions beside the greedy one: temperature > 0")
        ids = self.generate_ids(prompts, n, sampling, seed, desc, keys, greedy_rows=1)
        texts = [self.tokenizer.batch_decode(rows, skip_special_tokens=True) for rows in ids]
        return [t[:n] for t in texts], [t[n] for t in texts]

    def generate_ids(self, prompts: list[str], n: int, sampling: Sampling, seed: int = 0, desc: str = "generate",
                     keys: list[str] | None = None, first_sample: int = 0,
                     greedy_rows: int = 0) -> list[list[list[int]]]:
        """As `generate`, but the new token ids of each completion (up to and including its EOS); with
        `greedy_rows` 1, each prompt's greedy completion after its n samples."""
        from tqdm.auto import tqdm

        greedy = sampling.temperature == 0
        if greedy and n != 1:
            raise ValueError("greedy decoding gives one completion per prompt; use n=1")
        if greedy_rows not in (0, 1) or (greedy and greedy_rows):
            raise ValueError(f"greedy_rows {greedy_rows}: 0, or 1 beside samples at temperature > 0")
        if keys is not None and len(keys) != len(prompts):
            raise ValueError(f"{len(keys)} keys for {len(prompts)} prompts")
        keys = list(prompts) if keys is None else [str(k) for k in keys]
        encoded = [encode_prompt(self.tokenizer, p) for p in prompts]
        out: list[list[list[int]]] = [[] for _ in prompts]
        bar = tqdm(total=len(prompts), desc=desc, unit="prompt", disable=not self.progress, mininterval=2)
        per = n + greedy_rows  # rows a prompt decodes
        for batch in self._batches([len(e) for e in encoded], per, sampling.max_new_tokens):
            # a greedy row draws nothing: its stream is a placeholder
            streams = [stream_key(seed, keys[i], first_sample + j) if j < n else 0 for i in batch for j in range(per)]
            rows = self._generate_batch([encoded[i] for i in batch], per, sampling, streams, greedy_rows)
            for b, i in enumerate(batch):
                out[i] = rows[b * per : (b + 1) * per]
            bar.update(len(batch))
        bar.close()
        return out

    def _decode_mode(self, cache, config) -> str:
        """How this batch decodes: `decode` with "auto" resolved ("graph" on a GPU, "lean" on a CPU), and "dynamic"
        where the mode asked for is impossible: a cache layer not preallocated (a sliding window), attention other
        than SDPA for a fixed-shape step (which takes the boolean mask as it is), an architecture without a lean
        step."""
        mode = self.decode
        if mode == "auto":
            mode = "graph" if self._on_cuda else "lean"
        layers = getattr(cache, "layers", None) or []
        prealloc = prealloc_layer_class()
        if not layers or any(type(layer) is not prealloc for layer in layers):
            return "dynamic"
        if mode == "lean":
            # the prefill ran the model's forward, which a trainer may wrap in autocast (accelerate's mixed precision:
            # float32 weights computing in bfloat16, the values cached in bfloat16, the normed keys in float32): the
            # lean step computes in the weights' dtype, so where the prefill's cache holds another, transformers'
            # forward decodes
            if lean_unsupported(self.model):
                return "dynamic"
            first = layers[0]
            cached = {first._k.dtype, first._v.dtype} if first.is_initialized else set()
            return mode if cached <= {self.model.get_input_embeddings().weight.dtype} else "dynamic"
        if mode != "dynamic" and getattr(config, "_attn_implementation", None) not in ("sdpa", decode_attention_name):
            return "dynamic"
        return mode

    def _generate_batch(self, prompt_ids: list[list[int]], n: int, sampling: Sampling, streams: list[int],
                        greedy_rows: int = 0):
        """New token ids (up to and including EOS) of n rows of each prompt, prompt-major; the last `greedy_rows`
        of a prompt's rows take the most likely token, the others sample."""
        torch = self._torch
        from transformers import DynamicCache

        dev, model, max_new = self.device, self.model, sampling.max_new_tokens
        pad = self.tokenizer.pad_token_id
        width = max(len(p) for p in prompt_ids)
        ids = torch.full((len(prompt_ids), width), pad, dtype=torch.long)
        attn = torch.zeros((len(prompt_ids), width), dtype=torch.long)
        for b, p in enumerate(prompt_ids):  # left padding
            ids[b, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            attn[b, width - len(p) :] = 1
        ids, attn = ids.to(dev), attn.to(dev)
        pos = (attn.cumsum(-1) - 1).clamp_(min=0)
        greedy = sampling.temperature == 0
        u_all = None if greedy else torch.from_numpy(stream_uniforms(streams, max_new)).to(dev, torch.float32)
        eos = torch.tensor(self.eos_ids or [-1], device=dev)
        n_rows = len(prompt_ids) * n
        greedy_row = (torch.arange(n_rows, device=dev) % n >= n - greedy_rows) if greedy_rows else None
        tokens = torch.full((n_rows, max_new), pad, dtype=torch.long, device=dev)
        lengths = torch.full((n_rows,), max_new, dtype=torch.long, device=dev)
        # the context first: adapters_merged builds its weights outside inference mode (they are parameters)
        with self._context(), torch.inference_mode(), decode_attention(model):
            config = getattr(model, "config", self.base.config)
            cache = make_cache(config, width + max_new) if self.prealloc else DynamicCache(config=config)
            # the last position as an index tensor, not logits_to_keep=1: that slices a strided 3-D view into the
            # output layer, and with frozen weights (a loaded adapter) CPU bfloat16 copied the output weight once
            # per prompt (57 MB each for SmolLM2: 6-12 GiB evaluation jobs); an index gathers a contiguous copy
            last = torch.tensor([width - 1], device=dev)
            logits = model(input_ids=ids, attention_mask=attn, position_ids=pos, past_key_values=cache,
                           use_cache=True, logits_to_keep=last).logits[:, -1, :]
            if not torch.isfinite(logits).all():  # sampling would pick garbage tokens without a word
                raise FloatingPointError("the model's logits are not finite: its weights diverged")
            if n > 1:  # one prefill per prompt, n copies of its cache
                cache.batch_repeat_interleave(n)
                logits = logits.repeat_interleave(n, dim=0)
                attn = attn.repeat_interleave(n, dim=0)
                if dev == "cpu":
                    release_freed_host_memory()
            next_pos = attn.sum(-1)  # position of the first new token of each row
            self._record(len(prompt_ids), width, width)
            mode = self._decode_mode(cache, config)
            step = None
            if mode != "dynamic":  # the lean step is built from this batch's weights (adapters merged)
                step = StaticDecodeStep(model, cache, attn, width, graph=mode == "graph", buckets=mode != "lean",
                                        lean=LeanDecodeStep(model, one_token_attention) if mode == "lean" else None)
            buffers = SamplerBuffers()
            row = torch.arange(n_rows, device=dev)  # original row of each batch row
            alive = torch.ones(n_rows, dtype=torch.bool, device=dev)
            n_alive, n_batch = n_rows, n_rows
            for t in range(max_new):
                u = None if greedy else u_all[row, t]
                nxt = sample_tokens(logits, u, sampling.temperature, sampling.top_p, buffers)
                if greedy_row is not None:
                    nxt = torch.where(greedy_row[row], logits.argmax(-1), nxt)
                if n_alive == n_batch:
                    tokens[row, t] = nxt
                else:
                    tokens[row[alive], t] = nxt[alive]
                if t == max_new - 1:
                    break
                if not self.ignore_eos:
                    done = alive & torch.isin(nxt, eos)
                    n_done = int(done.sum())
                    if n_done:
                        lengths[row[done]] = t + 1
                        alive &= ~done
                        n_alive -= n_done
                        if n_alive == 0:
                            break
                        if n_batch - n_alive >= self.drop_fraction * n_batch:
                            keep = alive.nonzero().squeeze(-1)
                            if step is not None:  # it moves the cache's rows itself: padded to its bucket
                                step.select(keep)
                            else:
                                cache.batch_select_indices(keep)
                            attn, next_pos, row, nxt = attn[keep], next_pos[keep], row[keep], nxt[keep]
                            alive = alive[keep]
                            n_batch = n_alive
                self._record(n_batch, 1, width + t + 1)
                if step is not None:
                    logits = step(nxt, next_pos, width + t)
                else:
                    attn = torch.cat([attn, attn.new_ones((n_batch, 1))], dim=-1)
                    logits = model(input_ids=nxt[:, None], attention_mask=attn, position_ids=next_pos[:, None],
                                   past_key_values=cache, use_cache=True).logits[:, -1, :]
                next_pos = next_pos + 1
        lengths = lengths.tolist()
        self.tokens_generated += int(sum(lengths))
        tokens = tokens.tolist()
        return [r[:n_] for r, n_ in zip(tokens, lengths)]

    def _record(self, rows: int, tokens: int, positions: int) -> None:
        """Note a forward pass of `rows` rows of `tokens` new tokens over `positions` filled cache positions (its
        matmuls' shapes: perf/probe_throughput.py times them alone for the bound of a run)."""
        if self.shapes is not None:
            self.shapes.append((rows, tokens, positions))
