"""Attention for one new token on a CPU, by two small matmuls instead of PyTorch's SDPA kernel.

At one query token, PyTorch's CPU SDPA (its flash kernel) costs 0.46-0.84 ms a call for 16 rows of
SmolLM2's 9 heads over ~100 positions, and 6 ms for 128 rows, where the arithmetic is a few MFLOP: a
third of a GRPO step's sampling went there (docs/performance.md, "Attention at one query token"). Grouping
the query heads that share a key/value head makes it two batched matmuls and a softmax, 5-8x faster, without
repeating the keys and values for every query head as transformers' eager attention does.

`decode_attention(model)` switches a model to it for a block (HFGenerator's generation): a transformers
attention function registered as "hardex_sdpa", which does this where a step has one query token on a CPU
and hands every other call (the prefill, a GPU, dropout, soft-capping, attention sinks) to transformers' SDPA
function unchanged, with SDPA's masks.
"""

from __future__ import annotations

import contextlib
from functools import cache

NAME = "hardex_sdpa"


def one_token_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                        is_causal=None, **kwargs):
    """transformers' attention-function interface: query (batch, heads, q, dim), key and value (batch, kv_heads,
    positions, dim), the mask boolean (True = attend), additive, or None; returns (batch, q, heads, dim), None."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    b, heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    special = (dropout and module.training) or any(kwargs.get(k) is not None for k in ("softcap", "position_bias",
                                                                                         "s_aux", "sinks"))
    if q_len != 1 or query.device.type != "cpu" or special or heads % kv_heads:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    import torch

    scale = dim**-0.5 if scaling is None else scaling
    group = heads // kv_heads  # query heads h * group .. h * group + group - 1 read key/value head h
    positions = key.shape[2]
    q = query.reshape(b * kv_heads, group, dim)
    # bmm over (row, head) batches, not matmul: the cache hands a view of its filled positions, which a reshape
    # keeps a view, and matmul's own folding of the batch dimensions copied (half of attention's time, 1 thread).
    # keys @ queries^T reads the cache in its own layout: the transposed product (q @ k^T) ran at half its speed
    scores = torch.bmm(key.reshape(b * kv_heads, positions, dim), q.transpose(1, 2))
    scores = scores.view(b, kv_heads, positions, group).float().mul_(scale)
    if attention_mask is not None:
        mask = attention_mask[..., -1:, :].transpose(-1, -2)  # (b or 1, 1, positions, 1): one query token
        if mask.dtype == torch.bool:
            scores.masked_fill_(~mask, float("-inf"))
        else:
            scores.add_(mask.float())
    # softmax along contiguous memory: over the strided positions axis it took 4x as long
    probs = torch.softmax(scores.transpose(-1, -2).contiguous(), dim=-1).to(value.dtype)  # (b, kv_heads, group, P)
    out = torch.bmm(probs.view(b * kv_heads, group, positions), value.reshape(b * kv_heads, positions, dim))
    return out.view(b, heads, 1, dim).transpose(1, 2).contiguous(), None


@cache
def _registered() -> str:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(NAME, one_token_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)
    return NAME


_sdpa_kept = False  # set by sdpa_kept()


@contextlib.contextmanager
def sdpa_kept():
    """While the block runs, decode_attention leaves every model on PyTorch's SDPA: the baseline the perf
    scripts time it against (their "-sdpa" modes)."""
    global _sdpa_kept
    before, _sdpa_kept = _sdpa_kept, True
    try:
        yield
    finally:
        _sdpa_kept = before


@contextlib.contextmanager
def decode_attention(model):
    """While the block runs, a model on a CPU with SDPA attention uses `one_token_attention` (the same masks; the
    same function as before wherever a step is not one token); any other model is left as it is."""
    config = getattr(model, "config", None)
    param = next(model.parameters(), None) if hasattr(model, "parameters") else None
    if (_sdpa_kept or config is None or getattr(config, "_attn_implementation", None) != "sdpa"
            or param is None or param.device.type != "cpu"):
        yield
        return
    config._attn_implementation = _registered()
    try:
        yield
    finally:
        config._attn_implementation = "sdpa"
