"""CPU decoding's fast path: LoRA adapters merged into the weights, and a decode step for the Llama family
written against those weights.

At the shapes hardex decodes on a CPU (16 to a few hundred rows, one thread a job), a step is mostly its
matmuls, and the rest is what transformers' forward wraps around them: per layer a dozen module calls,
decorators and keyword plumbing, and with a LoRA adapter two more matmuls, a scale and an add for each of the
seven projections. `adapters_merged` adds each adapter's delta into a copy of its base weight for the block
(any architecture); `LeanDecodeStep` runs the same arithmetic as transformers' Llama, Mistral, Qwen2 and Qwen3
layers (RMSNorm, rotary embedding by the model's own rotary module, grouped-query attention by
`decode_attention.one_token_attention`, SiLU MLP) in a plain loop over the layers. HFGenerator uses both on a
CPU unless told to decode by transformers' forward (`decode="dynamic"`, config `generation.decode: dynamic`).

The lean step's logits equal transformers' forward's over the same cache bit for bit
(tests/unit/test_lean_step.py). A merged adapter rounds W + scale * B @ A once to the weights' dtype instead of
adding the adapter's product to the base layer's output, so samples can differ where a CDF boundary falls within
that rounding (pass rates against the unmerged path:
docs/performance.md, "The lean decode step"). Sampling is in eval mode: LoRA dropout is not applied.
"""

from __future__ import annotations

import contextlib

#: `config.model_type`s whose decoder layers are the arithmetic this step runs
ARCHITECTURES = ("llama", "mistral", "qwen2", "qwen3")


def lean_unsupported(model) -> str | None:
    """Why `model` (a transformers causal LM, or a PeftModel over one) cannot decode by LeanDecodeStep, or None."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(base, "config", None)
    kind = getattr(config, "model_type", None)
    if kind not in ARCHITECTURES:
        return f"architecture {kind!r} is not one of {', '.join(ARCHITECTURES)}"
    if getattr(config, "hidden_act", "silu") != "silu":
        return f"activation {config.hidden_act!r}"
    decoder = getattr(base, "model", None)
    if not all(hasattr(decoder, a) for a in ("embed_tokens", "layers", "norm", "rotary_emb")):
        return "a decoder without embed_tokens, layers, norm and rotary_emb"
    if has_active_adapters(model):
        return "adapters not merged (adapters_merged merges LoRA's for the block)"
    return None


def _attention_projections(layer):
    a = layer.self_attn
    return a.q_proj, a.k_proj, a.v_proj, a.o_proj


def _mlp_projections(layer):
    m = layer.mlp
    return m.gate_proj, m.up_proj, m.down_proj


def _has_active_adapter(proj) -> bool:
    """A PEFT LoRA layer that adds its adapters' output (not merged into the base weight, not disabled)."""
    if getattr(proj, "base_layer", None) is None:
        return False
    if getattr(proj, "merged", False) or getattr(proj, "disable_adapters", False):
        return False
    return any(a in getattr(proj, "lora_A", {}) for a in proj.active_adapters)


def _unmergeable(proj) -> bool:
    return not hasattr(proj, "get_delta_weight") or any(
        getattr(proj, "use_dora", {}).get(a, False) for a in proj.active_adapters)


def has_active_adapters(model) -> bool:
    """Whether any layer of `model` adds an adapter's output now (a PeftModel with its adapters enabled)."""
    return hasattr(model, "peft_config") and any(_has_active_adapter(m) for m in model.modules())


def _weight(proj):
    """(weight, bias) a projection applies, its adapters inactive (merged by adapters_merged, or disabled)."""
    layer = proj.get_base_layer() if hasattr(proj, "get_base_layer") else proj
    return layer.weight, layer.bias


@contextlib.contextmanager
def adapters_merged(model):
    """While the block runs, a PEFT model's active LoRA deltas are added into copies of their base weights
    (in float32, rounded once) and its adapters bypassed, so that generation runs the base model's operators
    alone; after it, the very base tensors are back (not the sum minus the delta, which bfloat16 would round
    away from them). A model without active adapters (none, or disabled) is left as it is."""
    import torch

    if not has_active_adapters(model):
        yield
        return
    adapter, saved = model.active_adapter, []
    try:
        with torch.no_grad():
            for module in model.get_base_model().modules():
                if _has_active_adapter(module):
                    if _unmergeable(module):
                        raise ValueError("adapters_merged: an adapter other than LoRA (DoRA, or one without "
                                         "get_delta_weight)")
                    layer = module.get_base_layer()
                    merged = (layer.weight.float() + module.get_delta_weight(adapter).float()).to(layer.weight.dtype)
                    saved.append((layer, layer.weight))
                    layer.weight = torch.nn.Parameter(merged, requires_grad=False)
        with model.disable_adapter():
            yield
    finally:
        for layer, weight in saved:
            layer.weight = weight


