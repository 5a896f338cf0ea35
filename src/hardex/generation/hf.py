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
CUDA graph: a small model's step
is about a thousand kernels of a few microseconds each, and launching them from Python kept the card
idle most of the time (docs/gpu-runs.md). A graph needs fixed shapes and addresses, so that step
attends over the whole preallocated cache under a mask of the filled positions and writes its keys at
a slot held in a tensor (`PreallocLayer.slot`); a batch whose rows finish keeps its graph until they fit
the next smaller power of two (`bucket_rows`), the step computing padding rows behind them, then captures
again at that size.
"""

from __future__ import annotations

import hashlib
from contextlib import nullcontext
from functools import cache
from pathlib import Path

import numpy as np

from hardex.generation.decode_attention import (NAME as decode_attention_name, decode_attention,
                                                one_token_attention)
from hardex.generation.lean_step import LeanDecodeStep, adapters_merged, lean_unsupported
from hardex.generation.sampling import SAMPLE_ROWS, Sampling
from hardex.models import encode_prompt
from hardex.devices import allocator_fraction, gpu_share, pick_device
from hardex.precision import resolve_precision, torch_dtype

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def pick_dtype(dtype: str, device: str):
    """The torch dtype for a model's `dtype` setting on `device`: `auto` is the precision
    hardex.precision.resolve_precision gives the device (bfloat16 on a GPU that has it in hardware and on a
    CPU with hardware bfloat16, float32 elsewhere, an older GPU included)."""
    import torch

    if dtype == "auto":
        return torch_dtype(resolve_precision("auto", use_cpu=not str(device).startswith("cuda")))
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]


def stream_key(seed: int, key: str, sample: int) -> int:
    """64-bit key of the random stream of sample `sample` of the example `key` under `seed`."""
    h = hashlib.sha256(f"{int(seed)}\x1f{key}\x1f{int(sample)}".encode()).digest()
    return int.from_bytes(h[:8], "little")


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def stream_uniforms(keys: list[int], steps: int) -> np.ndarray:
    """Uniforms in (0, 1), shape (len(keys), steps): entry [i, t] depends on keys[i] and t only."""
    with np.errstate(over="ignore"):
        base = np.asarray(keys, dtype=np.uint64)[:, None]
        t = np.arange(1, steps + 1, dtype=np.uint64)[None, :]
        z = _splitmix64(base ^ _splitmix64(t * _GOLDEN))
    return ((z >> np.uint64(11)).astype(np.float64) + 0.5) / float(2**53)


def sample_tokens(logits, u, temperature: float, top_p: float, buffers: "SamplerBuffers | None" = None):
    """One token per row by inverse-CDF sampling with the given uniforms (greedy if temperature 0).

    Row i's token depends only on row i's logits and u[i], so rows are sampled SAMPLE_ROWS at a time: the
    same tokens, with float32 copies of a few hundred rows at most instead of the whole batch's. top_p keeps
    the smallest set of most likely tokens whose mass reaches top_p (ties in probability kept in vocabulary
    order). `buffers` (a decode loop's SamplerBuffers) holds those copies from one step to the next.
    """
    import torch

    if temperature == 0:
        return logits.argmax(-1)
    if logits.shape[0] > SAMPLE_ROWS:
        return torch.cat([_sample_rows(logits[i : i + SAMPLE_ROWS], u[i : i + SAMPLE_ROWS], temperature, top_p,
                                       buffers) for i in range(0, logits.shape[0], SAMPLE_ROWS)])
    return _sample_rows(logits, u, temperature, top_p, buffers)


class SamplerBuffers:
    """The sampler's two float32 (rows, vocabulary) arrays, allocated once for a decode loop. Allocated anew at
    every step, 25 MB each for 128 rows of a 49k-word vocabulary, the allocator handed fresh pages back to the
    system and faulted them in again: the softmax and cumulative sum took three times as long (36 ms a step
    against 11 at one thread)."""

    def __init__(self):
        self._a = self._b = None

    def take(self, like):
        """Two float32 arrays shaped as `like` (rows, vocabulary), views of the ones held where they fit."""
        import torch

        rows, vocab = like.shape
        if self._a is None or self._a.shape[0] < rows or self._a.shape[1] != vocab or self._a.device != like.device:
            self._a = torch.empty((rows, vocab), dtype=torch.float32, device=like.device)
            self._b = torch.empty_like(self._a)
        return self._a[:rows], self._b[:rows]


def _sample_rows(logits, u, temperature: float, top_p: float, buffers: SamplerBuffers | None = None):
    import torch

    if buffers is None:
        scaled, probs = logits.to(torch.float32, copy=True), None
    else:
        scaled, probs = buffers.take(logits)
        scaled.copy_(logits)
    # divided in place: one float32 copy of the rows' logits instead of two (the same quotients)
    probs = torch.softmax(scaled.div_(temperature), dim=-1, out=probs)
    if top_p < 1.0:
        sp, idx = probs.sort(dim=-1, descending=True, stable=True)
        cum = sp.cumsum(-1)
        sp = sp.masked_fill(cum - sp >= top_p, 0.0)
        cdf = sp.cumsum(-1)
        j = torch.searchsorted(cdf, (u.to(cdf.dtype) * cdf[:, -1]).unsqueeze(-1))
        return idx.gather(-1, j.clamp_(max=probs.shape[-1] - 1)).squeeze(-1)
    cdf = torch.cumsum(probs, -1, out=scaled)  # the scaled logits are spent: their array takes the sums
    j = torch.searchsorted(cdf, (u.to(cdf.dtype) * cdf[:, -1]).unsqueeze(-1))
    return j.clamp_(max=probs.shape[-1] - 1).squeeze(-1)


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


@cache  # one class: the fixed-shape step checks a cache's layers against it
def _prealloc_layer_class():
    """A DynamicLayer that writes into a buffer allocated once for the whole generation instead of
    concatenating a new tensor every step (DynamicLayer's torch.cat copies the whole cache at each
    token: a third of the decode time of a small model on CPU)."""
    from transformers.cache_utils import DynamicLayer

    class PreallocLayer(DynamicLayer):
        def __init__(self, capacity: int):
            super().__init__()
            self.capacity = capacity
            self.length = 0
            self.slot = None  # a device tensor of one position: fixed-shape decoding (HFGenerator's static steps)

        def lazy_initialization(self, key_states, value_states) -> None:
            self.dtype, self.device = key_states.dtype, key_states.device
            b, h, _, d = key_states.shape
            # zeros, not empty: the fixed-shape step attends over unwritten positions under a mask, and a masked
            # weight of 0 times a NaN left in recycled memory is NaN (its tokens depended on the allocator)
            self._k = key_states.new_zeros((b, h, self.capacity, d))
            self._v = value_states.new_zeros((b, h, self.capacity, value_states.shape[-1]))
            self.keys, self.values = self._k[:, :, :0], self._v[:, :, :0]
            self.is_initialized = True

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            if self.slot is not None:  # a fixed-shape decode step: one token written at the slot, the whole buffers
                self._k.index_copy_(2, self.slot, key_states)
                self._v.index_copy_(2, self.slot, value_states)
                return self._k, self._v
            end = self.length + key_states.shape[-2]
            if end > self.capacity:
                raise RuntimeError(f"KV cache capacity {self.capacity} exceeded")
            self._k[:, :, self.length : end] = key_states
            self._v[:, :, self.length : end] = value_states
            self.length = end
            self.keys, self.values = self._k[:, :, :end], self._v[:, :, :end]
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.length

        def _rebuild(self, fn) -> None:
            # over the whole buffers, unfilled positions too: fn's result is the new buffer, with no temporary of
            # the filled part to copy in (on a CPU those temporaries fragmented the heap: 0.5 GiB more at the peak
            # of a 1,200-row batch)
            if not self.is_initialized:
                return
            self._k, self._v = fn(self._k), fn(self._v)
            self.keys, self.values = self._k[:, :, : self.length], self._v[:, :, : self.length]

        def batch_repeat_interleave(self, repeats: int) -> None:
            self._rebuild(lambda t: t.repeat_interleave(repeats, dim=0))

        def batch_select_indices(self, indices) -> None:
            self._rebuild(lambda t: t.index_select(0, indices))

        def batch_compact(self, indices) -> None:
            """Rows `indices` moved to the front of the same buffers, whose addresses a CUDA graph holds; the
            rows behind them keep what they held."""
            if self.is_initialized:
                self._k[: len(indices)] = self._k.index_select(0, indices)
                self._v[: len(indices)] = self._v.index_select(0, indices)

    return PreallocLayer


def make_cache(config, capacity: int):
    """A DynamicCache whose full-attention layers are preallocated for `capacity` positions."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    cache = DynamicCache(config=config)
    layer_cls = _prealloc_layer_class()
    if cache.layers and all(type(layer) is DynamicLayer for layer in cache.layers):
        cache.layers = [layer_cls(capacity) for _ in cache.layers]
    return cache


DECODE_MODES = ("auto", "graph", "static", "dynamic", "lean")


def kv_cache_room(free: int, total: int, *, reserved: int, allocated: int, share: float) -> float:
    """Bytes a GPU generation batch may take: the card's `free` memory (cudaMemGetInfo, of `total`) and the
    blocks torch's allocator holds with no tensor in them (`reserved` less `allocated`: in a train job, the
    step's freed activations and gradients), which it hands out again before asking the card; where jobs share
    the card, within this job's slice, which caps what the allocator reserves (hardex.devices.hold_to_share).
    Counting those blocks as used split a 14B preset's rollouts in two batches every step (issue 64, G2)."""
    cached_free = max(reserved - allocated, 0)
    slice_bytes = total * allocator_fraction(share, total)
    return max(0.0, min(free + cached_free, slice_bytes - allocated))


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

    def generate_ids(self, prompts: list[str], n: int, sampling: Sampling, seed: int = 0, desc: str = "generate",
                     keys: list[str] | None = None, first_sample: int = 0) -> list[list[list[int]]]:
        """As `generate`, but the new token ids of each completion (up to and including its EOS)."""
        from tqdm.auto import tqdm

        greedy = sampling.temperature == 0
        if greedy and n != 1:
            raise ValueError("greedy decoding gives one completion per prompt; use n=1")
        if keys is not None and len(keys) != len(prompts):
            raise ValueError(f"{len(keys)} keys for {len(prompts)} prompts")
        keys = list(prompts) if keys is None else [str(k) for k in keys]
        encoded = [encode_prompt(self.tokenizer, p) for p in prompts]
        out: list[list[list[int]]] = [[] for _ in prompts]
        bar = tqdm(total=len(prompts), desc=desc, unit="prompt", disable=not self.progress, mininterval=2)
        for batch in self._batches([len(e) for e in encoded], n, sampling.max_new_tokens):
            streams = [stream_key(seed, keys[i], first_sample + j) for i in batch for j in range(n)]
            rows = self._generate_batch([encoded[i] for i in batch], n, sampling, streams)
            for b, i in enumerate(batch):
                out[i] = rows[b * n : (b + 1) * n]
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
        prealloc = _prealloc_layer_class()
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

    def _generate_batch(self, prompt_ids: list[list[int]], n: int, sampling: Sampling, streams: list[int]):
        """New token ids (up to and including EOS) of n samples of each prompt, prompt-major."""
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


def bucket_rows(rows: int, first: int) -> int:
    """The rows a fixed-shape step computes while `rows` of a batch that began with `first` are left: the
    smallest power of two that holds them, at most `first`. A batch then captures a graph at most
    1 + ceil(log2(first)) times as its rows finish, not at every new size (8-19 captures a batch on a real model,
    each a synchronize and a cache flush: issue 64, G3)."""
    return min(first, 1 << max(rows - 1, 0).bit_length())


class StaticDecodeStep:
    """One decode step of fixed shapes over a preallocated cache, replayed from a CUDA graph when `graph`, run by
    `lean` (a LeanDecodeStep) instead of the model's forward when given.

    Inputs live in tensors the step owns (the tokens, their positions, the slot they are written at), and the
    attention mask covers the whole cache: the prompt's tokens (left padding masked) and each new token's slot
    from the step that writes it. The first call at a batch size runs the step eagerly on a side stream (CUDA's
    warm-up) and captures it; later calls copy their inputs in and replay. `select` keeps some rows (finished
    rows leave the batch). With `buckets` the step computes `bucket_rows` rows, the real ones first and padding
    behind them (rows that finished or copies of a real one: attention and the MLP never mix rows, so padding
    changes no real row's logits); within a bucket the kept rows move inside the same buffers and the graph
    stays, below it the buffers shrink and the next call captures again. Without (the lean step on a CPU,
    where padded rows would cost their arithmetic) every new size is exact.

    A capture that fails at some rows (out of memory in the graph's pool; an architecture whose forward
    synchronises with the host fails at every size) is retried at the next smaller bucket: that model's steps
    above it run eagerly, one warning each time, and graphs are dropped for the model once a capture of one row
    fails (issue 64, G10).
    """

    failed_captures: set[str] = set()  # models decoding without graphs in this process
    capture_limits: dict[str, int] = {}  # a model's largest step to capture, below a capture that failed

    def __init__(self, model, cache, attn, width: int, graph: bool, lean=None, buckets: bool = True):
        import torch

        self.torch, self.model, self.cache, self.graph_wanted, self.lean = torch, model, cache, graph, lean
        dev = attn.device
        capacity = cache.layers[0].capacity
        self.valid = torch.zeros((attn.shape[0], capacity), dtype=torch.bool, device=dev)
        self.valid[:, :width] = attn.bool()
        self.slot = torch.zeros(1, dtype=torch.long, device=dev)
        for layer in cache.layers:
            layer.slot = self.slot
        self.first = attn.shape[0] if buckets else None
        self.captures = 0  # graphs captured over this step's batch
        self._new_batch(attn.shape[0])

    def _new_batch(self, rows: int) -> None:
        torch = self.torch
        self.rows = rows
        self.ids = torch.zeros((rows, 1), dtype=torch.long, device=self.valid.device)
        self.pos = torch.zeros((rows, 1), dtype=torch.long, device=self.valid.device)
        self.graph, self.logits = None, None

    def select(self, keep) -> None:
        """Keep rows `keep` of the batch, in this order, and move the cache's rows with them."""
        rows = len(keep) if self.first is None else bucket_rows(len(keep), self.first)
        if rows == self.rows:  # the same buffers: a captured graph replays on
            for layer in self.cache.layers:
                layer.batch_compact(keep)
            self.valid[: len(keep)] = self.valid.index_select(0, keep)
            return
        padded = self.torch.cat([keep, keep[-1:].expand(rows - len(keep))])  # copies of a real row
        self.cache.batch_select_indices(padded)
        self.valid = self.valid.index_select(0, padded)
        self._new_batch(rows)

    def _forward(self):
        self.valid.index_fill_(1, self.slot, True)
        if self.lean is not None:
            return self.lean(self.ids[:, 0], self.pos[:, 0], self.cache, self.valid[:, None, None, :])
        return self.model(input_ids=self.ids, attention_mask=self.valid[:, None, None, :], position_ids=self.pos,
                          past_key_values=self.cache, use_cache=True).logits[:, -1, :]

    def __call__(self, tokens, positions, slot: int):
        n = tokens.shape[0]
        self.ids[:n, 0].copy_(tokens)
        self.pos[:n, 0].copy_(positions)
        self.slot.fill_(slot)
        return self._step()[:n]

    def _step(self):
        if self.graph is not None:
            self.graph.replay()
            return self.logits
        name = type(self.model).__name__
        too_large = self.rows > self.capture_limits.get(name, self.rows)  # a capture this size failed
        if not self.graph_wanted or name in self.failed_captures or too_large:
            return self._forward()
        logits = self._warm_up()
        try:
            self.graph = self._capture()
            self.captures += 1
        except RuntimeError as e:
            import warnings

            self.graph, self.logits = None, None
            below = 1 << ((self.rows - 1).bit_length() - 1) if self.rows > 1 else 0  # the next smaller bucket
            if below:
                self.capture_limits[name] = below
                warnings.warn(f"the CUDA graph of {name}'s decode step failed to capture at {self.rows} rows ({e}): "
                              f"its steps of more than {below} rows decode without a graph, smaller ones capture",
                              stacklevel=3)
            else:
                self.failed_captures.add(name)
                warnings.warn(f"decoding {name} without a CUDA graph: its capture failed at every size down to one "
                              f"row ({e})", stacklevel=3)
        return logits

    def _warm_up(self):
        """This step computed eagerly on a side stream, as CUDA asks before a capture: its logits."""
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            logits = self._forward()
        torch.cuda.current_stream().wait_stream(side)
        return logits

    def _capture(self):
        """The step captured as a CUDA graph, its output in `logits`."""
        graph = self.torch.cuda.CUDAGraph()
        with self.torch.cuda.graph(graph):
            self.logits = self._forward()
        return graph
