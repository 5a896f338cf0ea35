"""hardex's attention at one query token on a CPU (hardex.generation.decode_attention): the output of PyTorch's
SDPA under every mask a transformers model hands it, every other call handed to transformers' SDPA function,
and a model generating under it the tokens it generates under SDPA."""

from __future__ import annotations

import types

import pytest

from tests.unit.test_generation import assert_same_up_to_rounding, eos_gen, greedy_and_sampled  # noqa: F401


def reference(query, key, value, mask, scaling=None):
    """PyTorch's SDPA, its heads grouped over the key/value heads, in transformers' output layout."""
    import torch.nn.functional as F

    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling,
                                         enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("heads,kv_heads", [(9, 3), (4, 4), (8, 1)])
@pytest.mark.parametrize("mask_kind", ["bool", "additive", "none", "broadcast"])
def test_one_token_attention_is_sdpa_over_the_cache(dtype, heads, kv_heads, mask_kind):
    import torch

    from hardex.generation.decode_attention import one_token_attention

    torch.manual_seed(0)
    dt = getattr(torch, dtype)
    b, positions, dim, capacity = 5, 23, 16, 40
    query = torch.randn(b, heads, 1, dim, dtype=dt)
    # the cache's filled part: a view of a longer buffer, as the preallocated cache hands it
    key = torch.randn(b, kv_heads, capacity, dim, dtype=dt)[:, :, :positions]
    value = torch.randn(b, kv_heads, capacity, dim, dtype=dt)[:, :, :positions]
    attend = torch.rand(b, 1, 1, positions) > 0.3
    attend[..., -1] = True  # each row attends to its own new token
    mask = {"bool": attend, "additive": torch.zeros(b, 1, 1, positions, dtype=dt).masked_fill(~attend, -1e4),
            "none": None, "broadcast": attend[:1]}[mask_kind]
    module = types.SimpleNamespace(training=False, num_key_value_groups=heads // kv_heads, is_causal=True)
    out, weights = one_token_attention(module, query, key, value, mask, scaling=0.3)
    assert weights is None and out.shape == (b, 1, heads, dim)
    tol = 1e-5 if dtype == "float32" else 2e-2
    torch.testing.assert_close(out, reference(query, key, value, mask, scaling=0.3), atol=tol, rtol=tol)


def test_every_other_call_goes_to_transformers_sdpa(monkeypatch):
    """The prefill (several query tokens), dropout in training and soft-capping are SDPA's, unchanged."""
    import torch
    from transformers.integrations import sdpa_attention

    from hardex.generation import decode_attention

    calls = []
    monkeypatch.setattr(sdpa_attention, "sdpa_attention_forward",
                        lambda *a, **k: calls.append(k.get("dropout")) or ("sdpa", None))
    q, kv = torch.randn(2, 4, 3, 8), torch.randn(2, 2, 3, 8)
    module = types.SimpleNamespace(training=True, num_key_value_groups=2, is_causal=True)
    assert decode_attention.one_token_attention(module, q, kv, kv, None)[0] == "sdpa"  # three query tokens
    q1 = q[:, :, :1]
    assert decode_attention.one_token_attention(module, q1, kv, kv, None, dropout=0.1)[0] == "sdpa"
    assert decode_attention.one_token_attention(module, q1, kv, kv, None, softcap=30.0)[0] == "sdpa"
    module.training = False
    assert decode_attention.one_token_attention(module, q1, kv, kv, None, dropout=0.1)[0] != "sdpa"
    assert calls == [0.0, 0.1, 0.0]


def test_generation_switches_to_it_and_back_and_decodes_what_sdpa_decodes(eos_gen, monkeypatch):  # noqa: F811
    """HFGenerator decodes under it (the model's attention is SDPA again afterwards, for training), with the
    tokens SDPA decodes up to rounding, greedy and sampled, on both decode steps."""
    import contextlib

    from hardex.generation import decode_attention

    config = eos_gen.model.config
    seen = []
    real = decode_attention.one_token_attention
    monkeypatch.setattr(decode_attention, "one_token_attention", lambda *a, **k: seen.append(1) or real(*a, **k))
    decode_attention._registered.cache_clear()  # registers the counting function
    outs = {}
    try:
        for decode in ("dynamic", "static"):
            eos_gen.decode = decode
            for attention in ("hardex", "sdpa"):
                seen.clear()
                with decode_attention.sdpa_kept() if attention == "sdpa" else contextlib.nullcontext():
                    outs[decode, attention] = greedy_and_sampled(eos_gen)
                assert bool(seen) == (attention == "hardex") and config._attn_implementation == "sdpa"
    finally:
        eos_gen.decode = "auto"
        monkeypatch.undo()
        decode_attention._registered.cache_clear()
    for decode in ("dynamic", "static"):
        assert_same_up_to_rounding(outs[decode, "hardex"], outs[decode, "sdpa"], decode)