def _rms(x, weight, eps: float):
    # transformers' LlamaRMSNorm (and Mistral's, Qwen2's, Qwen3's), operation for operation: the same bits
    import torch

    dtype = x.dtype
    x = x.to(torch.float32)
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x.to(dtype)


def _rotate(x, cos, sin):
    # transformers' apply_rotary_pos_emb with its rotate_half, for one of q or k
    import torch

    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class LeanDecodeStep:
    """One token per row through every layer, writing keys and values into a preallocated cache
    (hardex.generation.kv_cache.PreallocLayer) and returning the last position's logits, (rows, vocab).

    HFGenerator runs it inside its fixed-shape step (StaticDecodeStep), which writes each token at a slot and
    attends over the whole buffer under a mask: in bfloat16 a batched matmul copies a view of the filled
    positions first, and those copies cost more than the products (at 128 rows, one thread). So its tokens are
    the fixed-shape step's (decode="static") to the bit, and transformers' dynamic step's up to rounding.

    Built once per generation batch from the weights the model computes with at that moment (adapters merged
    by adapters_merged), so a training step's rollouts see that step's policy. Call inside torch.inference_mode()."""

    def __init__(self, model, attention):
        """`attention`: a transformers attention function for one query token (HFGenerator passes
        decode_attention.one_token_attention, which its dynamic and fixed-shape steps use on a CPU)."""
        self.attention = attention
        reason = lean_unsupported(model)
        if reason:
            raise ValueError(f"no lean decode step for this model: {reason}")
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        config, decoder = base.config, base.model
        self.embed = decoder.embed_tokens.weight
        self.rotary = decoder.rotary_emb
        self.norm = (decoder.norm.weight, decoder.norm.variance_epsilon)
        self.head = _weight(base.lm_head)
        first = decoder.layers[0].self_attn
        self.head_dim = first.head_dim
        self.heads = config.num_attention_heads
        self.kv_heads = getattr(config, "num_key_value_heads", None) or self.heads
        self.layers = []
        for layer in decoder.layers:
            a = layer.self_attn
            qk_norm = [(n.weight, n.variance_epsilon) for n in (getattr(a, "q_norm", None), getattr(a, "k_norm", None))
                       if n is not None]
            self.layers.append((
                (layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon),
                [_weight(p) for p in _attention_projections(layer)],
                qk_norm or None,
                a,
                (layer.post_attention_layernorm.weight, layer.post_attention_layernorm.variance_epsilon),
                [_weight(p) for p in _mlp_projections(layer)],
            ))

    def __call__(self, tokens, positions, cache, mask):
        """tokens, positions: (rows,); mask: (rows, 1, 1, positions the cache hands back), True = attend."""
        import torch.nn.functional as F

        rows, hd = tokens.shape[0], self.head_dim
        h = F.embedding(tokens, self.embed)
        cos, sin = self.rotary(h, positions[:, None])  # (rows, 1, head_dim)
        cos, sin = cos[:, None], sin[:, None]  # broadcast over heads, as apply_rotary_pos_emb does
        for (ln1, attention, qk_norm, module, ln2, mlp), layer in zip(self.layers, cache.layers):
            (wq, bq), (wk, bk), (wv, bv), (wo, bo) = attention
            x = _rms(h, *ln1)
            q = F.linear(x, wq, bq).view(rows, 1, self.heads, hd)
            k = F.linear(x, wk, bk).view(rows, 1, self.kv_heads, hd)
            v = F.linear(x, wv, bv).view(rows, 1, self.kv_heads, hd)
            if qk_norm:  # Qwen3 normalises each head before the rotation
                q, k = _rms(q, *qk_norm[0]), _rms(k, *qk_norm[1])
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            keys, values = layer.update(_rotate(k, cos, sin), v)
            out, _ = self.attention(module, _rotate(q, cos, sin), keys, values, mask, scaling=module.scaling)
            h = h + F.linear(out.reshape(rows, self.heads * hd), wo, bo)
            (wg, bg), (wu, bu), (wd, bd) = mlp
            x = _rms(h, *ln2)
            h = h + F.linear(F.silu(F.linear(x, wg, bg)) * F.linear(x, wu, bu), wd, bd)
        return F.linear(_rms(h, *self.norm), *self.head)
